//! `bake`'s command line: every subcommand, its arguments and their help.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use pellet_bake::bake_mesh::DEFAULT_DENSITY;
use pellet_gpu::BackendChoice;

/// Pellet's asset processor: turns meshes into particle bodies and checks
/// baked `.pellet` files.
///
/// Every command exits 0 on success, 1 on a failure (with one line on
/// stderr naming the file and the problem) and 2 on a usage error.
#[derive(Debug, Parser)]
#[command(name = "bake", version, about, long_about)]
pub struct Cli {
    /// Log more (repeat for more detail); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

// Each variant's doc comment is its subcommand's help: the first paragraph
// is the line `bake --help` lists, the rest shows in `bake SUB --help`.
// The argument structs below carry no doc comment of their own, so that
// nothing overrides the variant's.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bake a glTF mesh into a rigid body made of particles.
    ///
    /// Voxelizes the mesh (every triangle primitive of its default scene,
    /// node transforms applied) on a grid fitted to its bounding box, puts one
    /// particle of the voxel's diameter in every voxel inside (solid) or on
    /// the surface (shell), and writes the particles with the body's mass,
    /// centre of mass, inertia tensor, principal axes, per-particle surface
    /// normals and depths, the source and settings hashes, and a bake report.
    ///
    /// Solid mode marks a voxel inside by the parity of surface crossings in
    /// front of its centre along x, y and z (GPU depth peeling, as many layers
    /// as the mesh has), combined by majority vote, so small holes in a mesh
    /// do not leak. The report counts open edges and voxels where the axes
    /// disagreed.
    ///
    /// Example: bake mesh assets/meshes/bunny.glb -o bunny.pellet --resolution 128 --preview bunny.png
    Mesh(MeshArgs),
    /// Bake every mesh a scene references into a servable baked folder.
    ///
    /// Each `[[bodies]]` mesh is voxelized at twice the body's particle
    /// radius (the exact CPU voxelizer) and stored as a content-addressed
    /// object `<blake3>.pellet`; particle files become objects too; then the
    /// baked scene, and last `manifest.pellet`, each written atomically.
    /// Bodies whose mesh and settings did not change since the last bake of
    /// the same folder are reused, not baked again. Serve the folder with any
    /// static HTTP server; `player run DIR` plays it.
    ///
    /// Example: bake scene assets/scenes/bunnies.toml -o baked/bunnies
    Scene(SceneArgs),
    /// Re-bake a scene's folder whenever the scene or one of its meshes changes.
    ///
    /// Bakes once like `bake scene`, then watches the scene file and every
    /// mesh and particle file it names (their folders, since editors save by
    /// renaming) and re-bakes after each saved edit; unchanged bodies are
    /// reused. A broken edit prints its error and the last good folder stays.
    /// Stop with Ctrl-C.
    ///
    /// Example: bake watch assets/scenes/bunnies.toml -o baked/bunnies
    Watch(WatchArgs),
    /// Bake the neighbour-overlap table used to predict neighbour counts.
    ///
    /// For search radius eps and grid cells of length l, entry E(Cq, Cj) is
    /// the average, over positions uniform in cell Cq, of the volume of the
    /// search sphere that lies in cell Cj, in cell volumes, for every cell
    /// offset the sphere can reach ({-1,0,1}^3 up to eps/l = 1, {-2..2}^3 up
    /// to 2). Stored reduced by symmetry, with a standard error per entry,
    /// at evenly spaced ratios eps/l; lookups interpolate between them.
    ///
    /// Example: bake table -o table.pellet && bake inspect table.pellet --ratio 1.0
    Table(TableArgs),
    /// Check a neighbour-overlap table's predictions against exact counts.
    ///
    /// Generates particle distributions (uniform, a packed conical pile, a
    /// tall packed column, Gaussian clusters) on a grid of unit cells, or
    /// reads point files, and for each ratio compares the model's expected
    /// neighbours per occupied cell with the exact mean number of neighbours
    /// within eps of that cell's particles (Pearson correlation and RMSE), the
    /// same for each cell's total (what a block's memory sums), the RMSE
    /// after the packing correction, and the fitted estimate (raw and
    /// smoothed counts, occupancy and sub-cells, weights fitted on every
    /// 64th cell and judged on the others). Prints a Markdown table (or JSON);
    /// docs/neighbour-model.md holds a run.
    ///
    /// Examples: bake validate-table table.pellet --particles 1000000;
    /// bake validate-table table.pellet --points settled.pellet --cell-length 0.009
    ValidateTable(ValidateTableArgs),
    /// Print the header and a summary of `.pellet` files.
    ///
    /// Verifies each file completely (header, size limits, decompression,
    /// BLAKE3 hash, decoding and semantic checks) before printing. A corrupt,
    /// truncated or foreign file gives one line on stderr and exit status 1.
    ///
    /// Example: bake inspect assets/baked/bunny.pellet --json
    Inspect(InspectArgs),
}

