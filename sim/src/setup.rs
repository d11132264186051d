//! [`SimSetup`]: everything a simulation backend needs, derived once from a
//! [`Scene`]: particle arrays in the layout the kernels use, the material
//! pair table, walls, the cell grid, the time step and the integrator.
//!
//! Both backends (GPU and the CPU twin) start from the same `SimSetup`, so a
//! scene means exactly the same thing on both.

use std::path::Path;

use bytemuck::{Pod, Zeroable};

use pellet_formats::assets::ParticleBody;
use pellet_formats::scene::{
    BodySpec, DEFAULT_MATERIAL, Integrator, Material, Motion, Scene, TimeStep,
};

use super::SimError;
use super::body::{
    BodyGpu, DYNAMIC, KINEMATIC, STATIC, body_particle, euler_xyz_degrees, invert_symmetric, rotate,
};
use super::grid::{GridMode, GridSpec};

/// Time steps per contact duration chosen by `time_step = "auto"`.
pub const AUTO_STEPS_PER_CONTACT: f64 = 20.0;

/// Fewest time steps per contact an explicit step may give without a warning.
pub const MIN_STEPS_PER_CONTACT: f64 = 10.0;

/// History partner id of wall `w`: `WALL_ID_BASE + w` (particle ids stay below it).
pub const WALL_ID_BASE: u32 = 0xFFFF_FF00;

/// Most walls one scene may have (domain faces included).
pub const MAX_WALLS: usize = 64;

/// Most materials one scene may define.
pub const MAX_MATERIALS: usize = 64;

/// Most contact history slots per particle.
pub const MAX_SLOTS: u32 = 256;

/// Body index of a free particle.
pub const FREE: u32 = u32::MAX;

/// Contact parameters of one pair of materials, as the kernels read them
/// (two `vec4<f32>`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct PairParams {
    /// Normal stiffness `kn`, N/m.
    pub kn: f32,
    /// Tangential stiffness `kt`, N/m.
    pub kt: f32,
    /// Coulomb friction coefficient.
    pub mu: f32,
    /// `2 beta` of the restitution law: normal damping `c = 2 beta sqrt(m_eff kn)`.
    pub damping_ratio2: f32,
    /// Absolute normal damping, N s/m, used instead when positive.
    pub damping_abs: f32,
    /// Padding.
    pub pad: [f32; 3],
}

/// One wall as the kernels read it (two `vec4<f32>`): particles stay where
/// `dot(normal, x) >= offset`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct WallParams {
    /// Unit normal pointing into the allowed side.
    pub normal: [f32; 3],
    /// `dot(normal, point)` for any point on the plane, metres.
    pub offset: f32,
    /// Material index.
    pub material: u32,
    /// Simulated time at which the wall disappears, seconds (infinity: never).
    pub remove_at: f32,
    /// Padding.
    pub pad: [u32; 2],
}

/// Per-particle arrays in kernel layout, in input order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParticleArrays {
    /// `xyz` position (m), `w` radius (m).
    pub pos: Vec<[f32; 4]>,
    /// `xyz` velocity (m/s), `w` inverse mass (1/kg).
    pub vel: Vec<[f32; 4]>,
    /// `xyz` angular velocity (rad/s), `w` inverse moment of inertia (1/(kg m^2)).
    pub angvel: Vec<[f32; 4]>,
    /// `x` persistent id (input order), `y` material, `z` body ([`FREE`]), `w` unused.
    pub meta: Vec<[u32; 4]>,
    /// Body particles: offset from the body's centre of mass in body axes (m); zero for free ones.
    pub local: Vec<[f32; 4]>,
}

impl ParticleArrays {
    /// Number of particles.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }
}

/// Options that are not part of a scene.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimOptions {
    /// Dense or hashed cells; default chooses by size.
    pub grid: GridMode,
}

