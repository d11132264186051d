//! The scene schema: TOML files written by people (`assets/scenes/*.toml`).
//!
//! Every field, its unit and its default is documented in
//! `docs/scene-format.md`; keep the two in sync. Unknown fields are errors,
//! and every error names the file, line and column. Both `bake` and `player`
//! parse scenes through [`Scene::load`], so they always agree.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::assets::FillMode;

mod error;
mod expand;
mod locate;
mod validate;
mod values;

pub use error::{SceneError, SceneErrorKind};
pub use expand::{
    FolderFiles, MAX_PARTICLES, MemoryFiles, ParticleInit, Rng, SceneFiles, load_particle_file,
    particles_from_bytes,
};
pub use values::{Radius, TimeStep};

/// Name of the material used where none is named. Always defined: a scene
/// that does not define it gets [`Material::default`].
pub const DEFAULT_MATERIAL: &str = "default";

/// Largest scene file read, bytes (16 MiB; scenes are small, their particle
/// files carry the data).
pub const MAX_SCENE_BYTES: u64 = 16 << 20;

/// Most steps one run may take (10^12): a scene whose duration and time step
/// imply more is refused with the numbers rather than started.
pub const MAX_STEPS: u64 = 1_000_000_000_000;

/// A whole scene.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scene {
    /// Display name; defaults to the file stem.
    #[serde(default)]
    pub name: String,
    /// One line on what the scene shows.
    #[serde(default)]
    pub description: String,
    /// Global simulation settings.
    #[serde(default)]
    pub simulation: Simulation,
    /// The simulation box.
    pub domain: Domain,
    /// Named materials; `default` is always available.
    #[serde(default)]
    pub materials: BTreeMap<String, Material>,
    /// Free particles: generated blocks and files.
    #[serde(default)]
    pub particles: Vec<ParticleSource>,
    /// Rigid bodies made of particles, baked from meshes.
    #[serde(default)]
    pub bodies: Vec<BodySpec>,
    /// Extra walls (planes) besides the domain box.
    #[serde(default)]
    pub walls: Vec<Wall>,
}

/// Global simulation settings (`[simulation]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Simulation {
    /// Radius of free particles and of body particles unless overridden, metres. Default 0.01.
    pub particle_radius: f32,
    /// Gravitational acceleration, m/s^2. Default `[0, -9.81, 0]`.
    pub gravity: [f32; 3],
    /// `"auto"` (a fraction of the contact duration) or a step in seconds. Default `"auto"`.
    pub time_step: TimeStep,
    /// Time integrator. Default velocity Verlet.
    pub integrator: Integrator,
    /// Contact history slots per particle (tangential springs) for
    /// block-wise stepping (`--device-budget`), whose blocks sort every step.
    /// Obsolete in core: both engines keep each spring with its pair, with
    /// no cap; a scene that sets it still loads, with a warning when it runs
    /// in core. Default (None): 16.
    pub contact_slots: Option<u32>,
    /// Neighbour-list skin, metres: pairs closer than their radii plus the
    /// skin are listed, and the list is rebuilt only when some particle has
    /// moved half the skin. Default (None): a tenth of the largest diameter.
    pub skin: Option<f32>,
    /// Simulated seconds to run headless when not told otherwise. Default 10.
    pub duration: f64,
}

impl Default for Simulation {
    fn default() -> Self {
        Self {
            particle_radius: 0.01,
            gravity: [0.0, -9.81, 0.0],
            time_step: TimeStep::Auto,
            integrator: Integrator::VelocityVerlet,
            contact_slots: None,
            skin: None,
            duration: 10.0,
        }
    }
}

/// Time integration scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Integrator {
    /// Velocity Verlet (second order, one force evaluation per step).
    #[default]
    #[serde(rename = "verlet")]
    VelocityVerlet,
    /// Midpoint Runge-Kutta, as in the WebGL seed (two force evaluations).
    #[serde(rename = "rk2")]
    Rk2,
}

/// The simulation box (`[domain]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    /// Minimum corner, metres.
    pub min: [f32; 3],
    /// Maximum corner, metres.
    pub max: [f32; 3],
    /// Periodic boundary per axis (x, y, z). Default all false.
    #[serde(default)]
    pub periodic: [bool; 3],
    /// Whether the non-periodic faces of the box are walls. Default true.
    #[serde(default = "yes")]
    pub walls: bool,
}

fn yes() -> bool {
    true
}

