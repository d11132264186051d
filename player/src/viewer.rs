//! The viewer: `player <scene>` opens a window (winit + a wgpu surface) and
//! plays the scene in real time on the GPU, drawn with the same impostor
//! renderer as headless frames, straight from the simulation's buffers.
//!
//! Controls (as in the seed): left-drag orbits, right-drag pans, the wheel
//! zooms; space pauses, `.` steps once, `R` resets, `F` frames everything,
//! `1`-`9` switch to the scenes in the same folder, `C` toggles colour by
//! speed. The egui panel has the scene picker, live parameters, statistics
//! and a plot of step time.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use pellet_gpu::{Gpu, wgpu};
use winit::application::ApplicationHandler;
use winit::dpi::{LogicalSize, PhysicalPosition};
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{Key, NamedKey};
use winit::window::{Window, WindowId};

use crate::PlayerError;
use crate::render::{Camera, ColourMode, FrameRenderer};
use crate::sim::run::load_setup_cached;
use crate::sim::setup::{PairParams, SimSetup, damping_ratio};
use crate::sim::{GridMode, SimError, Simulation, StepStats};

/// What `player <scene>` does.
#[derive(Debug, Clone, Default)]
pub struct ViewerOptions {
    /// Scene TOML or baked folder.
    pub scene: PathBuf,
    /// Body cache folder.
    pub cache_dir: Option<PathBuf>,
    /// Close after this many frames (scripted checks).
    pub exit_after: Option<u64>,
    /// Save the window's last frame here (PNG) before closing.
    pub screenshot: Option<PathBuf>,
    /// Seconds between polls of a remote scene's manifest (conditional
    /// requests; an unchanged manifest costs one 304). Default 2.
    pub poll_seconds: f64,
    /// Shader hot reload: a folder whose `sim.wgsl` and `spheres.wgsl` (either
    /// may be missing) replace the built-in shaders and are watched.
    pub shaders: Option<PathBuf>,
}

/// Shader hot reload: the overriding sources and the watcher on their folder.
#[derive(Default)]
struct Shaders {
    dir: Option<PathBuf>,
    sim: Option<String>,
    spheres: Option<String>,
    watcher: Option<pellet_formats::watch::FileWatcher>,
}

impl Shaders {
    /// The shaders in `dir` that pass naga's validation; the others are
    /// reported and the built-in ones used.
    fn load(dir: Option<&Path>) -> Self {
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
        Self {
            dir: Some(dir.to_path_buf()),
            sim: read("sim.wgsl"),
            spheres: read("spheres.wgsl"),
            watcher: pellet_formats::watch::FileWatcher::new(&[
                dir.join("sim.wgsl"),
                dir.join("spheres.wgsl"),
            ])
            .ok(),
        }
    }

    fn simulation(&self, gpu: &Arc<Gpu>, setup: &SimSetup) -> Result<Simulation, SimError> {
        match &self.sim {
            Some(source) => Simulation::gpu_with_shader(gpu.clone(), setup, source),
            None => Simulation::gpu(gpu.clone(), setup),
        }
    }

    fn renderer(
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

/// Frame and step rates measured over the last [`RateMeter::WINDOW_S`]
/// seconds of wall-clock time (at least the last two frames), so a slow
/// frame shows at once rather than being smoothed away.
#[derive(Debug, Default)]
struct RateMeter {
    /// (when a frame started, steps taken by then).
    samples: VecDeque<(Instant, u64)>,
}

impl RateMeter {
    const WINDOW_S: f64 = 2.0;

    fn record(&mut self, at: Instant, steps: u64) {
        self.samples.push_back((at, steps));
        while self.samples.len() > 2
            && self
                .samples
                .front()
                .is_some_and(|(t, _)| at.duration_since(*t).as_secs_f64() > Self::WINDOW_S)
        {
            self.samples.pop_front();
        }
    }

    fn span_s(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(a), Some(b)) => b.0.duration_since(a.0).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Frames per second and steps per second.
    fn rates(&self) -> (f64, f64) {
        let span = self.span_s();
        match (self.samples.front(), self.samples.back()) {
            (Some(a), Some(b)) if span > 0.0 => (
                (self.samples.len() - 1) as f64 / span,
                b.1.saturating_sub(a.1) as f64 / span,
            ),
            _ => (0.0, 0.0),
        }
    }
}

/// A rate with the digits it deserves: `0.31`, `8.5`, `85`.
fn rate_text(r: f64) -> String {
    if r < 1.0 {
        format!("{r:.2}")
    } else if r < 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.0}")
    }
}