/// What a `[[bodies]]` entry needs baked: its mesh at a voxel size.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyRequest {
    /// The mesh file, resolved against the scene's folder.
    pub mesh: std::path::PathBuf,
    /// Particle radius, metres (voxels are twice this).
    pub particle_radius: f32,
    /// Density used for the mass properties, kg/m^3.
    pub density: f32,
    /// Uniform scale applied to the mesh first.
    pub scale: f32,
    /// Solid or shell.
    pub fill: pellet_formats::assets::FillMode,
}

/// Supplies the particle body for each `[[bodies]]` entry (baking it, or
/// reading it from a baked folder or a cache).
pub trait BodySource {
    /// The body for entry `index` of the scene, as `request` describes.
    fn body(&mut self, index: usize, request: &BodyRequest) -> Result<ParticleBody, SimError>;
}

/// A source for scenes without bodies: every request is an error.
#[derive(Debug, Default)]
pub struct NoBodies;

impl BodySource for NoBodies {
    fn body(&mut self, index: usize, request: &BodyRequest) -> Result<ParticleBody, SimError> {
        Err(SimError::Unsupported(format!(
            "bodies[{index}] ({}) needs baking, and no baker was given",
            request.mesh.display()
        )))
    }
}

/// A scene turned into what the kernels need.
#[derive(Debug, Clone)]
pub struct SimSetup {
    /// Scene name.
    pub name: String,
    /// Particles in input order.
    pub particles: ParticleArrays,
    /// Material names, by index.
    pub material_names: Vec<String>,
    /// `material_count^2` pair parameters, row-major, symmetric.
    pub pairs: Vec<PairParams>,
    /// Walls, domain faces first.
    pub walls: Vec<WallParams>,
    /// Cell grid.
    pub grid: GridSpec,
    /// Gravity, m/s^2.
    pub gravity: [f32; 3],
    /// Rigid bodies; their particles follow the free ones in `particles`.
    pub bodies: Vec<BodyGpu>,
    /// Body names (`[[bodies]]` name, with the copy index for arrays).
    pub body_names: Vec<String>,
    /// Time step, seconds.
    pub dt: f64,
    /// Shortest contact duration, seconds.
    pub contact_time: f64,
    /// Time integrator.
    pub integrator: Integrator,
    /// Contact history slots per particle.
    pub slots: u32,
    /// Simulated seconds a headless run takes when not told a step count.
    pub duration: f64,
    /// The domain box, metres: lower corner.
    pub domain_min: [f32; 3],
    /// The domain box, metres: upper corner.
    pub domain_max: [f32; 3],
    /// Faces of the domain that are walls, as bits: `1 << (2 * axis)` the
    /// lower face of `axis`, `1 << (2 * axis + 1)` the upper one. A particle
    /// whose centre is more than its radius beyond a closed face has gone
    /// through the wall: the run stops (`SimError::Escaped`).
    pub closed_faces: u32,
}

/// Whether the particle at `p` (`xyz` centre, `w` radius) lies more than its
/// radius beyond one of the `closed` faces of the box `lo..hi` (the test the
/// kernels make each step; NaN compares false). Returns the face bit.
pub fn escaped_face(p: [f32; 4], lo: [f32; 3], hi: [f32; 3], closed: u32) -> Option<u32> {
    (0..3).find_map(|a| {
        if closed & (1 << (2 * a)) != 0 && p[a] < lo[a] - p[3] {
            Some(1 << (2 * a))
        } else if closed & (1 << (2 * a + 1)) != 0 && p[a] > hi[a] + p[3] {
            Some(1 << (2 * a + 1))
        } else {
            None
        }
    })
}

/// `x min`, `y max`, ... for a face bit of [`SimSetup::closed_faces`].
pub fn face_name(bit: u32) -> String {
    let k = bit.trailing_zeros();
    format!(
        "{} {}",
        ["x", "y", "z"][(k / 2).min(2) as usize],
        if k.is_multiple_of(2) { "min" } else { "max" }
    )
}

/// Overlap, as a fraction of the smaller diameter, above which starting
/// particles are reported: saved settled piles overlap by well under this,
/// duplicated or misplaced particles by far more (coincident ones by 100 %).
pub const OVERLAP_WARNING: f32 = 0.05;

