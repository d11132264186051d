//! Scene hot reload and switching: the edited or chosen scene replaces the
//! running one, carrying its state over where it can.

use super::*;

impl WindowState {
    /// Hot reload after an edit: the new scene, with the running state
    /// carried over; a broken edit keeps the last good state and says why.
    pub(super) fn hot_reload(&mut self, cache: Option<PathBuf>) {
        let path = self.playing.path.clone();
        let setup = load_setup_cached(&path, GridMode::Auto, cache);
        let setup = match setup {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(
                    "reload of {} failed, keeping the last good state: {e}",
                    path.display()
                );
                self.message = Some(format!("reload failed (keeping the last good state): {e}"));
                return;
            }
        };
        match self.restart(setup, None) {
            Ok((setup, sim, renderer)) => {
                tracing::info!("reloaded {}", path.display());
                self.playing = Playing {
                    path: path.clone(),
                    live: Live::from_setup(&setup),
                    setup,
                    sim,
                    renderer,
                    stats: None,
                };
                self.message = Some("reloaded".into());
                if self.remote.is_none() {
                    self.watcher =
                        pellet_formats::watch::FileWatcher::new(&scene_files(&path)).ok();
                }
            }
            Err(e) => {
                self.message = Some(format!("reload failed (keeping the last good state): {e}"))
            }
        }
    }

    /// A new simulation and renderer for `setup` with the running state
    /// carried over, the kernels compiled from `sim_shaders` when given (else
    /// the current shaders).
    pub(super) fn restart(
        &self,
        mut setup: SimSetup,
        sim_shaders: Option<&SimShaders>,
    ) -> Result<(SimSetup, Simulation, FrameRenderer), PlayerError> {
        if let (Ok(state), Ok(bodies)) = (self.playing.sim.snapshot(), self.playing.sim.bodies()) {
            setup.carry_state_from(&self.playing.setup, &state, &bodies);
        }
        let sim = match sim_shaders {
            Some(shaders) => Simulation::gpu_with_shaders(self.gpu.clone(), &setup, shaders)?,
            None => self.shaders.simulation(&self.gpu, &setup)?,
        };
        let size = (self.config.width, self.config.height);
        let renderer = self
            .shaders
            .renderer(&sim, &setup, size, self.config.format)?;
        Ok((setup, sim, renderer))
    }

    pub(super) fn switch_to(&mut self, path: PathBuf, cache: Option<PathBuf>) {
        match start_scene(
            &self.gpu,
            &path,
            cache,
            self.config.format,
            (self.config.width, self.config.height),
            &self.shaders,
        ) {
            Ok(p) => {
                let (min, max) = frame_box(&p.setup);
                self.camera = Camera::frame_particles(&p.setup.particles.pos, min, max);
                self.watcher = pellet_formats::watch::FileWatcher::new(&scene_files(&path)).ok();
                self.remote = None; // a picked scene is local
                self.playing = p;
                self.message = None;
                self.sim_debt = 0.0;
            }
            Err(e) => {
                tracing::error!("{}: {e}", path.display());
                self.message = Some(format!("{}: {e}", path.display()));
            }
        }
    }
}
