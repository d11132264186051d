//! [`SimSetup`]: everything a simulation backend needs, derived once from a
//! [`Scene`]: particle arrays in the layout the kernels use, the material
//! pair table, walls, the cell grid, the time step and the integrator.
//!
//! Both backends (GPU and the CPU twin) start from the same `SimSetup`, so a
//! scene means exactly the same thing on both.
//!
//! - `layout.rs`: the arrays and uniform blocks in the kernels' layout;
//! - `materials.rs`: the contact parameters of each pair of materials;
//! - `bodies.rs`: `[[bodies]]` entries turned into rigid bodies and their particles;
//! - `checks.rs`: starting positions checked against the walls and each other.

use std::path::Path;

use pellet_formats::scene::{
    ContactModel, DEFAULT_MATERIAL, Integrator, Material, Scene, TimeStep,
};

use super::SimError;
use super::grid::{GridMode, GridSpec};
use crate::stages::bodies::{BodyGpu, DYNAMIC, body_particle};

mod bodies;
mod checks;
mod layout;
mod materials;

pub use crate::stages::common::Params;
pub use bodies::{BodyRequest, BodySource, NoBodies};
pub use checks::{InitialOverlaps, OVERLAP_WARNING, escaped_face, face_name, initial_overlaps};
pub use layout::{ParticleArrays, WallParams};
pub use materials::{
    PairParams, damping_factor, damping_ratio, hertz_moduli, rayleigh_time, restitution_of,
};

use bodies::add_body_copies;
use materials::mix_pair;

/// Time steps per contact duration chosen by `time_step = "auto"`.
pub const AUTO_STEPS_PER_CONTACT: f64 = 20.0;

/// Fewest time steps per contact an explicit step may give without a warning.
pub const MIN_STEPS_PER_CONTACT: f64 = 10.0;

/// Time steps per Rayleigh time chosen by `time_step = "auto"` for Hertz
/// materials (a tenth of it; LIGGGHTS warns above a fifth).
pub const AUTO_STEPS_PER_RAYLEIGH: f64 = 10.0;

/// Fewest time steps per Rayleigh time an explicit step may give without a
/// warning (Hertz materials).
pub const MIN_STEPS_PER_RAYLEIGH: f64 = 5.0;

/// Whether anything in `scene` takes the default material: the domain
/// walls, or a particle block, body or wall that names none.
fn uses_default(scene: &Scene) -> bool {
    scene.domain.walls
        || scene
            .particles
            .iter()
            .any(|p| p.material == DEFAULT_MATERIAL)
        || scene.bodies.iter().any(|b| b.material == DEFAULT_MATERIAL)
        || scene.walls.iter().any(|w| w.material == DEFAULT_MATERIAL)
}

/// History partner id of wall `w`: `WALL_ID_BASE + w` (particle ids stay below it).
pub const WALL_ID_BASE: u32 = 0xFFFF_FF00;

/// Most walls one scene may have (domain faces included).
pub const MAX_WALLS: usize = 64;

/// Most materials one scene may define.
pub const MAX_MATERIALS: usize = 64;

/// Most contact history slots per particle.
pub const MAX_SLOTS: u32 = 256;

/// History slots per particle for block-wise stepping when the scene sets none.
pub const DEFAULT_SLOTS: u32 = 16;

/// Body index of a free particle.
pub const FREE: u32 = u32::MAX;