/// Pairs of particles (not of the same body) that start overlapping by more
/// than [`OVERLAP_WARNING`] of the smaller diameter: their count, and the
/// worst one as (persistent ids, overlap in metres, fraction of the smaller
/// diameter).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InitialOverlaps {
    /// Pairs over the threshold.
    pub pairs: u64,
    /// The deepest: ids `a < b`.
    pub worst: (u32, u32),
    /// Its overlap, metres.
    pub depth: f32,
    /// Its overlap over the smaller diameter.
    pub fraction: f32,
}

/// Finds [`InitialOverlaps`] with a hash grid of cells twice the largest
/// radius (each pair is tested once). `None` when no pair is over the threshold.
pub fn initial_overlaps(particles: &ParticleArrays) -> Option<InitialOverlaps> {
    let n = particles.len();
    let r_max = particles.pos.iter().map(|p| p[3]).fold(0.0f32, f32::max);
    if n < 2 || r_max.is_nan() || r_max <= 0.0 {
        return None;
    }
    let cell = 2.0 * r_max;
    let key = |p: &[f32; 4]| -> [i64; 3] { std::array::from_fn(|a| (p[a] / cell).floor() as i64) };
    let mut cells: std::collections::HashMap<[i64; 3], Vec<u32>> =
        std::collections::HashMap::with_capacity(n);
    for (i, p) in particles.pos.iter().enumerate() {
        cells.entry(key(p)).or_default().push(i as u32);
    }
    let mut found: Option<InitialOverlaps> = None;
    for (i, p) in particles.pos.iter().enumerate() {
        let c = key(p);
        for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let Some(list) = cells.get(&[c[0] + dx, c[1] + dy, c[2] + dz]) else {
                        continue;
                    };
                    for &j in list {
                        let j = j as usize;
                        let body = particles.meta[i][2];
                        if j <= i || (body != FREE && body == particles.meta[j][2]) {
                            continue;
                        }
                        let q = &particles.pos[j];
                        let d =
                            ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2))
                                .sqrt();
                        let depth = p[3] + q[3] - d;
                        let fraction = depth / (2.0 * p[3].min(q[3]));
                        if fraction > OVERLAP_WARNING {
                            let (a, b) = (particles.meta[i][0], particles.meta[j][0]);
                            let f = found.get_or_insert(InitialOverlaps {
                                pairs: 0,
                                worst: (a.min(b), a.max(b)),
                                depth,
                                fraction,
                            });
                            f.pairs += 1;
                            if depth > f.depth {
                                f.worst = (a.min(b), a.max(b));
                                f.depth = depth;
                                f.fraction = fraction;
                            }
                        }
                    }
                }
            }
        }
    }
    found
}

/// Normal damping ratio `beta` giving restitution `e` for a linear spring-dashpot.
pub fn damping_ratio(e: f64) -> f64 {
    if e <= 1e-9 {
        return 1.0;
    }
    let ln = e.ln();
    -ln / (ln * ln + std::f64::consts::PI * std::f64::consts::PI).sqrt()
}

/// The restitution a pair's damping ratio gives (the inverse of
/// [`damping_ratio`]); 1 for an undamped pair.
pub fn restitution_of(pair: &PairParams) -> f32 {
    let beta = f64::from(pair.damping_ratio2) / 2.0;
    if beta <= 0.0 {
        return 1.0;
    }
    (-std::f64::consts::PI * beta / (1.0 - beta * beta).max(1e-9).sqrt()).exp() as f32
}

fn mix_pair(a: &Material, b: &Material) -> PairParams {
    let harmonic = |x: f32, y: f32| 2.0 * x * y / (x + y);
    let kn = harmonic(a.stiffness, b.stiffness);
    let kt_ratio = 0.5 * (a.tangential_stiffness_ratio + b.tangential_stiffness_ratio);
    let (ra, da) = (a.restitution, a.damping);
    let (rb, db) = (b.restitution, b.damping);
    let restitution = |r: Option<f32>, d: Option<f32>| match (r, d) {
        (_, Some(_)) => None,
        (Some(r), None) => Some(r),
        (None, None) => Some(Material::DEFAULT_RESTITUTION),
    };
    let (damping_ratio2, damping_abs) = match (restitution(ra, da), restitution(rb, db)) {
        (Some(x), Some(y)) => (
            (2.0 * damping_ratio(0.5 * (f64::from(x) + f64::from(y)))) as f32,
            0.0,
        ),
        _ => (0.0, 0.5 * (da.unwrap_or(0.0) + db.unwrap_or(0.0))),
    };
    PairParams {
        kn,
        kt: kt_ratio * kn,
        mu: 0.5 * (a.friction + b.friction),
        damping_ratio2,
        damping_abs,
        pad: [0.0; 3],
    }
}