/// The contact law of a material (`model = "hooke"` or `"hertz"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContactModel {
    /// Linear spring-dashpot with a constant stiffness (`stiffness`, N/m),
    /// as LIGGGHTS `gran model hooke tangential history`. The default.
    #[default]
    Hooke,
    /// Hertz-Mindlin from the material constants (`youngs_modulus`,
    /// `poisson_ratio`): stiffness and damping grow with the overlap, as
    /// LIGGGHTS `gran model hertz tangential history`.
    Hertz,
}

/// The rolling resistance law of a material (`rolling_model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RollingModel {
    /// Elastic-plastic spring: a rolling torque spring of stiffness
    /// `kt R*^2`, capped at `rolling_friction |F_n| R*` (LIGGGHTS
    /// `rolling_friction epsd2`). The default.
    #[default]
    Epsd2,
    /// Constant directional torque `rolling_friction kn delta R*` against
    /// the relative rolling (LIGGGHTS `rolling_friction cdt`).
    Cdt,
}

/// A contact material (`[materials.NAME]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Material {
    /// Particle density, kg/m^3. Default 2500 (glass).
    pub density: f32,
    /// Contact law. Default `hooke`; every material of a scene uses the same.
    #[serde(skip_serializing_if = "is_hooke")]
    pub model: ContactModel,
    /// Normal spring stiffness, N/m (`hooke`). Default 10000.
    pub stiffness: f32,
    /// Young's modulus, Pa (`hertz`, required there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub youngs_modulus: Option<f32>,
    /// Poisson's ratio, 0 to 0.5 (`hertz`). Default 0.25.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poisson_ratio: Option<f32>,
    /// Normal coefficient of restitution, 0..1. Default 0.5 unless `damping` is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restitution: Option<f32>,
    /// Normal damping coefficient, N s/m, instead of `restitution`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damping: Option<f32>,
    /// Coulomb friction coefficient. Default 0.5.
    pub friction: f32,
    /// Tangential over normal stiffness. Default 2/7 (as LIGGGHTS hooke/history).
    pub tangential_stiffness_ratio: f32,
    /// Coefficient of rolling friction (dimensionless, LIGGGHTS
    /// `coefficientRollingFriction`). Default 0: no rolling resistance.
    pub rolling_friction: f32,
    /// Rolling resistance law. Default `epsd2`; every material of a scene
    /// uses the same.
    #[serde(skip_serializing_if = "is_epsd2")]
    pub rolling_model: RollingModel,
}

fn is_epsd2(m: &RollingModel) -> bool {
    *m == RollingModel::Epsd2
}

impl Default for Material {
    fn default() -> Self {
        Self {
            density: 2500.0,
            model: ContactModel::Hooke,
            stiffness: 1.0e4,
            youngs_modulus: None,
            poisson_ratio: None,
            restitution: None,
            damping: None,
            friction: 0.5,
            tangential_stiffness_ratio: 2.0 / 7.0,
            rolling_friction: 0.0,
            rolling_model: RollingModel::Epsd2,
        }
    }
}

impl Material {
    /// Restitution used when neither `restitution` nor `damping` is set.
    pub const DEFAULT_RESTITUTION: f32 = 0.5;
    /// Poisson's ratio of a `hertz` material that does not give one.
    pub const DEFAULT_POISSON_RATIO: f32 = 0.25;
}

fn is_hooke(m: &ContactModel) -> bool {
    *m == ContactModel::Hooke
}

/// An axis-aligned box, metres.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aabb {
    /// Minimum corner.
    pub min: [f32; 3],
    /// Maximum corner.
    pub max: [f32; 3],
}

/// One `[[particles]]` entry: a generated block or a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawParticleSource", into = "RawParticleSource")]
pub struct ParticleSource {
    /// Where the particles come from.
    pub origin: ParticleOrigin,
    /// Initial velocity, m/s. Default zero.
    pub velocity: [f32; 3],
    /// Radius or radius distribution; default `simulation.particle_radius`.
    pub radius: Option<Radius>,
    /// Material name. Default `"default"`.
    pub material: String,
}

/// Where the particles of a [`ParticleSource`] come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ParticleOrigin {
    /// A jittered lattice filling a box.
    Block(ParticleBlock),
    /// Particles read from a file, relative to the scene file.
    File(String),
}