/// Options that are not part of a scene.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimOptions {
    /// Dense or hashed cells; default chooses by size.
    pub grid: GridMode,
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
    /// The materials, in the order of `material_names` (the viewer's live
    /// controls remix them).
    pub materials: Vec<Material>,
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
    /// Contact law of every pair ([`HOOKE`](crate::stages::common::HOOKE) or
    /// [`HERTZ`](crate::stages::common::HERTZ)).
    pub contact_model: u32,
    /// Rolling resistance ([`ROLL_NONE`](crate::stages::common::ROLL_NONE),
    /// `ROLL_EPSD2` or `ROLL_CDT`).
    pub rolling_model: u32,
    /// Time integrator.
    pub integrator: Integrator,
    /// Contact history slots per particle (block-wise stepping only).
    pub slots: u32,
    /// Whether the scene set `simulation.contact_slots` (obsolete in core).
    pub slots_set: bool,
    /// Neighbour-list skin, metres (`simulation.skin`; default a tenth of
    /// the largest diameter).
    pub skin: f32,
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
    /// Periodic axes as bits (`1 << axis`; the CPU engine only, for now).
    pub periodic: u32,
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
        Self::from_scene_with_files(
            scene,
            &pellet_formats::scene::FolderFiles(scene_dir),
            options,
            source,
        )
    }

    /// Builds the setup of `scene`, its particle files read from `files`
    /// (a folder, or bytes a page fetched) and each body's particles taken
    /// from `source` (body meshes are named relative to `files`' folder).
    pub fn from_scene_with_files(
        scene: &Scene,
        files: &dyn pellet_formats::scene::SceneFiles,
        options: SimOptions,
        source: &mut dyn BodySource,
    ) -> Result<Self, SimError> {
        let scene_dir = files.path_of("");
        let scene_dir = scene_dir.as_path();
        if !scene.bodies.is_empty() && scene.simulation.integrator == Integrator::Rk2 {
            return Err(SimError::Unsupported(
                "rigid bodies are integrated with velocity Verlet only; set simulation.integrator = \"verlet\"",
            ));
        }
        let periodic = (0..3)
            .filter(|&a| scene.domain.periodic[a])
            .fold(0u32, |m, a| m | (1 << a));
        if periodic != 0 && scene.simulation.integrator == Integrator::Rk2 {
            return Err(SimError::Unsupported(
                "periodic domains run with velocity Verlet: set simulation.integrator = \"verlet\"",
            ));
        }
        let mut material_names: Vec<String> = scene.materials.keys().cloned().collect();
        if !material_names.iter().any(|n| n == DEFAULT_MATERIAL) {
            material_names.push(DEFAULT_MATERIAL.to_owned());
            material_names.sort();
        }
        if material_names.len() > MAX_MATERIALS {
            return Err(SimError::TooMany {
                what: "materials",
                count: material_names.len() as u64,
                max: MAX_MATERIALS as u64,
            });
        }
        let hertz = scene
            .materials
            .values()
            .any(|m| m.model == ContactModel::Hertz);
        if hertz && !scene.materials.contains_key(DEFAULT_MATERIAL) && uses_default(scene) {
            return Err(SimError::Unsupported(
                "this scene's materials are hertz: define [materials.default] with model = \"hertz\" too (the domain walls and anything without a material use it)",
            ));
        }
        let materials: Vec<Material> = material_names
            .iter()
            .map(|n| match scene.material(n) {
                // An unused implicit default takes the scene's model.
                Some(m) if hertz && !scene.materials.contains_key(n) => {
                    scene.materials.values().next().cloned().unwrap_or(m)
                }
                Some(m) => m,
                None => Material::default(),
            })
            .collect();
        let index_of = |name: &str, what: &str| -> Result<u32, SimError> {
            material_names
                .iter()
                .position(|n| n == name)
                .map(|i| i as u32)
                .ok_or_else(|| SimError::UnknownMaterial {
                    user: what.to_owned(),
                    name: name.to_owned(),
                })
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

        let inits = scene.free_particles_from(files)?;
        if inits.len() >= WALL_ID_BASE as usize {
            return Err(SimError::TooMany {
                what: "particles",
                count: inits.len() as u64,
                max: u64::from(WALL_ID_BASE),
            });
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
            let w = p.angular_velocity;
            particles
                .angvel
                .push([w[0], w[1], w[2], (1.0 / inertia) as f32]);
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
            // The faces of periodic axes are not walls.
            for axis in (0..3).filter(|&a| !scene.domain.periodic[a]) {
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
                return Err(SimError::ZeroNormal { wall: k });
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
            return Err(SimError::TooMany {
                what: "walls",
                count: walls.len() as u64,
                max: MAX_WALLS as u64,
            });
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
                return Err(SimError::StartsOutside {
                    what,
                    position: [p[0], p[1], p[2]],
                    face: face_name(face),
                    min: scene.domain.min,
                    max: scene.domain.max,
                });
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
        )?
        .with_periodic(periodic, scene.domain.min, scene.domain.max);

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
        // Hertz: the Rayleigh time of the smallest sphere of the softest
        // material stands for the contact duration (LIGGGHTS' criterion).
        let r_min = f64::from(if min_radius.is_finite() {
            min_radius
        } else {
            scene.simulation.particle_radius
        });
        let contact_time = if hertz {
            materials
                .iter()
                .map(|m| rayleigh_time(m, r_min))
                .fold(f64::INFINITY, f64::min)
        } else {
            std::f64::consts::PI * (0.5 * min_mass / kn_max).sqrt()
        };
        let rolling_model = if materials.iter().all(|m| m.rolling_friction == 0.0) {
            crate::stages::common::ROLL_NONE
        } else if materials
            .iter()
            .any(|m| m.rolling_model == pellet_formats::scene::RollingModel::Cdt)
        {
            crate::stages::common::ROLL_CDT
        } else {
            crate::stages::common::ROLL_EPSD2
        };
        let (auto_steps, min_steps) = if hertz {
            (AUTO_STEPS_PER_RAYLEIGH, MIN_STEPS_PER_RAYLEIGH)
        } else {
            (AUTO_STEPS_PER_CONTACT, MIN_STEPS_PER_CONTACT)
        };
        let dt = match scene.simulation.time_step {
            TimeStep::Auto => contact_time / auto_steps,
            TimeStep::Fixed(dt) => {
                if !(dt.is_finite() && dt > 0.0) {
                    return Err(SimError::BadValue {
                        field: "simulation.time_step".into(),
                        value: dt,
                        expected: "must be positive".into(),
                    });
                }
                if contact_time / dt < min_steps {
                    if hertz {
                        tracing::warn!(
                            "time step {dt:.3e} s is {:.0} % of the Rayleigh time ({contact_time:.3e} s); above {:.0} % Hertz contacts are inaccurate",
                            100.0 * dt / contact_time,
                            100.0 / min_steps
                        );
                    } else {
                        tracing::warn!(
                            "time step {dt:.3e} s gives {:.1} steps per contact (contact lasts {contact_time:.3e} s); below {MIN_STEPS_PER_CONTACT} contacts are inaccurate",
                            contact_time / dt
                        );
                    }
                }
                dt
            }
        };
        // A periodic axis needs three neighbour cells (2 r_max + skin) or
        // more: a particle must not meet two images of one partner.
        let skin = scene.simulation.skin.unwrap_or(0.2 * max_radius.max(0.0));
        let reach = 2.0 * max_radius.max(scene.simulation.particle_radius) + skin.max(0.0);
        for a in (0..3).filter(|&a| periodic & (1 << a) != 0) {
            let extent = scene.domain.max[a] - scene.domain.min[a];
            if extent < 3.0 * reach {
                return Err(SimError::BadValue {
                    field: format!("domain.periodic ({} axis)", ["x", "y", "z"][a]),
                    value: f64::from(extent),
                    expected: format!(
                        "a periodic axis must span at least three neighbour cells (3 x {reach:.4} m: the largest diameter plus the skin); make the domain longer along it"
                    ),
                });
            }
        }
        let slots = scene.simulation.contact_slots.unwrap_or(DEFAULT_SLOTS);
        if slots == 0 || slots > MAX_SLOTS {
            return Err(SimError::BadValue {
                field: "simulation.contact_slots".into(),
                value: f64::from(slots),
                expected: format!("must be between 1 and {MAX_SLOTS}"),
            });
        }
        Ok(Self {
            name: scene.name.clone(),
            particles,
            bodies,
            body_names,
            material_names,
            materials: materials.clone(),
            pairs,
            walls,
            grid,
            gravity: scene.simulation.gravity,
            dt,
            contact_time,
            rolling_model,
            contact_model: if hertz {
                crate::stages::common::HERTZ
            } else {
                crate::stages::common::HOOKE
            },
            integrator: scene.simulation.integrator,
            slots,
            slots_set: scene.simulation.contact_slots.is_some(),
            skin,
            duration: scene.simulation.duration,
            domain_min: scene.domain.min,
            domain_max: scene.domain.max,
            closed_faces,
            periodic,
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
                let w = crate::stages::bodies::world_omega(new, new.orientation, l);
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

    /// This setup as the GPU pair-list path runs it: cells of edge
    /// `2 r_max + skin` (dense or hashed as before), one history slot (the
    /// springs live with the pairs).
    pub fn for_pair_list(&self) -> Result<Self, SimError> {
        let r_max = 0.5 * self.grid.cell_size;
        let cell = 2.0 * r_max + self.skin.max(0.0);
        let mode = if self.grid.hashed {
            GridMode::Hashed
        } else {
            GridMode::Dense
        };
        let mut out = self.clone();
        out.grid = GridSpec::new(
            self.grid.origin,
            self.domain_max,
            cell,
            self.particles.len(),
            mode,
        )?
        .with_periodic(self.periodic, self.domain_min, self.domain_max);
        out.slots = 1;
        Ok(out)
    }
}
