//! Turns `[[particles]]` entries into particles: jittered lattices and
//! particle files (CSV or a saved [`SimState`]).

use std::path::Path;

use super::{ParticleBlock, ParticleOrigin, ParticleSource, Radius, Scene, SceneError};
use crate::assets::SimState;
use crate::container::{DEFAULT_MAX_PAYLOAD, DecodeLimits};

/// Most free particles one entry may generate or load (2^28 = 268 M).
pub const MAX_PARTICLES: u64 = 1 << 28;

/// One free particle as the scene places it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParticleInit {
    /// World position, metres.
    pub position: [f32; 3],
    /// Initial velocity, m/s.
    pub velocity: [f32; 3],
    /// Initial angular velocity, rad/s (from a saved state; zero otherwise).
    pub angular_velocity: [f32; 3],
    /// Radius, metres.
    pub radius: f32,
    /// Index of the `[[particles]]` entry it came from (gives its material).
    pub source: u32,
}

/// SplitMix64: a tiny, fast, well-mixed generator whose output is fixed by
/// its definition. Written here rather than taken from `rand` so that a scene
/// with a seed generates the same particles in every version, forever.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 24 random bits (exact in `f32`).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.next_f32()
    }
}

fn spacing(block: &ParticleBlock, radius: &Radius) -> f32 {
    block.spacing.unwrap_or(2.0 * radius.max())
}

/// Lattice sites per axis: centres at `min + r_max + k * spacing`, every
/// particle wholly inside the region.
fn lattice_dims(block: &ParticleBlock, radius: &Radius) -> [u64; 3] {
    let s = f64::from(spacing(block, radius));
    let d = 2.0 * f64::from(radius.max());
    std::array::from_fn(|axis| {
        let extent = f64::from(block.region.max[axis]) - f64::from(block.region.min[axis]);
        if extent + 1e-9 < d || s <= 0.0 {
            0
        } else {
            let n = ((extent - d) / s + 1e-6).floor() + 1.0;
            if n >= u64::MAX as f64 {
                u64::MAX
            } else {
                n as u64
            }
        }
    })
}

/// How many particles `block` generates (after its `count` cap).
pub(crate) fn lattice_count(block: &ParticleBlock, radius: &Radius) -> u64 {
    let n = lattice_dims(block, radius)
        .iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(d));
    block.count.map_or(n, |c| c.min(n))
}

fn generate_block(
    block: &ParticleBlock,
    radius: &Radius,
    source: u32,
    velocity: [f32; 3],
    out: &mut Vec<ParticleInit>,
) {
    let dims = lattice_dims(block, radius);
    let total = lattice_count(block, radius);
    let s = spacing(block, radius);
    let r_max = radius.max();
    let mut rng = Rng::new(block.seed);
    out.reserve(total as usize);
    let mut made = 0u64;
    // x fastest, then z, then y: layers fill bottom-up under gravity along -y.
    'outer: for iy in 0..dims[1] {
        for iz in 0..dims[2] {
            for ix in 0..dims[0] {
                if made == total {
                    break 'outer;
                }
                let r = match *radius {
                    Radius::Fixed(r) => r,
                    Radius::Uniform { min, max } => rng.range(min, max),
                };
                // Jitter moves a particle by at most half the free gap around
                // it, so jittered particles never overlap.
                let gap = (s - 2.0 * r).max(0.0);
                let idx = [ix, iy, iz];
                let position = std::array::from_fn(|a| {
                    let centre = block.region.min[a] + r_max + idx[a] as f32 * s;
                    centre + block.jitter * gap * (rng.next_f32() - 0.5)
                });
                out.push(ParticleInit {
                    position,
                    velocity,
                    angular_velocity: [0.0; 3],
                    radius: r,
                    source,
                });
                made += 1;
            }
        }
    }
}

/// Where a scene's particle files come from: a folder on disk, or bytes
/// already fetched (the browser player, which has no file system).
pub trait SceneFiles {
    /// The path a file's errors name (`relative` joined to the scene's
    /// folder, or the file as a page fetched it).
    fn path_of(&self, relative: &str) -> std::path::PathBuf;
    /// The bytes of file `relative` (at most `limit` of them).
    fn read(&self, relative: &str, limit: u64) -> Result<Vec<u8>, String>;
}

/// A scene's files in a folder.
#[derive(Debug, Clone, Copy)]
pub struct FolderFiles<'a>(pub &'a Path);

impl SceneFiles for FolderFiles<'_> {
    fn path_of(&self, relative: &str) -> std::path::PathBuf {
        if relative.is_empty() {
            self.0.to_path_buf()
        } else {
            self.0.join(relative)
        }
    }

    fn read(&self, relative: &str, limit: u64) -> Result<Vec<u8>, String> {
        crate::io::read_regular_file(&self.0.join(relative), limit).map_err(|e| e.to_string())
    }
}

/// A scene's files held in memory, by relative name.
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles(pub std::collections::BTreeMap<String, Vec<u8>>);

impl SceneFiles for MemoryFiles {
    fn path_of(&self, relative: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(relative)
    }

    fn read(&self, relative: &str, limit: u64) -> Result<Vec<u8>, String> {
        match self.0.get(relative) {
            Some(b) if b.len() as u64 <= limit => Ok(b.clone()),
            Some(b) => Err(format!("{} bytes, more than the limit of {limit}", b.len())),
            None => Err("not among the files fetched".to_owned()),
        }
    }
}

