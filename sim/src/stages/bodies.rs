//! Stage `bodies`, CPU twin of `bodies.wgsl`: rigid bodies made of
//! particles. The quaternion and matrix helpers, and the body kernels
//! (`body_begin`, `body_particles`, `body_reduce`, `body_end`); the body
//! itself is [`BodyGpu`] in `common.rs`.
//!
//! A body's particles are ordinary particles (they collide like any other,
//! never with each other); each step their world positions and velocities
//! come from the body's state, and their contact forces are summed into the
//! body's force and torque in a fixed order (by particle id, 256 strided
//! partial sums then a fixed tree, exactly as one GPU workgroup does), so the
//! sum never depends on where the particles sit in memory.

use rayon::prelude::*;

pub use super::common::BodyGpu;
use super::common::{V3, add, cross, dot, scale, sub};
use crate::cpu::{CpuSim, MIN_LEN};
use crate::setup::FREE;

/// A body that moves under forces.
pub const DYNAMIC: u32 = 0;
/// A body that never moves (scenery).
pub const STATIC: u32 = 1;
/// A body that moves with a prescribed velocity, unaffected by forces.
pub const KINEMATIC: u32 = 2;

/// Lanes of one reduction workgroup (`WG` in `common.wgsl`).
pub const REDUCE_LANES: usize = 256;

#[inline(always)]
pub(crate) fn xyz(v: &[f32; 4]) -> V3 {
    [v[0], v[1], v[2]]
}

/// Hamilton product `a b` of quaternions `(x, y, z, w)`.
#[inline(always)]
pub fn quat_mul(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
    [
        a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1],
        a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0],
        a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3],
        a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2],
    ]
}

/// `q / |q|`.
#[inline(always)]
pub fn quat_normalize(q: [f32; 4]) -> [f32; 4] {
    let len = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
    [q[0] / len, q[1] / len, q[2] / len, q[3] / len]
}

/// The rotation by the vector `theta` (axis times angle, radians).
#[inline(always)]
pub fn quat_exp(theta: V3) -> [f32; 4] {
    let angle = dot(theta, theta).sqrt();
    if angle < 1e-12 {
        return [0.5 * theta[0], 0.5 * theta[1], 0.5 * theta[2], 1.0];
    }
    let s = (0.5 * angle).sin() / angle;
    [
        theta[0] * s,
        theta[1] * s,
        theta[2] * s,
        (0.5 * angle).cos(),
    ]
}

/// `v` rotated by the unit quaternion `q`.
#[inline(always)]
pub fn rotate(q: [f32; 4], v: V3) -> V3 {
    let u = [q[0], q[1], q[2]];
    let t = scale(cross(u, v), 2.0);
    add(add(v, scale(t, q[3])), cross(u, t))
}

/// `v` rotated by the inverse of the unit quaternion `q`.
#[inline(always)]
pub fn rotate_inv(q: [f32; 4], v: V3) -> V3 {
    rotate([-q[0], -q[1], -q[2], q[3]], v)
}

/// World angular velocity `R I^-1 R^T L` of a body.
#[inline(always)]
pub fn world_omega(b: &BodyGpu, q: [f32; 4], l: V3) -> V3 {
    let lb = rotate_inv(q, l);
    let i = &b.inv_inertia;
    let wb = [
        dot(xyz(&i[0]), lb),
        dot(xyz(&i[1]), lb),
        dot(xyz(&i[2]), lb),
    ];
    rotate(q, wb)
}

/// Kernel `body_begin`: half kick with the last body force and torque,
/// drift, rotate. Static bodies never change.
pub fn body_begin(bodies: &mut [BodyGpu], force: &[[f32; 4]], torque: &[[f32; 4]], dt: f32) {
    let half = 0.5 * dt;
    for (k, b) in bodies.iter_mut().enumerate() {
        match b.kind() {
            STATIC => continue,
            DYNAMIC => {
                let p = add(xyz(&b.momentum), scale(xyz(&force[k]), half));
                let l = add(xyz(&b.angular_momentum), scale(xyz(&torque[k]), half));
                let v = scale(p, b.position[3]);
                let x = add(xyz(&b.position), scale(v, dt));
                let q = b.orientation;
                let w = world_omega(b, q, l);
                let q = quat_normalize(quat_mul(quat_exp(scale(w, dt)), q));
                let w = world_omega(b, q, l);
                b.position = [x[0], x[1], x[2], b.position[3]];
                b.orientation = q;
                b.momentum = [p[0], p[1], p[2], 0.0];
                b.angular_momentum = [l[0], l[1], l[2], 0.0];
                b.velocity = [v[0], v[1], v[2], 0.0];
                b.omega = [w[0], w[1], w[2], 0.0];
            }
            _ => {
                let v = xyz(&b.velocity);
                let w = xyz(&b.omega);
                let x = add(xyz(&b.position), scale(v, dt));
                b.position = [x[0], x[1], x[2], b.position[3]];
                b.orientation = quat_normalize(quat_mul(quat_exp(scale(w, dt)), b.orientation));
            }
        }
    }
}