// `bake mesh`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("size").required(true).args(["voxel_size", "resolution"])))]
pub struct MeshArgs {
    /// The mesh: `.glb`, or `.gltf` with `.bin` files or data URIs in its folder.
    pub input: PathBuf,
    /// Where to write the particle body (`.pellet`).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Edge of one voxel (the particle diameter), metres.
    #[arg(long, value_name = "METRES")]
    pub voxel_size: Option<f32>,
    /// Voxels along the longest axis of the mesh's bounding box.
    #[arg(long, value_name = "CELLS")]
    pub resolution: Option<u32>,
    /// `solid` fills the inside; `shell` keeps the voxels the surface passes
    /// through (hollow bodies, scenery).
    #[arg(long, value_enum, default_value_t = Mode::Solid)]
    pub mode: Mode,
    /// Density for the mass properties, kg/m^3.
    #[arg(long, value_name = "KG_M3", default_value_t = DEFAULT_DENSITY)]
    pub density: f32,
    /// Uniform scale applied to the mesh before voxelizing.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f32,
    /// Also write a PNG of the occupancy as 2-D slices.
    #[arg(long, value_name = "PNG")]
    pub preview: Option<PathBuf>,
    /// Voxelize on the GPU (depth peeling) or with the exact CPU reference.
    #[arg(long, value_enum, default_value_t = Backend::Gpu)]
    pub backend: Backend,
    /// Which wgpu backend the GPU voxelizer uses.
    #[arg(long, default_value_t = BackendChoice::Auto, value_parser = pellet_cli::gpu_backend_parser())]
    pub gpu_backend: BackendChoice,
    /// No progress spinner and no summary line.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the body's summary as JSON (as `bake inspect --json`).
    #[arg(long)]
    pub json: bool,
}

// `bake scene`.
#[derive(Debug, Args)]
pub struct SceneArgs {
    /// The scene (TOML).
    pub scene: PathBuf,
    /// The baked folder to write (created if missing).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress output.
    #[arg(short, long)]
    pub quiet: bool,
}

// `bake watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The scene (TOML).
    pub scene: PathBuf,
    /// The baked folder to keep up to date.
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Stop after this many bakes (scripted checks).
    #[arg(long, value_name = "N", hide = true)]
    pub max_bakes: Option<u64>,
}

// `bake table`.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// Where to write the table (`.pellet`).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Smallest ratio eps / l.
    #[arg(long, default_value_t = 0.1)]
    pub ratio_min: f64,
    /// Largest ratio eps / l (at most 2).
    #[arg(long, default_value_t = 2.0)]
    pub ratio_max: f64,
    /// Ratios tabulated, evenly spaced.
    #[arg(long, default_value_t = 64)]
    pub ratios: u32,
    /// Samples per entry (at most 268435456: they are kept in memory, 16
    /// bytes each, within 4 GiB).
    #[arg(long, default_value_t = 1_000_000)]
    pub samples: u64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Seeded Monte Carlo, or a randomly shifted Sobol sequence.
    #[arg(long, value_enum, default_value_t = Method::Montecarlo)]
    pub method: Method,
    /// No summary line.
    #[arg(short, long)]
    pub quiet: bool,
}

// `bake validate-table`.
#[derive(Debug, Args)]
pub struct ValidateTableArgs {
    /// The table to check.
    pub table: PathBuf,
    /// Particles per generated distribution.
    #[arg(long, default_value_t = 1_000_000)]
    pub particles: usize,
    /// Generated distributions to check, comma-separated (default: all
    /// four, or none when `--points` is given).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub distributions: Vec<ValidationDistribution>,
    /// Point files to check as well: CSV `x,y,z`, raw little-endian f32
    /// triples (`.f32`), or a simulation state (`.pellet`), in metres.
    #[arg(long, value_name = "FILE", requires = "cell_length")]
    pub points: Vec<PathBuf>,
    /// Grid cell length for `--points`, metres; eps = ratio x this.
    #[arg(long, value_name = "METRES")]
    pub cell_length: Option<f64>,
    /// Ratios eps / l to check, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0.5, 1.0, 1.5, 2.0])]
    pub ratios: Vec<f64>,
    /// Seed of the distributions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress spinner (it shows the distribution, ratio and step,
    /// on a terminal only).
    #[arg(short, long)]
    pub quiet: bool,
}

// `bake inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Files to inspect.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print JSON (one object per file; an array for several files).
    #[arg(long)]
    pub json: bool,
    /// For a neighbour-overlap table: print the table interpolated at
    /// this ratio eps/l as CSV `dx,dy,dz,value,stderr`, every offset.
    #[arg(long, value_name = "R", conflicts_with_all = ["json", "points"])]
    pub ratio: Option<f64>,
    /// Print a particle body's particle centres in the mesh's own frame,
    /// one `x,y,z` line each (metres), instead of the summary.
    #[arg(long, conflicts_with = "json")]
    pub points: bool,
    /// Print a saved simulation state's particles as CSV
    /// `id,x,y,z,vx,vy,vz,radius,body` (metres, m/s; body -1 for free particles).
    #[arg(long, conflicts_with_all = ["json", "points", "ratio"])]
    pub particles: bool,
    /// Print a saved simulation state's rigid bodies as CSV
    /// `id,x,y,z,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz` (centre of mass in metres,
    /// orientation quaternion, velocity m/s, angular velocity rad/s).
    #[arg(long, conflicts_with_all = ["json", "points", "ratio", "particles"])]
    pub bodies: bool,
    /// Refuse payloads declared larger than this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pub max_payload_mib: u64,
}

/// `bake table --method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Method {
    Montecarlo,
    Sobol,
}

/// `bake mesh --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Solid,
    Shell,
}

/// `bake mesh --backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    Gpu,
    Cpu,
}

/// A generated distribution for `bake validate-table`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidationDistribution {
    Uniform,
    Pile,
    Column,
    Clusters,
}