/// A jittered lattice of particles filling `region`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParticleBlock {
    /// The box to fill, metres.
    pub region: Aabb,
    /// Lattice spacing, metres; default twice the largest radius.
    pub spacing: Option<f32>,
    /// Random offset per axis as a fraction of the free gap, 0..1. Default 0.
    pub jitter: f32,
    /// Seed of the jitter and radius sampling. Default 0.
    pub seed: u64,
    /// Keep at most this many particles (in lattice order). Default all.
    pub count: Option<u64>,
}

/// The TOML shape of `[[particles]]`, before checking that it names exactly
/// one origin.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParticleSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    region: Option<Aabb>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spacing: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jitter: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(default)]
    velocity: [f32; 3],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    radius: Option<Radius>,
    #[serde(default = "default_material")]
    material: String,
}

fn default_material() -> String {
    DEFAULT_MATERIAL.to_owned()
}

impl TryFrom<RawParticleSource> for ParticleSource {
    type Error = String;

    fn try_from(raw: RawParticleSource) -> Result<Self, String> {
        let origin = match (raw.region, raw.file) {
            (Some(_), Some(_)) => return Err("give either `region` or `file`, not both".into()),
            (None, None) => {
                return Err(
                    "a [[particles]] entry needs `region` (a generated block) or `file`".into(),
                );
            }
            (Some(region), None) => ParticleOrigin::Block(ParticleBlock {
                region,
                spacing: raw.spacing,
                jitter: raw.jitter.unwrap_or(0.0),
                seed: raw.seed.unwrap_or(0),
                count: raw.count,
            }),
            (None, Some(file)) => {
                for (name, given) in [
                    ("spacing", raw.spacing.is_some()),
                    ("jitter", raw.jitter.is_some()),
                    ("seed", raw.seed.is_some()),
                    ("count", raw.count.is_some()),
                ] {
                    if given {
                        return Err(format!(
                            "`{name}` applies to generated blocks, not to `file`"
                        ));
                    }
                }
                ParticleOrigin::File(file)
            }
        };
        Ok(Self {
            origin,
            velocity: raw.velocity,
            radius: raw.radius,
            material: raw.material,
        })
    }
}

impl From<ParticleSource> for RawParticleSource {
    fn from(p: ParticleSource) -> Self {
        let mut raw = RawParticleSource {
            velocity: p.velocity,
            radius: p.radius,
            material: p.material,
            ..Default::default()
        };
        match p.origin {
            ParticleOrigin::Block(b) => {
                raw.region = Some(b.region);
                raw.spacing = b.spacing;
                raw.jitter = Some(b.jitter);
                raw.seed = Some(b.seed);
                raw.count = b.count;
            }
            ParticleOrigin::File(f) => raw.file = Some(f),
        }
        raw
    }
}

/// How a body moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Motion {
    /// Moves under forces and gravity.
    #[default]
    Dynamic,
    /// Never moves (scenery such as a funnel).
    Static,
    /// Moves with its prescribed velocity, unaffected by forces (a pusher).
    Kinematic,
}

/// One `[[bodies]]` entry: a rigid body baked from a mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodySpec {
    /// glTF mesh (`.glb` or `.gltf`), relative to the scene file.
    pub mesh: String,
    /// Display name. Default the mesh's file stem.
    #[serde(default)]
    pub name: String,
    /// Dynamic, static or kinematic. Default dynamic.
    #[serde(default)]
    pub motion: Motion,
    /// Position of the mesh origin, metres. Default zero.
    #[serde(default)]
    pub position: [f32; 3],
    /// Rotation as intrinsic x-y-z Euler angles, degrees. Default zero.
    #[serde(default)]
    pub rotation: [f32; 3],
    /// Uniform scale applied to the mesh before baking. Default 1.
    #[serde(default = "one")]
    pub scale: f32,
    /// Initial linear velocity, m/s. Default zero.
    #[serde(default)]
    pub velocity: [f32; 3],
    /// Initial angular velocity, rad/s, world axes. Default zero.
    #[serde(default)]
    pub angular_velocity: [f32; 3],
    /// Density, kg/m^3; default the material's. Exclusive with `mass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub density: Option<f32>,
    /// Total mass, kg, instead of a density.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mass: Option<f32>,
    /// Material name. Default `"default"`.
    #[serde(default = "default_material")]
    pub material: String,
    /// Solid or shell voxelization. Default solid.
    #[serde(default)]
    pub fill: FillMode,
    /// Radius of the body's particles, metres; default `simulation.particle_radius`.
    /// The body is voxelized at twice this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub particle_radius: Option<f32>,
    /// Copies on a grid, each offset from `position`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<BodyArray>,
}