impl SimSetup {
    /// Builds the setup of `scene` (loaded from a file in `scene_dir`).
    ///
    /// Scenes with `[[bodies]]` need a [`BodySource`]: use
    /// [`SimSetup::from_scene_with_bodies`].
    pub fn from_scene(
        scene: &Scene,
        scene_dir: &Path,
        options: SimOptions,
    ) -> Result<Self, SimError> {
        Self::from_scene_with_bodies(scene, scene_dir, options, &mut NoBodies)
    }

    /// Builds the setup of `scene`, taking each body's particles from `source`.
    pub fn from_scene_with_bodies(
        scene: &Scene,
        scene_dir: &Path,
        options: SimOptions,
        source: &mut dyn BodySource,
    ) -> Result<Self, SimError> {
        if !scene.bodies.is_empty() && scene.simulation.integrator == Integrator::Rk2 {
            return Err(SimError::Unsupported(
                "rigid bodies are integrated with velocity Verlet only; set simulation.integrator = \"verlet\"".into(),
            ));
        }
        if scene.domain.periodic.iter().any(|&p| p) {
            return Err(SimError::Unsupported(
                "periodic domains are not supported yet; set domain.periodic = [false, false, false]"
                    .into(),
            ));
        }
        let mut material_names: Vec<String> = scene.materials.keys().cloned().collect();
        if !material_names.iter().any(|n| n == DEFAULT_MATERIAL) {
            material_names.push(DEFAULT_MATERIAL.to_owned());
            material_names.sort();
        }
        if material_names.len() > MAX_MATERIALS {
            return Err(SimError::Unsupported(format!(
                "the scene defines {} materials; at most {MAX_MATERIALS} are supported",
                material_names.len()
            )));
        }
        let materials: Vec<Material> = material_names
            .iter()
            .map(|n| scene.material(n).unwrap_or_default())
            .collect();
        let index_of = |name: &str, what: &str| -> Result<u32, SimError> {
            material_names
                .iter()
                .position(|n| n == name)
                .map(|i| i as u32)
                .ok_or_else(|| SimError::Invalid(format!("{what} names unknown material `{name}`")))
        };
        let m = materials.len();
        let mut pairs = vec![PairParams::default(); m * m];
        for a in 0..m {
            for b in a..m {
                let p = mix_pair(&materials[a], &materials[b]);
                pairs[a * m + b] = p;
                pairs[b * m + a] = p;
            }
        }

        let inits = scene.free_particles(scene_dir)?;
        if inits.len() >= WALL_ID_BASE as usize {
            return Err(SimError::Unsupported(format!(
                "{} particles; at most {} are supported",
                inits.len(),
                WALL_ID_BASE
            )));
        }
        let source_material: Vec<u32> = scene
            .particles
            .iter()
            .enumerate()
            .map(|(k, s)| index_of(&s.material, &format!("particles[{k}]")))
            .collect::<Result<_, _>>()?;
        let mut particles = ParticleArrays::default();
        particles.pos.reserve(inits.len());
        for (id, p) in inits.iter().enumerate() {
            let mat = source_material[p.source as usize];
            let density = f64::from(materials[mat as usize].density);
            let r = f64::from(p.radius);
            let mass = density * 4.0 / 3.0 * std::f64::consts::PI * r * r * r;
            let inertia = 0.4 * mass * r * r;
            particles
                .pos
                .push([p.position[0], p.position[1], p.position[2], p.radius]);
            particles.vel.push([
                p.velocity[0],
                p.velocity[1],
                p.velocity[2],
                (1.0 / mass) as f32,
            ]);
            particles
                .angvel
                .push([0.0, 0.0, 0.0, (1.0 / inertia) as f32]);
            particles.meta.push([id as u32, mat, FREE, 0]);
            particles.local.push([0.0; 4]);
        }

        let mut bodies = Vec::new();
        let mut body_names = Vec::new();
        for (k, spec) in scene.bodies.iter().enumerate() {
            let material = index_of(&spec.material, &format!("bodies[{k}]"))?;
            let radius = scene.body_particle_radius(spec);
            let density = scene.body_density(spec);
            let request = BodyRequest {
                mesh: scene_dir.join(&spec.mesh),
                particle_radius: radius,
                density,
                scale: spec.scale,
                fill: spec.fill,
            };
            let asset = source.body(k, &request)?;
            add_body_copies(
                spec,
                k,
                &asset,
                material,
                radius,
                &mut particles,
                &mut bodies,
                &mut body_names,
            )?;
        }

        let mut walls = Vec::new();
        let default_mat = index_of(DEFAULT_MATERIAL, "the domain")?;
        if scene.domain.walls {
            for axis in 0..3 {
                let mut n = [0.0f32; 3];
                n[axis] = 1.0;
                walls.push(WallParams {
                    normal: n,
                    offset: scene.domain.min[axis],
                    material: default_mat,
                    remove_at: f32::INFINITY,
                    pad: [0; 2],
                });
                n[axis] = -1.0;
                walls.push(WallParams {
                    normal: n,
                    offset: -scene.domain.max[axis],
                    material: default_mat,
                    remove_at: f32::INFINITY,
                    pad: [0; 2],
                });
            }
        }
        for (k, w) in scene.walls.iter().enumerate() {
            let len = w.normal.iter().map(|x| x * x).sum::<f32>().sqrt();
            if !(len.is_finite() && len > 0.0) {
                return Err(SimError::Invalid(format!(
                    "walls[{k}].normal has zero length"
                )));
            }
            let n = w.normal.map(|x| x / len);
            walls.push(WallParams {
                normal: n,
                offset: n[0] * w.point[0] + n[1] * w.point[1] + n[2] * w.point[2],
                material: index_of(&w.material, &format!("walls[{k}]"))?,
                remove_at: w.remove_at.map_or(f32::INFINITY, |t| t as f32),
                pad: [0; 2],
            });
        }
        if walls.len() > MAX_WALLS {
            return Err(SimError::Unsupported(format!(
                "{} walls; at most {MAX_WALLS} are supported",
                walls.len()
            )));
        }

        let closed_faces = if scene.domain.walls {
            (0..3)
                .filter(|&a| !scene.domain.periodic[a])
                .fold(0u32, |m, a| m | (0b11 << (2 * a)))
        } else {
            0
        };
        // A body (or particle) that starts through a closed face would be
        // pushed out by the wall at once: refuse it with where it is.
        for (i, p) in particles.pos.iter().enumerate() {
            if let Some(face) = escaped_face(*p, scene.domain.min, scene.domain.max, closed_faces) {
                let body = particles.meta[i][2];
                let what = if body == FREE {
                    format!("particle {}", particles.meta[i][0])
                } else {
                    format!(
                        "body {} (particle {})",
                        body_names.get(body as usize).map_or("?", String::as_str),
                        particles.meta[i][0]
                    )
                };
                return Err(SimError::Invalid(format!(
                    "{what} starts at {:?}, beyond the {} wall of the domain {:?}..{:?}",
                    [p[0], p[1], p[2]],
                    face_name(face),
                    scene.domain.min,
                    scene.domain.max
                )));
            }
        }
        if let Some(o) = initial_overlaps(&particles) {
            tracing::warn!(
                "{} pairs of particles start overlapping by more than {:.0} % of their diameter (worst: particles {} and {}, {:.3e} m, {:.0} % of the smaller diameter): they will push apart violently; check the particle file for duplicates",
                o.pairs,
                OVERLAP_WARNING * 100.0,
                o.worst.0,
                o.worst.1,
                o.depth,
                o.fraction * 100.0
            );
        }
        let max_radius = particles.pos.iter().map(|p| p[3]).fold(0.0f32, f32::max);
        let min_radius = particles
            .pos
            .iter()
            .map(|p| p[3])
            .fold(f32::INFINITY, f32::min);
        let cell = if max_radius > 0.0 {
            2.0 * max_radius
        } else {
            2.0 * scene.simulation.particle_radius
        };
        let grid = GridSpec::new(
            scene.domain.min,
            scene.domain.max,
            cell,
            particles.len(),
            options.grid,
        )?;

        // Shortest contact: the lightest pair of particles with the stiffest spring.
        let min_mass = particles
            .vel
            .iter()
            .map(|v| 1.0 / f64::from(v[3]))
            .fold(f64::INFINITY, f64::min);
        let min_mass = if min_mass.is_finite() {
            min_mass
        } else {
            let r = f64::from(scene.simulation.particle_radius.min(min_radius));
            2500.0 * 4.0 / 3.0 * std::f64::consts::PI * r * r * r
        };
        let kn_max = pairs.iter().map(|p| f64::from(p.kn)).fold(0.0, f64::max);
        let contact_time = std::f64::consts::PI * (0.5 * min_mass / kn_max).sqrt();
        let dt = match scene.simulation.time_step {
            TimeStep::Auto => contact_time / AUTO_STEPS_PER_CONTACT,
            TimeStep::Fixed(dt) => {
                if !(dt.is_finite() && dt > 0.0) {
                    return Err(SimError::Invalid(format!(
                        "simulation.time_step is {dt}, must be positive"
                    )));
                }
                if contact_time / dt < MIN_STEPS_PER_CONTACT {
                    tracing::warn!(
                        "time step {dt:.3e} s gives {:.1} steps per contact (contact lasts {contact_time:.3e} s); below {MIN_STEPS_PER_CONTACT} contacts are inaccurate",
                        contact_time / dt
                    );
                }
                dt
            }
        };
        let slots = scene.simulation.contact_slots;
        if slots == 0 || slots > MAX_SLOTS {
            return Err(SimError::Invalid(format!(
                "simulation.contact_slots is {slots}, must be between 1 and {MAX_SLOTS}"
            )));
        }
        Ok(Self {
            name: scene.name.clone(),
            particles,
            bodies,
            body_names,
            material_names,
            pairs,
            walls,
            grid,
            gravity: scene.simulation.gravity,
            dt,
            contact_time,
            integrator: scene.simulation.integrator,
            slots,
            duration: scene.simulation.duration,
            domain_min: scene.domain.min,
            domain_max: scene.domain.max,
            closed_faces,
        })
    }