pub(crate) fn free_particles(
    scene: &Scene,
    files: &dyn SceneFiles,
) -> Result<Vec<ParticleInit>, SceneError> {
    let scene_dir = files.path_of("");
    let scene_dir = scene_dir.as_path();
    let mut out = Vec::new();
    for (i, entry) in scene.particles.iter().enumerate() {
        let radius = entry
            .radius
            .unwrap_or(Radius::Fixed(scene.simulation.particle_radius));
        let source = i as u32;
        match &entry.origin {
            ParticleOrigin::Block(block) => {
                generate_block(block, &radius, source, entry.velocity, &mut out)
            }
            ParticleOrigin::File(file) => {
                let relative = file.as_str();
                let path = files.path_of(relative);
                let bytes = files
                    .read(relative, DEFAULT_MAX_PAYLOAD)
                    .map_err(|e| SceneError::particle_file(&path, None, e))?;
                let loaded = particles_from_bytes(&path, bytes, entry, &radius, source)?;
                check_inside_domain(scene, &path, &loaded)?;
                out.extend(loaded);
            }
        }
        if out.len() as u64 > MAX_PARTICLES {
            return Err(SceneError::particle_file(
                scene_dir,
                None,
                format!("the scene has more than {MAX_PARTICLES} free particles"),
            ));
        }
    }
    Ok(out)
}

fn check_inside_domain(
    scene: &Scene,
    path: &Path,
    particles: &[ParticleInit],
) -> Result<(), SceneError> {
    let (lo, hi) = (scene.domain.min, scene.domain.max);
    for (i, p) in particles.iter().enumerate() {
        if (0..3).any(|a| p.position[a] < lo[a] || p.position[a] > hi[a]) {
            return Err(SceneError::particle_file(
                path,
                None,
                format!(
                    "particle {i} at {:?} lies outside the domain {lo:?}..{hi:?}",
                    p.position
                ),
            ));
        }
    }
    Ok(())
}

/// Reads free particles from `path`: a `.pellet` simulation state, or CSV
/// lines `x,y,z[,radius]` (metres; `#` comments and one header line allowed).
pub fn load_particle_file(
    path: &Path,
    entry: &ParticleSource,
    radius: &Radius,
    source: u32,
) -> Result<Vec<ParticleInit>, SceneError> {
    let bytes = crate::io::read_regular_file(path, DEFAULT_MAX_PAYLOAD)
        .map_err(|e| SceneError::particle_file(path, None, e.to_string()))?;
    particles_from_bytes(path, bytes, entry, radius, source)
}

/// The particles of a particle file's `bytes` (a `.pellet` state when
/// `path` says so, else CSV); `path` names the file in errors.
pub fn particles_from_bytes(
    path: &Path,
    bytes: Vec<u8>,
    entry: &ParticleSource,
    radius: &Radius,
    source: u32,
) -> Result<Vec<ParticleInit>, SceneError> {
    if path.extension().is_some_and(|e| e == "pellet") {
        let state: SimState = crate::container::decode(&bytes, &DecodeLimits::default())
            .map_err(|e| SceneError::particle_file(path, None, e.to_string()))?;
        return Ok((0..state.positions.len())
            .map(|i| ParticleInit {
                position: state.positions[i],
                velocity: state.velocities[i],
                angular_velocity: state.angular_velocities.get(i).copied().unwrap_or([0.0; 3]),
                radius: state.radii[i],
                source,
            })
            .collect());
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| SceneError::particle_file(path, None, format!("not UTF-8 text: {e}")))?;
    parse_csv(path, &text, entry.velocity, radius, source)
}

fn parse_csv(
    path: &Path,
    text: &str,
    velocity: [f32; 3],
    radius: &Radius,
    source: u32,
) -> Result<Vec<ParticleInit>, SceneError> {
    let mut out = Vec::new();
    let mut rng = Rng::new(u64::from(source));
    let mut seen_data = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let numbers: Result<Vec<f32>, _> = fields.iter().map(|f| f.parse::<f32>()).collect();
        let numbers = match numbers {
            Ok(n) => n,
            // One header line (e.g. `x,y,z,radius`) before the data is fine.
            Err(_)
                if !seen_data
                    && fields
                        .iter()
                        .all(|f| f.chars().all(|c| c.is_alphanumeric() || c == '_')) =>
            {
                seen_data = true;
                continue;
            }
            Err(e) => {
                return Err(SceneError::particle_file(
                    path,
                    Some(line_no),
                    format!("{line:?} is not numbers: {e}"),
                ));
            }
        };
        seen_data = true;
        if !(3..=4).contains(&numbers.len()) {
            return Err(SceneError::particle_file(
                path,
                Some(line_no),
                format!(
                    "has {} fields, expected x,y,z or x,y,z,radius",
                    numbers.len()
                ),
            ));
        }
        if let Some(bad) = numbers.iter().find(|x| !x.is_finite()) {
            return Err(SceneError::particle_file(
                path,
                Some(line_no),
                format!("{bad} is not finite"),
            ));
        }
        let r = match numbers.get(3) {
            Some(&r) if r > 0.0 => r,
            Some(&r) => {
                return Err(SceneError::particle_file(
                    path,
                    Some(line_no),
                    format!("radius {r} must be greater than zero"),
                ));
            }
            None => match *radius {
                Radius::Fixed(r) => r,
                Radius::Uniform { min, max } => rng.range(min, max),
            },
        };
        if out.len() as u64 >= MAX_PARTICLES {
            return Err(SceneError::particle_file(
                path,
                Some(line_no),
                format!("more than {MAX_PARTICLES} particles"),
            ));
        }
        out.push(ParticleInit {
            position: [numbers[0], numbers[1], numbers[2]],
            velocity,
            angular_velocity: [0.0; 3],
            radius: r,
            source,
        });
    }
    Ok(out)
}