/// Kernel `body_end`: the second half kick of dynamic bodies.
pub fn body_end(bodies: &mut [BodyGpu], force: &[[f32; 4]], torque: &[[f32; 4]], dt: f32) {
    let half = 0.5 * dt;
    for (k, b) in bodies.iter_mut().enumerate() {
        if b.kind() != DYNAMIC {
            continue;
        }
        let p = add(xyz(&b.momentum), scale(xyz(&force[k]), half));
        let l = add(xyz(&b.angular_momentum), scale(xyz(&torque[k]), half));
        let v = scale(p, b.position[3]);
        let w = world_omega(b, b.orientation, l);
        b.momentum = [p[0], p[1], p[2], 0.0];
        b.angular_momentum = [l[0], l[1], l[2], 0.0];
        b.velocity = [v[0], v[1], v[2], 0.0];
        b.omega = [w[0], w[1], w[2], 0.0];
    }
}

/// Kernel `body_particles` for one particle: world position, velocity and
/// angular velocity from its body's state and its body-frame offset `local`.
#[inline(always)]
pub fn body_particle(
    b: &BodyGpu,
    local: &[f32; 4],
    pos: &mut [f32; 4],
    vel: &mut [f32; 4],
    angvel: &mut [f32; 4],
) {
    let r = rotate(b.orientation, xyz(local));
    let x = add(xyz(&b.position), r);
    let w = xyz(&b.omega);
    let v = add(xyz(&b.velocity), cross(w, r));
    *pos = [x[0], x[1], x[2], pos[3]];
    *vel = [v[0], v[1], v[2], vel[3]];
    *angvel = [w[0], w[1], w[2], angvel[3]];
}

/// Kernel `body_reduce` for one body: the sum of its particles' forces, and
/// of their moments about the centre of mass plus their contact torques, in
/// the order of one 256-lane workgroup (lane `t` sums particles `t, t+256,
/// ...` in id order, then a tree halves the lanes).
pub fn body_reduce(
    b: &BodyGpu,
    inv_index: &[u32],
    pos: &[[f32; 4]],
    force: &[[f32; 4]],
    torque: &[[f32; 4]],
) -> ([f32; 4], [f32; 4]) {
    let (first, count) = (b.range[0] as usize, b.range[1] as usize);
    let centre = xyz(&b.position);
    let mut lanes_f = [[0.0f32; 3]; REDUCE_LANES];
    let mut lanes_t = [[0.0f32; 3]; REDUCE_LANES];
    for lane in 0..REDUCE_LANES {
        let mut f = [0.0f32; 3];
        let mut t = [0.0f32; 3];
        let mut s = lane;
        while s < count {
            let k = inv_index[first + s] as usize;
            let fk = xyz(&force[k]);
            let r = sub(xyz(&pos[k]), centre);
            f = add(f, fk);
            t = add(t, add(cross(r, fk), xyz(&torque[k])));
            s += REDUCE_LANES;
        }
        lanes_f[lane] = f;
        lanes_t[lane] = t;
    }
    let mut width = REDUCE_LANES / 2;
    while width > 0 {
        for lane in 0..width {
            lanes_f[lane] = add(lanes_f[lane], lanes_f[lane + width]);
            lanes_t[lane] = add(lanes_t[lane], lanes_t[lane + width]);
        }
        width /= 2;
    }
    let (f, t) = (lanes_f[0], lanes_t[0]);
    ([f[0], f[1], f[2], 0.0], [t[0], t[1], t[2], 0.0])
}