fn one() -> f32 {
    1.0
}

/// A grid of copies of one body.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodyArray {
    /// Copies along x, y and z.
    pub count: [u32; 3],
    /// Offset between neighbouring copies, metres.
    pub spacing: [f32; 3],
}

/// A wall: an infinite plane that particles stay on the `normal` side of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wall {
    /// Display name. Default empty.
    #[serde(default)]
    pub name: String,
    /// Any point on the plane, metres.
    pub point: [f32; 3],
    /// Normal pointing into the allowed side (normalized on load).
    pub normal: [f32; 3],
    /// Material name. Default `"default"`.
    #[serde(default = "default_material")]
    pub material: String,
    /// Simulated time at which the wall disappears, seconds (a gate). Default never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_at: Option<f64>,
}

impl Scene {
    /// Reads and validates the scene at `path` (a regular file of at most
    /// [`MAX_SCENE_BYTES`]).
    pub fn load(path: &Path) -> Result<Self, SceneError> {
        let bytes = crate::io::read_regular_file(path, MAX_SCENE_BYTES)
            .map_err(|e| SceneError::read(path, e))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| SceneError::read(path, "is not UTF-8 text (a scene is a TOML file)"))?;
        Self::parse(&text, path)
    }

    /// Parses and validates scene TOML; `path` names the file in errors and
    /// gives the default name.
    pub fn parse(text: &str, path: &Path) -> Result<Self, SceneError> {
        let mut scene: Scene =
            toml::from_str(text).map_err(|e| SceneError::syntax(path, text, &e))?;
        if scene.name.is_empty() {
            scene.name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        scene
            .validate()
            .map_err(|e| SceneError::invalid(path, text, e))?;
        Ok(scene)
    }

    /// The scene as TOML.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string_pretty(self)
    }

    /// The material called `name`, or the default material for `"default"`.
    pub fn material(&self, name: &str) -> Option<Material> {
        match self.materials.get(name) {
            Some(m) => Some(m.clone()),
            None if name == DEFAULT_MATERIAL => Some(Material::default()),
            None => None,
        }
    }

    /// Radius of the particles of body entry `spec`, metres: its own
    /// `particle_radius`, else the scene's. Bodies are voxelized at twice this.
    pub fn body_particle_radius(&self, spec: &BodySpec) -> f32 {
        spec.particle_radius
            .unwrap_or(self.simulation.particle_radius)
    }

    /// Density body entry `spec` is baked with, kg/m^3: its own `density`,
    /// else its material's (a `mass` rescales the baked mass properties).
    pub fn body_density(&self, spec: &BodySpec) -> f32 {
        spec.density
            .unwrap_or_else(|| self.material(&spec.material).unwrap_or_default().density)
    }

    /// The files a scene loaded from `scene_path` is made of: the scene
    /// itself, its meshes and its particle files (what hot reload watches).
    pub fn input_files(&self, scene_path: &Path) -> Vec<std::path::PathBuf> {
        let dir = scene_path.parent().unwrap_or(Path::new("."));
        let mut files = vec![scene_path.to_path_buf()];
        files.extend(self.bodies.iter().map(|b| dir.join(&b.mesh)));
        for p in &self.particles {
            if let ParticleOrigin::File(f) = &p.origin {
                files.push(dir.join(f));
            }
        }
        files
    }

    /// Number of body instances after expanding arrays.
    pub fn body_instance_count(&self) -> u64 {
        self.bodies
            .iter()
            .map(|b| {
                b.array
                    .map_or(1, |a| a.count.iter().map(|&c| u64::from(c)).product())
            })
            .sum()
    }

    /// The free particles of every `[[particles]]` entry, in order. Particle
    /// files are resolved relative to `scene_dir`.
    pub fn free_particles(&self, scene_dir: &Path) -> Result<Vec<ParticleInit>, SceneError> {
        expand::free_particles(self, &FolderFiles(scene_dir))
    }

    /// [`Scene::free_particles`] with the particle files read from `files`
    /// (a folder, or bytes fetched by a page).
    pub fn free_particles_from(
        &self,
        files: &dyn SceneFiles,
    ) -> Result<Vec<ParticleInit>, SceneError> {
        expand::free_particles(self, files)
    }
}

#[cfg(test)]
mod tests;