    /// Hot reload: carries the running state of `old` (a snapshot of it in
    /// `state`, its bodies in `bodies`) into this freshly loaded setup, so an
    /// edit does not restart the scene. Free particles keep their positions
    /// and velocities when their number did not change; bodies (by index)
    /// keep their pose, momentum and angular momentum, and their particles
    /// (perhaps re-baked, at another size) are placed from that pose.
    pub fn carry_state_from(
        &mut self,
        old: &SimSetup,
        state: &pellet_formats::assets::SimState,
        bodies: &[BodyGpu],
    ) {
        let free = |s: &SimSetup| s.particles.meta.iter().filter(|m| m[2] == FREE).count();
        let n_free = free(self);
        if n_free == free(old) && state.positions.len() >= n_free {
            for id in 0..n_free {
                let (p, v, w) = (
                    state.positions[id],
                    state.velocities[id],
                    state.angular_velocities[id],
                );
                let k = id; // free particles come first, in id order
                self.particles.pos[k][..3].copy_from_slice(&p);
                self.particles.vel[k][..3].copy_from_slice(&v);
                self.particles.angvel[k][..3].copy_from_slice(&w);
            }
        }
        for (new, was) in self.bodies.iter_mut().zip(bodies) {
            new.position[..3].copy_from_slice(&was.position[..3]);
            new.orientation = was.orientation;
            if new.kind() == DYNAMIC && was.kind() == DYNAMIC {
                new.momentum = was.momentum;
                new.angular_momentum = was.angular_momentum;
                let l = [
                    was.angular_momentum[0],
                    was.angular_momentum[1],
                    was.angular_momentum[2],
                ];
                let w = super::body::world_omega(new, new.orientation, l);
                let v: [f32; 3] = std::array::from_fn(|a| was.momentum[a] * new.position[3]);
                new.velocity = [v[0], v[1], v[2], 0.0];
                new.omega = [w[0], w[1], w[2], 0.0];
            } else {
                new.velocity = was.velocity;
                new.omega = was.omega;
            }
        }
        let p = &mut self.particles;
        for k in 0..p.len() {
            let b = p.meta[k][2];
            if b != FREE {
                let body = self.bodies[b as usize];
                let local = p.local[k];
                body_particle(
                    &body,
                    &local,
                    &mut p.pos[k],
                    &mut p.vel[k],
                    &mut p.angvel[k],
                );
            }
        }
    }

