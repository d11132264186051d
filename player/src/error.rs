//! [`PlayerError`]: every failure of the `player` library, by what failed.
//! The engine's own failures stay [`SimError`]s inside it; served folders
//! fail as [`RemoteError`]s.

use std::path::PathBuf;

use thiserror::Error;

use pellet_formats::SceneError;
use pellet_formats::baked_folder::BakedFolderError;
use pellet_sim::SimError;

use crate::remote::RemoteError;

/// Why a player operation failed. Each message is one line that names the
/// file, folder, URL or flag it is about.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PlayerError {
    /// GPU work failed.
    #[error(transparent)]
    Gpu(#[from] pellet_gpu::GpuError),
    /// A scene is invalid.
    #[error(transparent)]
    Scene(#[from] SceneError),
    /// The simulation could not be set up or had to stop.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// A served baked folder could not be loaded.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// A baked folder's manifest or object could not be read.
    #[error(transparent)]
    Folder(#[from] BakedFolderError),
    /// A snapshot could not be written.
    #[error(transparent)]
    Save(#[from] pellet_formats::WriteError),
    /// A baked scene names something that is not an object of its manifest.
    #[error("{}: {what} (a baked scene may name only objects of its own manifest)", dir.display())]
    Confinement {
        /// The baked folder.
        dir: PathBuf,
        /// What it names, e.g. `particles[0].file "x" is not an object`.
        what: String,
    },
    /// A folder given as a scene has no manifest.
    #[error(
        "{}: is a folder without a manifest.pellet, so not a baked folder (bake scene SCENE.toml -o DIR writes one; or give a scene TOML)",
        dir.display()
    )]
    NotBakedFolder {
        /// The folder.
        dir: PathBuf,
    },
    /// A `.pellet` asset given where a scene belongs.
    #[error(
        "{}: is a .pellet asset (a saved state or baked body), not a scene: play a scene TOML or a baked folder; to continue from a saved state, name it in a scene's [[particles]] file = \"{name}\"; to look inside, run bake inspect {}",
        path.display(),
        path.display()
    )]
    NotAScene {
        /// The file.
        path: PathBuf,
        /// Its file name.
        name: String,
    },
    /// An output path that could not be written, refused before the work.
    #[error("{flag} {error}")]
    Output {
        /// The option, e.g. `--save`.
        flag: &'static str,
        /// Why (it names the path), e.g. `/nodir/a.pellet: the folder /nodir
        /// does not exist`; shown in this message, so not a separate source.
        error: pellet_formats::output::OutputError,
    },
    /// Writing a file during the run failed.
    #[error("cannot write {}: {error}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// A run longer than [`pellet_formats::scene::MAX_STEPS`].
    #[error(
        "{what} is {steps:.3e} steps, more than the limit of {} steps per run{hint}",
        pellet_formats::scene::MAX_STEPS
    )]
    TooManySteps {
        /// Where the count comes from, e.g. `--steps 10000000000000`.
        what: String,
        /// The count.
        steps: f64,
        /// What to do, starting with `; ` (or empty).
        hint: &'static str,
    },
    /// The scene has nothing to simulate.
    #[error("{} has no particles to simulate", scene.display())]
    NoParticles {
        /// The scene.
        scene: PathBuf,
    },
    /// Options that do not go together.
    #[error("{0}")]
    Options(&'static str),
    /// No display to open a window on.
    #[error(
        "{}, so no window; render frames instead: player run {} --headless --frames 120 --out frames/",
        match display { Some(d) => format!("cannot open the display {d} (no display server answers there)"), None => "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)".to_owned() },
        scene.display()
    )]
    NoDisplay {
        /// The display the environment names (`DISPLAY=:77`), if any.
        display: Option<String>,
        /// The scene that was to be shown.
        scene: PathBuf,
    },
    /// The window or its surface could not be made or run.
    #[error("{what}: {message}")]
    Window {
        /// What was being done, e.g. `creating the window`.
        what: &'static str,
        /// What winit or wgpu said.
        message: String,
    },
    /// A screenshot could not be taken or saved.
    #[error("screenshot {}: {message}", path.display())]
    Screenshot {
        /// The PNG.
        path: PathBuf,
        /// Why.
        message: String,
    },
}