/// Intrinsic x-y-z Euler angles (degrees) as a quaternion.
pub fn euler_xyz_degrees(angles: [f32; 3]) -> [f32; 4] {
    let axis = |k: usize| {
        let mut t = [0.0f32; 3];
        t[k] = angles[k].to_radians();
        quat_exp(t)
    };
    quat_normalize(quat_mul(quat_mul(axis(0), axis(1)), axis(2)))
}

/// The inverse of a symmetric positive 3x3 matrix (f64 for accuracy).
pub fn invert_symmetric(m: [[f32; 3]; 3]) -> Option<[[f32; 3]; 3]> {
    let a: [[f64; 3]; 3] = m.map(|r| r.map(f64::from));
    let c = |i: usize, j: usize| {
        let (i1, i2) = ((i + 1) % 3, (i + 2) % 3);
        let (j1, j2) = ((j + 1) % 3, (j + 2) % 3);
        a[i1][j1] * a[i2][j2] - a[i1][j2] * a[i2][j1]
    };
    let det = a[0][0] * c(0, 0) + a[0][1] * c(0, 1) + a[0][2] * c(0, 2);
    if !(det.is_finite() && det > 0.0) {
        return None;
    }
    // Cofactor transpose over the determinant.
    Some(std::array::from_fn(|i| {
        std::array::from_fn(|j| (c(j, i) / det) as f32)
    }))
}

impl CpuSim {
    /// Kernel `body_begin`.
    pub fn body_begin(&mut self) {
        body_begin(
            &mut self.bodies,
            &self.body_force,
            &self.body_torque,
            self.params.dt,
        );
    }

    /// Kernel `body_end`.
    pub fn body_end(&mut self) {
        body_end(
            &mut self.bodies,
            &self.body_force,
            &self.body_torque,
            self.params.dt,
        );
    }

    /// Kernel `body_particles`: body particles follow their bodies.
    pub fn body_particles(&mut self) {
        if self.bodies.is_empty() {
            return;
        }
        let bodies = &self.bodies;
        let s = &mut self.state;
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(s.meta.par_iter().zip(s.local.par_iter()))
            .with_min_len(MIN_LEN)
            .for_each(|(((p, v), w), (m, l))| {
                if m[2] != FREE {
                    body_particle(&bodies[m[2] as usize], l, p, v, w);
                }
            });
        self.check_nan();
    }

    /// Kernel `body_reduce`: every body's force and torque.
    pub fn body_reduce(&mut self) {
        let s = &self.state;
        let (inv, bodies) = (&self.inv_index, &self.bodies);
        let sums: Vec<([f32; 4], [f32; 4])> = bodies
            .par_iter()
            .map(|b| body_reduce(b, inv, &s.pos, &s.force, &s.torque))
            .collect();
        for (k, (f, t)) in sums.into_iter().enumerate() {
            self.body_force[k] = f;
            self.body_torque[k] = t;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotations_compose_and_invert() {
        let q = euler_xyz_degrees([30.0, 45.0, 60.0]);
        let v = [0.3, -1.2, 2.0];
        let back = rotate_inv(q, rotate(q, v));
        for k in 0..3 {
            assert!((back[k] - v[k]).abs() < 1e-5);
        }
        // 90 degrees about z takes x to y.
        let r = rotate(euler_xyz_degrees([0.0, 0.0, 90.0]), [1.0, 0.0, 0.0]);
        assert!((r[0]).abs() < 1e-6 && (r[1] - 1.0).abs() < 1e-6);
        // exp of a rotation vector = the same rotation.
        let e = rotate(
            quat_exp([0.0, 0.0, std::f32::consts::FRAC_PI_2]),
            [1.0, 0.0, 0.0],
        );
        assert!((e[1] - 1.0).abs() < 1e-6);
    }

    #[test]
    fn inverse_of_an_inertia_tensor() {
        let m = [[2.0, 0.1, 0.0], [0.1, 3.0, 0.2], [0.0, 0.2, 4.0]];
        let inv = invert_symmetric(m).expect("invertible");
        for i in 0..3 {
            for j in 0..3 {
                let p: f32 = (0..3).map(|k| m[i][k] * inv[k][j]).sum();
                assert!((p - f32::from(u8::from(i == j))).abs() < 1e-6);
            }
        }
        assert!(invert_symmetric([[0.0; 3]; 3]).is_none());
    }
}
