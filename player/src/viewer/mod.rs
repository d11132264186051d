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
use crate::sim::stages::{SimShaders, shader_files};
use crate::sim::{GridMode, SimError, Simulation, StepStats};

mod input;
mod panel;
mod rates;
mod reload;
mod screenshot;
mod shaders;

use rates::{RateMeter, rate_text};
use shaders::Shaders;

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
    /// Shader hot reload: a folder whose simulation stage shaders
    /// (`common.wgsl`, `sort.wgsl`, ...) and `spheres.wgsl` (any may be
    /// missing) replace the built-in shaders and are watched.
    pub shaders: Option<PathBuf>,
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
    /// Hertz-Mindlin materials (the scale is then on the moduli).
    hertz: bool,
    /// Whether the scene has rolling resistance (its law is fixed at the start).
    rolling: bool,
    /// Coefficient of rolling friction.
    rolling_friction: f32,
    /// Poisson's ratio of every material (Hertz-Mindlin scenes).
    poisson: f32,
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
        let hertz = s.contact_model == crate::sim::stages::common::HERTZ;
        let restitution = crate::sim::setup::restitution_of(&p, hertz);
        Self {
            hertz,
            rolling: s.rolling_model != crate::sim::stages::common::ROLL_NONE,
            rolling_friction: p.mu_roll,
            poisson: s
                .materials
                .first()
                .and_then(|m| m.poisson_ratio)
                .unwrap_or(pellet_formats::scene::Material::DEFAULT_POISSON_RATIO),
            gravity: s.gravity,
            stiffness_scale: 1.0,
            restitution,
            friction: p.mu,
            dt: s.dt,
            max_substeps: 200,
        }
    }

    /// The setup's pairs with these parameters applied. Hertz-Mindlin
    /// pairs are remixed from the materials, their moduli scaled and their
    /// Poisson's ratios set to the panel's.
    fn pairs(&self, setup: &SimSetup) -> Vec<PairParams> {
        let base = &setup.pairs;
        let r2 = (crate::sim::setup::damping_factor(self.hertz)
            * damping_ratio(f64::from(self.restitution))) as f32;
        let m = setup.materials.len();
        let hertz_stiffness = |k: usize| -> Option<(f32, f32)> {
            if !self.hertz || m * m != base.len() {
                return None;
            }
            let live = |mat: &pellet_formats::scene::Material| {
                let mut mat = mat.clone();
                mat.youngs_modulus = mat.youngs_modulus.map(|e| e * self.stiffness_scale);
                mat.poisson_ratio = Some(self.poisson);
                mat
            };
            let (y, g) = crate::sim::setup::hertz_moduli(
                &live(&setup.materials[k / m]),
                &live(&setup.materials[k % m]),
            );
            Some(((4.0 / 3.0 * y) as f32, (8.0 * g) as f32))
        };
        base.iter()
            .enumerate()
            .map(|(k, p)| PairParams {
                kn: hertz_stiffness(k).map_or(p.kn * self.stiffness_scale, |s| s.0),
                kt: hertz_stiffness(k).map_or(p.kt * self.stiffness_scale, |s| s.1),
                mu: self.friction,
                mu_roll: if self.rolling {
                    self.rolling_friction
                } else {
                    0.0
                },
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
        // Watching before "viewer ready": an edit made as soon as the line
        // is out is seen (the window tests edit the scene right after it).
        let watcher = if remote.is_some() {
            None // the cache folder changes only through the remote watcher
        } else {
            pellet_formats::watch::FileWatcher::new(&scene_files(&scene)).ok()
        };
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
            watcher,
            remote,
            shaders,
        })
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

    fn apply_live(&mut self) {
        let live = self.playing.live;
        let mut params = self.playing.setup.params();
        params.gravity = live.gravity;
        params.dt = live.dt as f32;
        let pairs = live.pairs(&self.playing.setup);
        match self.playing.sim.engine_mut() {
            crate::sim::Engine::Gpu(g) => g.update_parameters(&params, &pairs),
            crate::sim::Engine::Cpu(c) => c.update_parameters(&params, &pairs),
            crate::sim::Engine::Ranked(r) => r.sim.update_parameters(&params, &pairs),
            crate::sim::Engine::Blocks(b) => b.host.update_parameters(&params, &pairs),
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
        if let Some(gs) = self.playing.sim.gpu_sim() {
            self.playing.renderer.follow(gs);
        }
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn hertz_setup() -> SimSetup {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.toml");
        std::fs::write(
            &path,
            "name = \"h\"\n[domain]\nmin = [0, 0, 0]\nmax = [0.2, 0.2, 0.2]\n\
             [materials.default]\nmodel = \"hertz\"\nyoungs_modulus = 1e7\npoisson_ratio = 0.3\n\
             [materials.soft]\nmodel = \"hertz\"\nyoungs_modulus = 2e6\npoisson_ratio = 0.3\n\
             [[particles]]\nregion = { min = [0, 0, 0], max = [0.1, 0.1, 0.1] }\nspacing = 0.05\nradius = 0.01\n",
        )
        .unwrap();
        let scene = pellet_formats::Scene::load(&path).unwrap();
        SimSetup::from_scene(&scene, dir.path(), crate::sim::SimOptions::default()).unwrap()
    }

    /// The live controls of a Hertz scene: untouched, they give the scene's
    /// pairs; the modulus scale scales both stiffnesses; Poisson's ratio
    /// remixes the moduli (`E* ~ 1/(1 - nu^2)`).
    #[test]
    fn live_hertz_controls_remix_the_moduli() {
        let s = hertz_setup();
        let mut live = Live::from_setup(&s);
        assert!(live.hertz);
        assert_eq!(live.poisson, 0.3);
        let same = live.pairs(&s);
        for (a, b) in same.iter().zip(&s.pairs) {
            assert!((a.kn - b.kn).abs() <= 1e-6 * b.kn && (a.kt - b.kt).abs() <= 1e-6 * b.kt);
        }
        live.stiffness_scale = 2.0;
        let doubled = live.pairs(&s);
        assert!((doubled[0].kn - 2.0 * s.pairs[0].kn).abs() <= 1e-5 * s.pairs[0].kn);
        live.stiffness_scale = 1.0;
        live.poisson = 0.0;
        let remixed = live.pairs(&s);
        let ratio = remixed[0].kn / s.pairs[0].kn;
        assert!((ratio - (1.0 - 0.09)).abs() < 1e-5, "{ratio}");
    }
}
