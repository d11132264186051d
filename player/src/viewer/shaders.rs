//! Shader hot reload: `--shaders DIR` sources, validated before use, and
//! rebuilding the pipelines when they are saved.

use super::*;

/// Shader hot reload: the overriding sources and the watcher on their folder.
#[derive(Default)]
pub(super) struct Shaders {
    pub(super) dir: Option<PathBuf>,
    /// The simulation's stage sources, with the folder's files in place of
    /// the built-in ones (None: no folder, or none of its files).
    pub(super) sim: Option<SimShaders>,
    pub(super) spheres: Option<String>,
    pub(super) watcher: Option<pellet_formats::watch::FileWatcher>,
}

/// The simulation shaders with every stage file found in `dir` in place of
/// the built-in one; None when the folder has none of them.
fn read_sim_shaders(dir: &Path) -> Option<SimShaders> {
    let mut shaders = SimShaders::builtin();
    let mut any = false;
    for file in shader_files() {
        if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
            any |= shaders.set(file, text);
        }
    }
    any.then_some(shaders)
}

impl Shaders {
    /// The shaders in `dir` that pass naga's validation; the others are
    /// reported and the built-in ones used.
    pub(super) fn load(dir: Option<&Path>) -> Self {
        let Some(dir) = dir else {
            return Self::default();
        };
        let read = |name: &str| -> Option<String> {
            let text = std::fs::read_to_string(dir.join(name)).ok()?;
            match crate::sim::gpu::validate_wgsl(name, &text) {
                Ok(_) => Some(text),
                Err(e) => {
                    tracing::error!("{}: using the built-in shader: {e}", dir.display());
                    None
                }
            }
        };
        let sim = read_sim_shaders(dir).filter(|shaders| match shaders.compile() {
            Ok(_) => true,
            Err(e) => {
                tracing::error!(
                    "{}: using the built-in simulation shaders: {e}",
                    dir.display()
                );
                false
            }
        });
        let watched: Vec<PathBuf> = shader_files()
            .chain(["spheres.wgsl"])
            .map(|f| dir.join(f))
            .collect();
        Self {
            dir: Some(dir.to_path_buf()),
            sim,
            spheres: read("spheres.wgsl"),
            watcher: pellet_formats::watch::FileWatcher::new(&watched).ok(),
        }
    }

    pub(super) fn simulation(
        &self,
        gpu: &Arc<Gpu>,
        setup: &SimSetup,
    ) -> Result<Simulation, SimError> {
        match &self.sim {
            Some(shaders) => Simulation::gpu_with_shaders(gpu.clone(), setup, shaders),
            None => Simulation::gpu(gpu.clone(), setup),
        }
    }

    pub(super) fn renderer(
        &self,
        sim: &Simulation,
        setup: &SimSetup,
        size: (u32, u32),
        format: wgpu::TextureFormat,
    ) -> Result<FrameRenderer, PlayerError> {
        let Some(g) = sim.gpu_sim() else {
            return Err(PlayerError::Options("the viewer needs the GPU backend"));
        };
        let mut renderer =
            FrameRenderer::with_format(g, setup, size.0.max(1), size.1.max(1), format)?;
        if let Some(source) = &self.spheres {
            renderer.reload_shader(source)?;
        }
        Ok(renderer)
    }
}

impl WindowState {
    /// Shader hot reload after an edit in the shader folder: each changed
    /// shader is validated and its pipelines rebuilt; on an error the old
    /// pipelines keep running and the error is shown.
    pub(super) fn reload_shaders(&mut self) {
        let Some(dir) = self.shaders.dir.clone() else {
            return;
        };
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let mut report = Vec::new();
        if let Some(source) = read("spheres.wgsl")
            && self.shaders.spheres.as_ref() != Some(&source)
        {
            match self.playing.renderer.reload_shader(&source) {
                Ok(()) => {
                    tracing::info!("shader reloaded: spheres.wgsl");
                    report.push("spheres.wgsl reloaded".to_string());
                    self.shaders.spheres = Some(source);
                }
                Err(e) => {
                    tracing::error!("shader rejected, keeping the old pipeline: {e}");
                    report.push(format!("shader rejected (keeping the old pipeline): {e}"));
                }
            }
        }
        if let Some(shaders) = read_sim_shaders(&dir)
            && self.shaders.sim.as_ref() != Some(&shaders)
        {
            // The kernels are rebuilt with the running state carried over.
            let started = self.restart(self.playing.setup.clone(), Some(&shaders));
            match started {
                Ok((setup, sim, renderer)) => {
                    tracing::info!("shader reloaded: simulation stages");
                    report.push("simulation shaders reloaded".to_string());
                    self.shaders.sim = Some(shaders);
                    self.playing.sim = sim;
                    self.playing.renderer = renderer;
                    self.playing.setup = setup;
                    self.apply_live();
                }
                Err(e) => {
                    tracing::error!("shader rejected, keeping the old pipeline: {e}");
                    report.push(format!("shader rejected (keeping the old pipeline): {e}"));
                }
            }
        }
        if !report.is_empty() {
            self.message = Some(report.join("\n"));
        }
    }
}