    /// Number of materials.
    pub fn material_count(&self) -> u32 {
        self.material_names.len() as u32
    }

    /// The uniform block both backends read.
    pub fn params(&self) -> Params {
        let g = &self.grid;
        Params {
            n: self.particles.len() as u32,
            slots: self.slots,
            num_keys: g.num_keys,
            hashed: u32::from(g.hashed),
            dims: g.dims,
            wall_count: self.walls.len() as u32,
            origin: g.origin,
            cell_size: g.cell_size,
            gravity: self.gravity,
            material_count: self.material_count(),
            dt: self.dt as f32,
            inv_cell: 1.0 / g.cell_size,
            body_count: self.bodies.len() as u32,
            pad: 0,
            domain_min: self.domain_min,
            closed_faces: self.closed_faces,
            domain_max: self.domain_max,
            pad2: 0,
        }
    }
}

/// The constant uniform block of every kernel (`Params` in `sim.wgsl`).
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct Params {
    /// Particle count.
    pub n: u32,
    /// Contact history slots per particle.
    pub slots: u32,
    /// Number of cell keys (dense cells or hash buckets).
    pub num_keys: u32,
    /// 1 when cells are hashed.
    pub hashed: u32,
    /// Dense grid cells per axis.
    pub dims: [i32; 3],
    /// Number of walls.
    pub wall_count: u32,
    /// Grid origin, metres.
    pub origin: [f32; 3],
    /// Cell edge, metres.
    pub cell_size: f32,
    /// Gravity, m/s^2.
    pub gravity: [f32; 3],
    /// Number of materials.
    pub material_count: u32,
    /// Time step, seconds.
    pub dt: f32,
    /// `1 / cell_size`.
    pub inv_cell: f32,
    /// Number of rigid bodies.
    pub body_count: u32,
    /// Padding to 16 bytes.
    pub pad: u32,
    /// Domain lower corner, metres.
    pub domain_min: [f32; 3],
    /// Closed domain faces ([`SimSetup::closed_faces`]).
    pub closed_faces: u32,
    /// Domain upper corner, metres.
    pub domain_max: [f32; 3],
    /// Padding to 16 bytes.
    pub pad2: u32,
}