/// Whether a display server is reachable through the environment.
pub fn display_available() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// The display the environment names (`DISPLAY=:77`), for messages.
fn named_display() -> Option<String> {
    let named: Vec<String> = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .filter_map(|v| {
            std::env::var(v)
                .ok()
                .filter(|s| !s.is_empty())
                .map(|s| format!("{v}={s}"))
        })
        .collect();
    (!named.is_empty()).then(|| named.join(", "))
}

/// The one line shown when there is no display.
pub fn no_display_message(scene: &Path) -> String {
    PlayerError::NoDisplay {
        display: None,
        scene: scene.to_path_buf(),
    }
    .to_string()
}

/// Opens the window and plays until it is closed.
pub fn run_viewer(options: ViewerOptions) -> Result<(), PlayerError> {
    if !display_available() {
        return Err(PlayerError::NoDisplay {
            display: None,
            scene: options.scene.clone(),
        });
    }
    let event_loop = EventLoop::new().map_err(|e| {
        // winit's message names its source files; keep it for -vv.
        tracing::debug!("EventLoop::new: {e}");
        PlayerError::NoDisplay {
            display: named_display(),
            scene: options.scene.clone(),
        }
    })?;
    event_loop.set_control_flow(ControlFlow::Poll);
    let mut app = App {
        options,
        state: None,
        error: None,
    };
    event_loop
        .run_app(&mut app)
        .map_err(|e| PlayerError::Window {
            what: "the window event loop failed",
            message: e.to_string(),
        })?;
    match app.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Parameters the panel edits, applied without restarting.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Live {
    gravity: [f32; 3],
    stiffness_scale: f32,
    restitution: f32,
    friction: f32,
    dt: f64,
    max_substeps: u32,
}

impl Live {
    fn from_setup(s: &SimSetup) -> Self {
        let p = s.pairs.first().copied().unwrap_or_default();
        let restitution = crate::sim::setup::restitution_of(&p);
        Self {
            gravity: s.gravity,
            stiffness_scale: 1.0,
            restitution,
            friction: p.mu,
            dt: s.dt,
            max_substeps: 200,
        }
    }

    /// The setup's pairs with these parameters applied.
    fn pairs(&self, base: &[PairParams]) -> Vec<PairParams> {
        let r2 = (2.0 * damping_ratio(f64::from(self.restitution))) as f32;
        base.iter()
            .map(|p| PairParams {
                kn: p.kn * self.stiffness_scale,
                kt: p.kt * self.stiffness_scale,
                mu: self.friction,
                damping_ratio2: if p.damping_abs > 0.0 { 0.0 } else { r2 },
                ..*p
            })
            .collect()
    }
}

struct Playing {
    path: PathBuf,
    setup: SimSetup,
    sim: Simulation,
    renderer: FrameRenderer,
    live: Live,
    stats: Option<StepStats>,
}

struct WindowState {
    window: Arc<Window>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    gpu: Arc<Gpu>,
    playing: Playing,
    camera: Camera,
    colour: ColourMode,
    paused: bool,
    step_once: bool,
    drag: Option<MouseButton>,
    cursor: PhysicalPosition<f64>,
    egui_ctx: egui::Context,
    egui_state: egui_winit::State,
    egui_renderer: egui_wgpu::Renderer,
    step_ms: VecDeque<f32>,
    last_frame: Instant,
    sim_debt: f64,
    behind: bool,
    frames: u64,
    rates: RateMeter,
    message: Option<String>,
    siblings: Vec<PathBuf>,
    watcher: Option<pellet_formats::watch::FileWatcher>,
    remote: Option<crate::remote::RemoteWatcher>,
    shaders: Shaders,
}

/// The files a scene is made of (just the path for a folder or URL).
fn scene_files(path: &Path) -> Vec<PathBuf> {
    pellet_formats::Scene::load(path)
        .map(|s| s.input_files(path))
        .unwrap_or_else(|_| vec![path.to_path_buf()])
}

struct App {
    options: ViewerOptions,
    state: Option<WindowState>,
    error: Option<PlayerError>,
}

fn scenes_beside(path: &Path) -> Vec<PathBuf> {
    // A scene file's folder; for a baked folder, the folder beside it.
    let dir = path.parent();
    let mut v: Vec<PathBuf> = dir
        .and_then(|d| {
            std::fs::read_dir(if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            })
            .ok()
        })
        .map(|it| {
            it.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn frame_box(setup: &SimSetup) -> ([f32; 3], [f32; 3]) {
    let min = setup.grid.origin;
    let max = std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
    (min, max)
}

fn start_scene(
    gpu: &Arc<Gpu>,
    path: &Path,
    cache: Option<PathBuf>,
    format: wgpu::TextureFormat,
    size: (u32, u32),
    shaders: &Shaders,
) -> Result<Playing, PlayerError> {
    let setup = load_setup_cached(path, GridMode::Auto, cache)?;
    let sim = shaders.simulation(gpu, &setup)?;
    let renderer = shaders.renderer(&sim, &setup, size, format)?;
    Ok(Playing {
        path: path.to_path_buf(),
        live: Live::from_setup(&setup),
        setup,
        sim,
        renderer,
        stats: None,
    })
}

impl WindowState {
    fn new(event_loop: &ActiveEventLoop, options: &ViewerOptions) -> Result<Self, PlayerError> {
        let fail = |what: &'static str, e: &dyn std::fmt::Display| PlayerError::Window {
            what,
            message: e.to_string(),
        };
        let window = Arc::new(
            event_loop
                .create_window(
                    Window::default_attributes()
                        .with_title("Pellet")
                        .with_inner_size(LogicalSize::new(1280.0, 760.0)),
                )
                .map_err(|e| fail("cannot open a window", &e))?,
        );
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::GL;
        let instance = wgpu::Instance::new(desc);
        let surface = instance
            .create_surface(window.clone())
            .map_err(|e| fail("cannot draw into the window", &e))?;
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            compatible_surface: Some(&surface),
            force_fallback_adapter: false,
            apply_limit_buckets: false,
        }))
        .map_err(|e| fail("no GPU adapter can draw into the window", &e))?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("pellet-viewer"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| fail("cannot open the GPU", &e))?;
        let gpu = Arc::new(Gpu::from_parts(adapter, device, queue));
        let size = window.inner_size();
        let mut config = surface
            .get_default_config(&gpu.adapter, size.width.max(1), size.height.max(1))
            .ok_or_else(|| PlayerError::Window {
                what: "the window surface",
                message: "is not supported by this adapter".into(),
            })?;
        let caps = surface.get_capabilities(&gpu.adapter);
        if caps.usages.contains(wgpu::TextureUsages::COPY_SRC) {
            config.usage |= wgpu::TextureUsages::COPY_SRC;
        }
        if let Some(f) = caps.formats.iter().find(|f| f.is_srgb()) {
            config.format = *f;
        }
        surface.configure(&gpu.device, &config);
        // A remote scene is mirrored into its cache folder, played from
        // there, and followed by polling its manifest.
        let (scene, remote) = if crate::remote::is_url(&options.scene) {
            let mut folder = crate::remote::RemoteFolder::new(
                &options.scene.to_string_lossy(),
                &crate::remote::http_cache_root(options.cache_dir.as_deref()),
            );
            let path = folder.fetch()?;
            let interval = std::time::Duration::from_secs_f64(options.poll_seconds.max(0.05));
            (
                path,
                Some(crate::remote::RemoteWatcher::start(folder, interval)),
            )
        } else {
            (options.scene.clone(), None)
        };
        let shaders = Shaders::load(options.shaders.as_deref());
        let playing = start_scene(
            &gpu,
            &scene,
            options.cache_dir.clone(),
            config.format,
            (config.width, config.height),
            &shaders,
        )?;
        let (min, max) = frame_box(&playing.setup);
        let camera = Camera::frame_particles(&playing.setup.particles.pos, min, max);
        let egui_ctx = egui::Context::default();
        let egui_state = egui_winit::State::new(
            egui_ctx.clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            None,
            Some(gpu.device.limits().max_texture_dimension_2d as usize),
        );
        let egui_renderer =
            egui_wgpu::Renderer::new(&gpu.device, config.format, Default::default());
        tracing::info!(adapter = %gpu.report.one_line(), "viewer ready");
        Ok(Self {
            siblings: scenes_beside(&options.scene),
            window,
            surface,
            config,
            gpu,
            camera,
            playing,
            colour: ColourMode::ByBody,
            paused: false,
            step_once: false,
            drag: None,
            cursor: PhysicalPosition::new(0.0, 0.0),
            egui_ctx,
            egui_state,
            egui_renderer,
            step_ms: VecDeque::new(),
            last_frame: Instant::now(),
            sim_debt: 0.0,
            behind: false,
            frames: 0,
            rates: RateMeter::default(),
            message: None,
            watcher: if remote.is_some() {
                None // the cache folder changes only through the remote watcher
            } else {
                pellet_formats::watch::FileWatcher::new(&scene_files(&scene)).ok()
            },
            remote,
            shaders,
        })
    }

    /// Hot reload after an edit: the new scene, with the running state
    /// carried over; a broken edit keeps the last good state and says why.
    fn hot_reload(&mut self, cache: Option<PathBuf>) {
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
    /// carried over, the kernels compiled from `sim_source` when given (else
    /// the current shaders).
    fn restart(
        &self,
        mut setup: SimSetup,
        sim_source: Option<&str>,
    ) -> Result<(SimSetup, Simulation, FrameRenderer), PlayerError> {
        if let (Ok(state), Ok(bodies)) = (self.playing.sim.snapshot(), self.playing.sim.bodies()) {
            setup.carry_state_from(&self.playing.setup, &state, &bodies);
        }
        let sim = match sim_source {
            Some(source) => Simulation::gpu_with_shader(self.gpu.clone(), &setup, source)?,
            None => self.shaders.simulation(&self.gpu, &setup)?,
        };
        let size = (self.config.width, self.config.height);
        let renderer = self
            .shaders
            .renderer(&sim, &setup, size, self.config.format)?;
        Ok((setup, sim, renderer))
    }

    /// Shader hot reload after an edit in the shader folder: each changed
    /// shader is validated and its pipelines rebuilt; on an error the old
    /// pipelines keep running and the error is shown.
    fn reload_shaders(&mut self) {
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
        if let Some(source) = read("sim.wgsl")
            && self.shaders.sim.as_ref() != Some(&source)
        {
            // The kernels are rebuilt with the running state carried over.
            let started = self.restart(self.playing.setup.clone(), Some(&source));
            match started {
                Ok((setup, sim, renderer)) => {
                    tracing::info!("shader reloaded: sim.wgsl");
                    report.push("sim.wgsl reloaded".to_string());
                    self.shaders.sim = Some(source);
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

    fn resize(&mut self, width: u32, height: u32) {
        if width == 0 || height == 0 {
            return;
        }
        self.config.width = width;
        self.config.height = height;
        self.surface.configure(&self.gpu.device, &self.config);
        if let Ok(r) = self.shaders.renderer(
            &self.playing.sim,
            &self.playing.setup,
            (width, height),
            self.config.format,
        ) {
            self.playing.renderer = r;
        }
    }

    fn switch_to(&mut self, path: PathBuf, cache: Option<PathBuf>) {
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

    fn apply_live(&mut self) {
        let live = self.playing.live;
        let mut params = self.playing.setup.params();
        params.gravity = live.gravity;
        params.dt = live.dt as f32;
        let pairs = live.pairs(&self.playing.setup.pairs);
        if let crate::sim::Engine::Gpu(g) = self.playing.sim.engine_mut() {
            g.update_parameters(&params, &pairs);
        }
    }

    /// Steps to keep up with real time, within a budget per frame.
    fn simulate(&mut self) -> Result<(), PlayerError> {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last_frame).as_secs_f64();
        self.last_frame = now;
        self.rates.record(now, self.playing.sim.steps());
        let real = elapsed.min(0.1);
        let dt = self.playing.live.dt;
        let mut steps = 0u64;
        if self.step_once {
            steps = 1;
            self.step_once = false;
        } else if !self.paused {
            self.sim_debt += real;
            let wanted = (self.sim_debt / dt).floor() as u64;
            steps = wanted.min(u64::from(self.playing.live.max_substeps));
            self.behind = wanted > steps;
            if self.behind {
                self.sim_debt = 0.0;
            } else {
                self.sim_debt -= steps as f64 * dt;
            }
        }
        if steps > 0 {
            let t = Instant::now();
            self.playing.sim.advance(steps as u32)?;
            let stats = self.playing.sim.stats()?;
            let ms = t.elapsed().as_secs_f32() * 1e3 / steps as f32;
            self.step_ms.push_back(ms);
            while self.step_ms.len() > 300 {
                self.step_ms.pop_front();
            }
            self.playing.stats = Some(stats);
        }
        Ok(())
    }

    fn panel(&mut self, root: &mut egui::Ui) -> (bool, Option<PathBuf>, bool) {
        let mut changed = false;
        let mut switch = None;
        let mut reset = false;
        egui::Panel::left("pellet")
            .resizable(false)
            .show(root, |ui| {
                ui.heading("Pellet");
                egui::ComboBox::from_label("scene")
                    .selected_text(self.playing.setup.name.clone())
                    .show_ui(ui, |ui| {
                        for p in &self.siblings {
                            let name = p
                                .file_stem()
                                .map(|s| s.to_string_lossy().into_owned())
                                .unwrap_or_default();
                            if ui.selectable_label(*p == self.playing.path, name).clicked() {
                                switch = Some(p.clone());
                            }
                        }
                    });
                ui.horizontal(|ui| {
                    if ui
                        .button(if self.paused { "play" } else { "pause" })
                        .clicked()
                    {
                        self.paused = !self.paused;
                    }
                    if ui.button("step").clicked() {
                        self.step_once = true;
                    }
                    if ui.button("reset").clicked() {
                        reset = true;
                    }
                });
                ui.separator();
                let live = &mut self.playing.live;
                ui.label("gravity y (m/s²)");
                changed |= ui
                    .add(egui::Slider::new(&mut live.gravity[1], -30.0..=30.0))
                    .changed();
                ui.label("stiffness (x scene)");
                changed |= ui
                    .add(egui::Slider::new(&mut live.stiffness_scale, 0.1..=4.0).logarithmic(true))
                    .changed();
                ui.label("restitution");
                changed |= ui
                    .add(egui::Slider::new(&mut live.restitution, 0.01..=1.0))
                    .changed();
                ui.label("friction");
                changed |= ui
                    .add(egui::Slider::new(&mut live.friction, 0.0..=1.5))
                    .changed();
                ui.label("time step (s)");
                changed |= ui
                    .add(egui::Slider::new(&mut live.dt, 1e-6..=1e-3).logarithmic(true))
                    .changed();
                ui.label("most substeps per frame");
                ui.add(egui::Slider::new(&mut live.max_substeps, 1..=2000));
                ui.separator();
                let mut speed = self.colour == ColourMode::BySpeed;
                if ui.checkbox(&mut speed, "colour by speed").changed() {
                    self.colour = if speed {
                        ColourMode::BySpeed
                    } else {
                        ColourMode::ByBody
                    };
                }
                ui.separator();
                let (fps, steps_per_s) = self.rates.rates();
                ui.label(format!(
                    "{} fps, {} steps/s ({:.3}x real time)",
                    rate_text(fps),
                    rate_text(steps_per_s),
                    steps_per_s * self.playing.live.dt
                ))
                .on_hover_text(format!(
                    "measured over the last {:.1} s of wall-clock time",
                    self.rates.span_s()
                ));
                let mean = if self.step_ms.is_empty() {
                    0.0
                } else {
                    self.step_ms.iter().sum::<f32>() / self.step_ms.len() as f32
                };
                ui.label(format!("{mean:.2} ms per step"));
                ui.label(format!(
                    "{} particles, {} bodies",
                    self.playing.setup.particles.len(),
                    self.playing.setup.bodies.len()
                ));
                if let Some(s) = &self.playing.stats {
                    ui.label(format!("t = {:.3} s, step {}", s.time, s.step));
                    ui.label(format!(
                        "{} contacts, {} on walls",
                        s.contacts, s.wall_contacts
                    ));
                    ui.label(format!("max {} per cell", s.max_cell_occupancy));
                    ui.label(format!("{} contact-slot overflows", s.slot_overflows));
                }
                if self.behind {
                    ui.colored_label(egui::Color32::from_rgb(200, 80, 0), "slower than real time");
                }
                if let Some(m) = &self.message {
                    ui.colored_label(egui::Color32::RED, m);
                }
                // Step time over the last frames.
                let (rect, _) =
                    ui.allocate_exact_size(egui::vec2(200.0, 60.0), egui::Sense::hover());
                let painter = ui.painter_at(rect);
                painter.rect_filled(rect, 2.0, egui::Color32::from_gray(235));
                let top = self.step_ms.iter().copied().fold(1e-3f32, f32::max);
                let n = self.step_ms.len().max(2);
                let points: Vec<egui::Pos2> = self
                    .step_ms
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| {
                        egui::pos2(
                            rect.left() + rect.width() * k as f32 / (n - 1) as f32,
                            rect.bottom() - rect.height() * v / top,
                        )
                    })
                    .collect();
                painter.add(egui::Shape::line(
                    points,
                    egui::Stroke::new(1.5, egui::Color32::from_rgb(40, 90, 200)),
                ));
                ui.label(format!("step time, max {top:.2} ms"));
            });
        (changed, switch, reset)
    }

    fn redraw(&mut self, options: &ViewerOptions) -> Result<bool, PlayerError> {
        if self.watcher.as_mut().is_some_and(|w| w.changed()) {
            self.hot_reload(options.cache_dir.clone());
        }
        match self.remote.as_mut().and_then(|r| r.changed()) {
            Some(Ok(_)) => self.hot_reload(options.cache_dir.clone()),
            Some(Err(e)) => {
                tracing::error!("remote reload failed, keeping the last good state: {e}");
                self.message = Some(format!(
                    "remote reload failed (keeping the last good state): {e}"
                ));
            }
            None => {}
        }
        if self.shaders.watcher.as_mut().is_some_and(|w| w.changed()) {
            self.reload_shaders();
        }
        self.simulate()?;
        let raw = self.egui_state.take_egui_input(&self.window);
        let ctx = self.egui_ctx.clone();
        let mut decisions = (false, None, false);
        let mut output = ctx.run_ui(raw, |ui| decisions = self.panel(ui));
        // Upload egui's texture changes now, whether or not this frame is drawn.
        for (id, deltas) in &output.textures_delta.set {
            for delta in deltas.iter() {
                self.egui_renderer
                    .update_texture(&self.gpu.device, &self.gpu.queue, *id, delta);
            }
        }
        let freed = std::mem::take(&mut output.textures_delta.free);
        output.textures_delta.clear();
        let (changed, switch, reset) = decisions;
        if changed {
            self.apply_live();
        }
        if let Some(p) = switch {
            self.switch_to(p, options.cache_dir.clone());
        }
        if reset {
            let p = self.playing.path.clone();
            self.switch_to(p, options.cache_dir.clone());
        }
        self.egui_state
            .handle_platform_output(&self.window, output.platform_output);
        let frame = match self.surface.get_current_texture() {
            wgpu::CurrentSurfaceTexture::Success(f)
            | wgpu::CurrentSurfaceTexture::Suboptimal(f) => f,
            _ => {
                for id in &freed {
                    self.egui_renderer.free_texture(id);
                }
                self.surface.configure(&self.gpu.device, &self.config);
                return Ok(false);
            }
        };
        let view = frame.texture.create_view(&Default::default());
        let device = &self.gpu.device;
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("viewer/frame"),
        });
        self.playing
            .renderer
            .encode(&mut enc, Some(&view), &self.camera, self.colour, 2.0);
        let screen = egui_wgpu::ScreenDescriptor {
            size_in_pixels: [self.config.width, self.config.height],
            pixels_per_point: self.window.scale_factor() as f32,
        };
        let jobs = ctx.tessellate(output.shapes, output.pixels_per_point);
        let extra =
            self.egui_renderer
                .update_buffers(device, &self.gpu.queue, &mut enc, &jobs, &screen);
        {
            let pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("viewer/egui"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Load,
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            let mut pass = pass.forget_lifetime();
            self.egui_renderer.render(&mut pass, &jobs, &screen);
        }
        for id in &freed {
            self.egui_renderer.free_texture(id);
        }
        self.frames += 1;
        let last = options.exit_after.is_some_and(|n| self.frames >= n);
        let mut staging = None;
        if last && let Some(path) = &options.screenshot {
            staging = Some((self.copy_out(&mut enc, &frame.texture), path.clone()));
        }
        self.gpu
            .queue
            .submit(extra.into_iter().chain([enc.finish()]));
        if let Some(((buffer, row), path)) = staging {
            self.save_screenshot(&buffer, row, &path)?;
        }
        self.window.pre_present_notify();
        self.gpu.queue.present(frame);
        Ok(last)
    }

    fn copy_out(
        &self,
        enc: &mut wgpu::CommandEncoder,
        texture: &wgpu::Texture,
    ) -> (wgpu::Buffer, u32) {
        let (w, h) = (self.config.width, self.config.height);
        let row = (w * 4).div_ceil(256) * 256;
        let buffer = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("viewer/screenshot"),
            size: u64::from(row) * u64::from(h),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if self.config.usage.contains(wgpu::TextureUsages::COPY_SRC) {
            enc.copy_texture_to_buffer(
                texture.as_image_copy(),
                wgpu::TexelCopyBufferInfo {
                    buffer: &buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(row),
                        rows_per_image: Some(h),
                    },
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: 1,
                },
            );
        }
        (buffer, row)
    }

    fn save_screenshot(
        &self,
        buffer: &wgpu::Buffer,
        row: u32,
        path: &Path,
    ) -> Result<(), PlayerError> {
        let fail = |e: &dyn std::fmt::Display| PlayerError::Screenshot {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        if !self.config.usage.contains(wgpu::TextureUsages::COPY_SRC) {
            return Err(PlayerError::Screenshot {
                path: path.to_path_buf(),
                message: "this window surface cannot be read back".into(),
            });
        }
        let slice = buffer.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| fail(&e))?;
        rx.recv().map_err(|e| fail(&e))?.map_err(|e| fail(&e))?;
        let data = slice.get_mapped_range().map_err(|e| fail(&e))?;
        let (w, h) = (self.config.width, self.config.height);
        let bgra = matches!(
            self.config.format,
            wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb
        );
        let mut pixels = Vec::with_capacity((w * h * 4) as usize);
        for y in 0..h as usize {
            for px in data[y * row as usize..y * row as usize + w as usize * 4].chunks_exact(4) {
                if bgra {
                    pixels.extend_from_slice(&[px[2], px[1], px[0], 255]);
                } else {
                    pixels.extend_from_slice(&[px[0], px[1], px[2], 255]);
                }
            }
        }
        drop(data);
        buffer.unmap();
        let img = image::RgbaImage::from_raw(w, h, pixels).ok_or_else(|| fail(&"size"))?;
        img.save(path).map_err(|e| fail(&e))
    }

    fn input(&mut self, event: &WindowEvent, cache: Option<PathBuf>) {
        match event {
            WindowEvent::MouseInput { state, button, .. } => {
                self.drag = (*state == ElementState::Pressed).then_some(*button);
            }
            WindowEvent::CursorMoved { position, .. } => {
                let (dx, dy) = (position.x - self.cursor.x, position.y - self.cursor.y);
                self.cursor = *position;
                let h = self.config.height.max(1) as f32;
                match self.drag {
                    Some(MouseButton::Left) => {
                        self.camera.orbit(-dx as f32 * 0.008, dy as f32 * 0.008)
                    }
                    Some(MouseButton::Right) => self.camera.pan(dx as f32 / h, dy as f32 / h),
                    _ => {}
                }
            }
            WindowEvent::MouseWheel { delta, .. } => {
                let lines = match delta {
                    MouseScrollDelta::LineDelta(_, y) => *y,
                    MouseScrollDelta::PixelDelta(p) => p.y as f32 / 40.0,
                };
                self.camera.zoom(0.9f32.powf(lines));
            }
            WindowEvent::KeyboardInput { event, .. } if event.state == ElementState::Pressed => {
                match &event.logical_key {
                    Key::Named(NamedKey::Space) => self.paused = !self.paused,
                    Key::Character(c) => match c.as_str() {
                        "." => self.step_once = true,
                        "r" | "R" => {
                            let p = self.playing.path.clone();
                            self.switch_to(p, cache);
                        }
                        "f" | "F" => {
                            let (min, max) = frame_box(&self.playing.setup);
                            let pos = self
                                .playing
                                .sim
                                .host_state()
                                .map(|s| s.pos)
                                .unwrap_or_default();
                            self.camera = Camera::frame_particles(&pos, min, max);
                        }
                        "c" | "C" => {
                            self.colour = match self.colour {
                                ColourMode::ByBody => ColourMode::BySpeed,
                                ColourMode::BySpeed => ColourMode::ByBody,
                            }
                        }
                        d => {
                            if let Ok(k) = d.parse::<usize>()
                                && (1..=9).contains(&k)
                                && let Some(p) = self.siblings.get(k - 1).cloned()
                            {
                                self.switch_to(p, cache);
                            }
                        }
                    },
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.state.is_some() {
            return;
        }
        match WindowState::new(event_loop, &self.options) {
            Ok(s) => self.state = Some(s),
            Err(e) => {
                self.error = Some(e);
                event_loop.exit();
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        let Some(state) = &mut self.state else {
            return;
        };
        let consumed = state
            .egui_state
            .on_window_event(&state.window, &event)
            .consumed;
        match &event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::Resized(size) => state.resize(size.width, size.height),
            WindowEvent::RedrawRequested => match state.redraw(&self.options) {
                Ok(true) => event_loop.exit(),
                Ok(false) => {}
                Err(e) => {
                    self.error = Some(e);
                    event_loop.exit();
                }
            },
            _ if !consumed => state.input(&event, self.options.cache_dir.clone()),
            _ => {}
        }
    }

    fn about_to_wait(&mut self, _event_loop: &ActiveEventLoop) {
        if let Some(state) = &self.state {
            state.window.request_redraw();
        }
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rates_are_measured_over_wall_clock_time() {
        // 15 frames that took 48 s in all show as 0.3 fps, not as the
        // rate of the first fast frames.
        let start = Instant::now();
        let mut meter = RateMeter::default();
        let mut at = start;
        for k in 0..15u64 {
            meter.record(at, k * 10);
            at += if k < 3 {
                Duration::from_millis(10)
            } else {
                Duration::from_secs(4)
            };
        }
        let (fps, steps) = meter.rates();
        // Slow frames: the window keeps the last two (4 s apart).
        assert!((fps - 0.25).abs() < 1e-6, "{fps}");
        assert!((steps - 2.5).abs() < 1e-6, "{steps}");
        // Steady 60 fps over more than the window: about 60.
        let mut meter = RateMeter::default();
        for k in 0..300u64 {
            meter.record(start + Duration::from_micros(16_667 * k), k);
        }
        let (fps, steps) = meter.rates();
        assert!((fps - 60.0).abs() < 0.5, "{fps}");
        assert!((steps - 60.0).abs() < 0.5, "{steps}");
        assert!(meter.span_s() <= RateMeter::WINDOW_S + 0.02);
    }
}
