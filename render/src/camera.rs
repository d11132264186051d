//! The orbit camera (as in the seed: orbit about a target, pan, zoom) and
//! the little matrix maths it needs. Matrices are column-major `[[f32; 4]; 4]`
//! (what WGSL's `mat4x4<f32>` reads), depth 0..1 as wgpu wants.

/// A column-major 4x4 matrix.
pub type Mat4 = [[f32; 4]; 4];

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn normalize(a: [f32; 3]) -> [f32; 3] {
    let l = dot(a, a).sqrt().max(1e-20);
    [a[0] / l, a[1] / l, a[2] / l]
}

/// `a * b`.
pub fn mul(a: &Mat4, b: &Mat4) -> Mat4 {
    std::array::from_fn(|c| std::array::from_fn(|r| (0..4).map(|k| a[k][r] * b[c][k]).sum()))
}

/// `m * v` for a point.
pub fn transform(m: &Mat4, v: [f32; 3]) -> [f32; 4] {
    std::array::from_fn(|r| m[0][r] * v[0] + m[1][r] * v[1] + m[2][r] * v[2] + m[3][r])
}

/// An orbit camera: looks at `target` from `distance` metres, turned by
/// `yaw` about the world y axis and tilted by `pitch` (radians).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Camera {
    /// The point looked at, metres.
    pub target: [f32; 3],
    /// Distance from the target, metres.
    pub distance: f32,
    /// Turn about +y, radians.
    pub yaw: f32,
    /// Tilt above the horizon, radians (kept within +-89 degrees).
    pub pitch: f32,
    /// Vertical field of view, radians. Default 45 degrees.
    pub fov_y: f32,
}

impl Camera {
    /// A camera that frames the box `[min, max]` from the front, a little above.
    pub fn frame(min: [f32; 3], max: [f32; 3]) -> Self {
        let target = std::array::from_fn(|k| 0.5 * (min[k] + max[k]));
        let radius = 0.5 * dot(sub(max, min), sub(max, min)).sqrt();
        let fov_y = 45f32.to_radians();
        Self {
            target,
            distance: (radius / (0.5 * fov_y).sin()).max(1e-3) * 1.05,
            yaw: 0.5,
            pitch: 0.45,
            fov_y,
        }
    }

    /// A camera framing particles (`xyz` centre, `w` radius) and the floor
    /// under them; the box `[min, max]` when there are none.
    pub fn frame_particles(pos: &[[f32; 4]], min: [f32; 3], max: [f32; 3]) -> Self {
        if pos.is_empty() {
            return Self::frame(min, max);
        }
        let mut lo = [f32::INFINITY; 3];
        let mut hi = [f32::NEG_INFINITY; 3];
        for p in pos {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k] - p[3]);
                hi[k] = hi[k].max(p[k] + p[3]);
            }
        }
        lo[1] = lo[1].min(min[1]);
        Self::frame(lo, hi)
    }

    /// Where the eye is, metres.
    pub fn eye(&self) -> [f32; 3] {
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.pitch.sin_cos();
        [
            self.target[0] + self.distance * cp * sy,
            self.target[1] + self.distance * sp,
            self.target[2] + self.distance * cp * cy,
        ]
    }

    /// Orbits by `dyaw`, `dpitch` radians (left drag).
    pub fn orbit(&mut self, dyaw: f32, dpitch: f32) {
        self.yaw += dyaw;
        self.pitch = (self.pitch + dpitch).clamp(-1.55, 1.55);
    }

    /// Moves the target in the view plane by `dx`, `dy` fractions of the view (right drag).
    pub fn pan(&mut self, dx: f32, dy: f32) {
        let view = self.view();
        let right = [view[0][0], view[1][0], view[2][0]];
        let up = [view[0][1], view[1][1], view[2][1]];
        let scale = self.distance * (0.5 * self.fov_y).tan() * 2.0;
        for k in 0..3 {
            self.target[k] += (-dx * right[k] + dy * up[k]) * scale;
        }
    }

    /// Zooms by `factor` (wheel): distance times `factor`.
    pub fn zoom(&mut self, factor: f32) {
        self.distance = (self.distance * factor).clamp(1e-3, 1e6);
    }

    /// World to view (right-handed, looking down -z).
    pub fn view(&self) -> Mat4 {
        let eye = self.eye();
        let f = normalize(sub(self.target, eye));
        let s = normalize(cross(f, [0.0, 1.0, 0.0]));
        let u = cross(s, f);
        [
            [s[0], u[0], -f[0], 0.0],
            [s[1], u[1], -f[1], 0.0],
            [s[2], u[2], -f[2], 0.0],
            [-dot(s, eye), -dot(u, eye), dot(f, eye), 1.0],
        ]
    }

    /// View to clip: perspective with depth 0 at `near`, 1 at `far`.
    pub fn projection(&self, aspect: f32) -> Mat4 {
        let near = (self.distance * 1e-3).max(1e-4);
        let far = self.distance * 20.0 + 10.0;
        let f = 1.0 / (0.5 * self.fov_y).tan();
        [
            [f / aspect, 0.0, 0.0, 0.0],
            [0.0, f, 0.0, 0.0],
            [0.0, 0.0, far / (near - far), -1.0],
            [0.0, 0.0, near * far / (near - far), 0.0],
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_projects_to_the_centre_and_in_front() {
        let cam = Camera::frame([-1.0, 0.0, -1.0], [1.0, 2.0, 1.0]);
        let clip = transform(&mul(&cam.projection(16.0 / 9.0), &cam.view()), cam.target);
        let (x, y, z) = (clip[0] / clip[3], clip[1] / clip[3], clip[2] / clip[3]);
        assert!(x.abs() < 1e-5 && y.abs() < 1e-5, "{x} {y}");
        assert!(z > 0.0 && z < 1.0, "depth {z}");
        // Every corner of the framed box is on screen.
        for corner in [
            [-1.0, 0.0, -1.0],
            [1.0, 2.0, 1.0],
            [1.0, 0.0, -1.0],
            [-1.0, 2.0, 1.0],
        ] {
            let c = transform(&mul(&cam.projection(1.0), &cam.view()), corner);
            assert!(
                (c[0] / c[3]).abs() <= 1.0 && (c[1] / c[3]).abs() <= 1.0,
                "{corner:?} off screen"
            );
        }
    }

    #[test]
    fn orbit_keeps_the_distance_and_pan_moves_the_target() {
        let mut cam = Camera::frame([0.0; 3], [1.0; 3]);
        let d = cam.distance;
        cam.orbit(1.0, 5.0);
        let e = cam.eye();
        let dist = dot(sub(e, cam.target), sub(e, cam.target)).sqrt();
        assert!((dist - d).abs() < 1e-4);
        assert!(cam.pitch <= 1.55);
        let t = cam.target;
        cam.pan(0.1, 0.0);
        assert!(cam.target != t);
        cam.zoom(0.5);
        assert!((cam.distance - 0.5 * d).abs() < 1e-5);
    }
}