/// Adds the copies of one `[[bodies]]` entry: a [`BodyGpu`] each, and its
/// particles (ids continuing after those already there).
#[allow(clippy::too_many_arguments)]
fn add_body_copies(
    spec: &BodySpec,
    entry: usize,
    asset: &ParticleBody,
    material: u32,
    radius: f32,
    particles: &mut ParticleArrays,
    bodies: &mut Vec<BodyGpu>,
    names: &mut Vec<String>,
) -> Result<(), SimError> {
    let count = asset.positions.len();
    if count == 0 {
        return Err(SimError::Invalid(format!(
            "bodies[{entry}] ({}) has no particles at radius {radius} m: the mesh is thinner than one voxel",
            spec.mesh
        )));
    }
    let mass = spec.mass.unwrap_or(asset.mass);
    if !(mass.is_finite() && mass > 0.0) {
        return Err(SimError::Invalid(format!(
            "bodies[{entry}] has mass {mass} kg"
        )));
    }
    let ratio = mass / asset.mass;
    let inertia = asset.inertia.map(|r| r.map(|x| x * ratio));
    let inv_inertia = invert_symmetric(inertia).ok_or_else(|| {
        SimError::Invalid(format!(
            "bodies[{entry}] ({}) has a singular inertia tensor (a line of particles?)",
            spec.mesh
        ))
    })?;
    let (kind, inv_mass) = match spec.motion {
        Motion::Dynamic => (DYNAMIC, 1.0 / mass),
        Motion::Static => (STATIC, 0.0),
        Motion::Kinematic => (KINEMATIC, 0.0),
    };
    let copies: Vec<[f32; 3]> = match spec.array {
        None => vec![[0.0; 3]],
        Some(a) => {
            let mut v = Vec::new();
            for z in 0..a.count[2] {
                for y in 0..a.count[1] {
                    for x in 0..a.count[0] {
                        v.push([
                            x as f32 * a.spacing[0],
                            y as f32 * a.spacing[1],
                            z as f32 * a.spacing[2],
                        ]);
                    }
                }
            }
            v
        }
    };
    let q = euler_xyz_degrees(spec.rotation);
    let com = rotate(q, asset.centre_of_mass);
    let name = if spec.name.is_empty() {
        asset.name.clone()
    } else {
        spec.name.clone()
    };
    // Per-particle mass: the body's, shared equally (contacts see it).
    let particle_inv_mass = if kind == DYNAMIC {
        count as f32 / mass
    } else {
        0.0
    };
    for (c, offset) in copies.iter().enumerate() {
        let index = bodies.len() as u32;
        let first = particles.len();
        if first + count >= WALL_ID_BASE as usize {
            return Err(SimError::Unsupported("too many particles".into()));
        }
        let x = [
            spec.position[0] + offset[0] + com[0],
            spec.position[1] + offset[1] + com[1],
            spec.position[2] + offset[2] + com[2],
        ];
        let mut b = BodyGpu {
            position: [x[0], x[1], x[2], inv_mass],
            orientation: q,
            inv_inertia: inv_inertia.map(|r| [r[0], r[1], r[2], 0.0]),
            range: [first as u32, count as u32, kind, 0],
            ..BodyGpu::default()
        };
        let v = spec.velocity;
        let w = spec.angular_velocity;
        b.velocity = [v[0], v[1], v[2], 0.0];
        b.omega = [w[0], w[1], w[2], 0.0];
        if kind == DYNAMIC {
            b.momentum = [v[0] * mass, v[1] * mass, v[2] * mass, 0.0];
            // L = R I R^T w.
            let wb = super::body::rotate_inv(q, w);
            let lb: [f32; 3] = std::array::from_fn(|r| {
                inertia[r][0] * wb[0] + inertia[r][1] * wb[1] + inertia[r][2] * wb[2]
            });
            let l = rotate(q, lb);
            b.angular_momentum = [l[0], l[1], l[2], 0.0];
        } else if kind == STATIC {
            b.velocity = [0.0; 4];
            b.omega = [0.0; 4];
        }
        for p in asset.positions.iter() {
            let local = [p[0], p[1], p[2], 0.0];
            let mut pos = [0.0, 0.0, 0.0, radius];
            let mut vel = [0.0, 0.0, 0.0, particle_inv_mass];
            let mut angvel = [0.0; 4];
            body_particle(&b, &local, &mut pos, &mut vel, &mut angvel);
            let id = particles.len() as u32;
            particles.pos.push(pos);
            particles.vel.push(vel);
            particles.angvel.push(angvel);
            particles.meta.push([id, material, index, 0]);
            particles.local.push(local);
        }
        bodies.push(b);
        names.push(if copies.len() > 1 {
            format!("{name}[{c}]")
        } else {
            name.clone()
        });
    }
    Ok(())
}
