//! The page: a canvas the scene is drawn into, the camera on mouse and
//! touch, a panel, the status line, and a stepping loop that never blocks
//! (each animation frame finishes the batch in flight if the GPU is done
//! with it, begins the next, and draws).
//!
//! Query parameters: `scene=URL` (default `scene/`, the folder beside the
//! page), `steps=N` steps per frame (default 10), `stop=N` pause at step N
//! exactly, `paused` start paused.
//!
//! Test hooks (on the module `index.html` puts on `window.pellet`):
//! `status()` the JSON status, `positions()` a promise of every particle's
//! position and radius in id order (x, y, z, r per particle).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use js_sys::{Float32Array, Promise};
use pellet_gpu::readback::PendingRead;
use pellet_gpu::{Gpu, wgpu};
use pellet_render::{Camera, ColourMode, FrameRenderer};
use pellet_sim::gpu::{GpuSim, SimBuffer};
use pellet_sim::stages::common::Params;
use pellet_sim::{Counter, SimSetup};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{HtmlCanvasElement, HtmlElement, HtmlInputElement, Response};

use crate::load::{Fetch, load_baked};
use crate::status::Status;

/// The page's `fetch`.
struct PageFetch;

fn js_text(v: &JsValue) -> String {
    v.as_string()
        .or_else(|| {
            v.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| format!("{v:?}"))
}

impl Fetch for PageFetch {
    async fn get(&self, url: &str, limit: u64) -> Result<Vec<u8>, String> {
        let window = web_sys::window().ok_or("no window")?;
        let response: Response = JsFuture::from(window.fetch_with_str(url))
            .await
            .map_err(|e| js_text(&e))?
            .dyn_into()
            .map_err(|e| js_text(&e))?;
        if !response.ok() {
            return Err(format!(
                "HTTP {} {}",
                response.status(),
                response.status_text()
            ));
        }
        if let Ok(Some(length)) = response.headers().get("content-length")
            && length.trim().parse::<u64>().is_ok_and(|n| n > limit)
        {
            return Err(format!("{length} bytes, more than the limit of {limit}"));
        }
        let body = JsFuture::from(response.array_buffer().map_err(|e| js_text(&e))?)
            .await
            .map_err(|e| js_text(&e))?;
        let bytes = js_sys::Uint8Array::new(&body);
        if u64::from(bytes.length()) > limit {
            return Err(format!(
                "{} bytes, more than the limit of {limit}",
                bytes.length()
            ));
        }
        Ok(bytes.to_vec())
    }
}

/// The query parameters.
struct Query {
    scene: String,
    steps: u32,
    stop: Option<u64>,
    paused: bool,
}

fn query() -> Query {
    let params = web_sys::window()
        .and_then(|w| w.location().search().ok())
        .and_then(|s| web_sys::UrlSearchParams::new_with_str(&s).ok());
    let get = |k: &str| params.as_ref().and_then(|p| p.get(k));
    Query {
        scene: get("scene").unwrap_or_else(|| "scene/".to_owned()),
        steps: get("steps")
            .and_then(|s| s.parse().ok())
            .unwrap_or(10)
            .clamp(1, 1000),
        stop: get("stop").and_then(|s| s.parse().ok()),
        paused: get("paused").is_some(),
    }
}

fn document() -> Option<web_sys::Document> {
    web_sys::window()?.document()
}

fn element<T: JsCast>(id: &str) -> Option<T> {
    document()?.get_element_by_id(id)?.dyn_into().ok()
}

/// Writes the status into `<pre id="status">`.
fn show(status: &Status) {
    if let Some(pre) = element::<HtmlElement>("status") {
        pre.set_text_content(Some(&status.text()));
    }
}

/// The page's state once the scene plays.
struct App {
    /// Kept for the page's life (the surface and device came from it).
    _instance: wgpu::Instance,
    gpu: Arc<Gpu>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    view_format: wgpu::TextureFormat,
    setup: SimSetup,
    sim: GpuSim,
    renderer: FrameRenderer,
    camera: Camera,
    status: Status,
    steps_per_frame: u32,
    stop: Option<u64>,
    /// When the batch in flight began (ms) and its steps.
    batch: Option<(f64, u32)>,
    /// Pointer position at the last move, and whether it pans.
    drag: Option<(f64, f64, bool)>,
    /// Distance between two touches at the last move.
    pinch: Option<f64>,
    /// `positions()` promises waiting, and the readback serving them.
    position_requests: Vec<js_sys::Function>,
    positions_read: Option<PendingRead>,
}

thread_local! {
    static APP: RefCell<Option<Rc<RefCell<App>>>> = const { RefCell::new(None) };
    static STATUS: RefCell<Status> = RefCell::new(Status::default());
}

fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

impl App {
    /// One animation frame: finish the batch in flight if the GPU is done,
    /// begin the next while playing, serve position requests, draw.
    fn frame(&mut self) -> Result<(), String> {
        if let Some(counters) = self.sim.poll_batch().map_err(|e| e.to_string())? {
            if counters[Counter::NanStep as usize] != u32::MAX {
                return Err(format!(
                    "particle {} became non-finite at step {}",
                    counters[Counter::NanId as usize],
                    u64::from(counters[Counter::NanStep as usize]) + 1
                ));
            }
            // Wall time from submitting a batch to seeing it finished, per
            // step (the priming evaluation has none).
            if let Some((began, steps)) = self.batch.take()
                && steps > 0
            {
                self.status.ms_per_step = (now_ms() - began) / f64::from(steps);
            }
            self.status.step = u64::from(self.sim.steps());
            if self.stop.is_some_and(|s| self.status.step >= s) {
                self.status.playing = false;
            }
        }
        if self.batch.is_none() {
            self.serve_positions()?;
        }
        if self.batch.is_none() && self.positions_read.is_none() && self.status.playing {
            let mut steps = self.steps_per_frame;
            if let Some(stop) = self.stop {
                steps = steps.min(stop.saturating_sub(self.status.step) as u32);
            }
            if steps > 0 {
                self.sim.begin_batch(steps).map_err(|e| e.to_string())?;
                self.batch = Some((now_ms(), steps));
            } else {
                self.status.playing = false;
            }
        }
        self.draw()?;
        Ok(())
    }

    /// Reads positions back for the waiting `positions()` promises.
    fn serve_positions(&mut self) -> Result<(), String> {
        if let Some(read) = &self.positions_read {
            let Some(bytes) = read.try_take(&self.gpu.device) else {
                return Ok(());
            };
            self.positions_read = None;
            let bytes = bytes.map_err(|e| e.to_string())?;
            let n = self.setup.particles.len();
            let (pos, meta) = bytes.split_at(n * 16);
            let pos: Vec<[f32; 4]> = bytemuck::pod_collect_to_vec(pos);
            let meta: Vec<[u32; 4]> = bytemuck::pod_collect_to_vec(&meta[..n * 16]);
            let mut by_id = vec![0.0f32; n * 4];
            for (p, m) in pos.iter().zip(&meta) {
                let id = m[0] as usize;
                if id < n {
                    by_id[id * 4..id * 4 + 4].copy_from_slice(p);
                }
            }
            let array = Float32Array::from(&by_id[..]);
            for resolve in self.position_requests.drain(..) {
                let _ = resolve.call1(&JsValue::NULL, &array);
            }
            return Ok(());
        }
        if !self.position_requests.is_empty() {
            let n = self.setup.particles.len() as u64;
            let pos = self.sim.buffer(SimBuffer::Positions);
            let meta = self.sim.buffer(SimBuffer::Info);
            self.positions_read = Some(PendingRead::start(
                &self.gpu.device,
                &self.gpu.queue,
                &[
                    (&pos.buffer, pos.offset, n * 16),
                    (&meta.buffer, meta.offset, n * 16),
                ],
            ));
        }
        Ok(())
    }

    fn draw(&mut self) -> Result<(), String> {
        let frame = match self.surface.get_current_texture() {
            wgpu::CurrentSurfaceTexture::Success(f)
            | wgpu::CurrentSurfaceTexture::Suboptimal(f) => f,
            _ => {
                self.surface.configure(&self.gpu.device, &self.config);
                return Ok(());
            }
        };
        let view = frame.texture.create_view(&wgpu::TextureViewDescriptor {
            format: Some(self.view_format),
            ..Default::default()
        });
        let mut enc = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("web/frame"),
            });
        self.renderer.follow(&self.sim);
        self.renderer.encode(
            &mut enc,
            Some(&view),
            &self.camera,
            ColourMode::BySpeed,
            2.0,
        );
        self.gpu.queue.submit([enc.finish()]);
        self.gpu.queue.present(frame);
        Ok(())
    }
}

/// What each animation frame calls.
type FrameCallback = Closure<dyn FnMut(f64)>;

/// Requests the next animation frame for `f`.
fn next_frame(f: &Closure<dyn FnMut(f64)>) {
    if let Some(w) = web_sys::window() {
        let _ = w.request_animation_frame(f.as_ref().unchecked_ref());
    }
}

fn fail(message: &str) {
    STATUS.with(|s| {
        let mut s = s.borrow_mut();
        s.fail(message);
        show(&s);
    });
    APP.with(|a| {
        if let Some(app) = a.borrow().as_ref()
            && let Ok(mut app) = app.try_borrow_mut()
        {
            app.status.fail(message);
        }
    });
}

/// The page's entry point.
#[wasm_bindgen(start)]
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        let text = format!("panic: {info}");
        web_sys::console::error_1(&JsValue::from_str(&text));
        fail(&text);
    }));
    wasm_bindgen_futures::spawn_local(async {
        if let Err(e) = run().await {
            fail(&e);
        }
    });
}

async fn run() -> Result<(), String> {
    let q = query();
    STATUS.with(|s| {
        let mut s = s.borrow_mut();
        s.scene = q.scene.clone();
        show(&s);
    });
    let window = web_sys::window().ok_or("no window")?;
    let gpu_api = js_sys::Reflect::get(&window.navigator(), &JsValue::from_str("gpu"))
        .unwrap_or(JsValue::UNDEFINED);
    if gpu_api.is_undefined() {
        return Err(
            "this browser has no WebGPU (try a recent Chrome, Edge or Firefox, or enable WebGPU)"
                .into(),
        );
    }
    let loaded = load_baked(&PageFetch, &q.scene)
        .await
        .map_err(|e| e.to_string())?;
    let canvas: HtmlCanvasElement = element("canvas").ok_or("the page has no canvas")?;
    let ratio = window.device_pixel_ratio().max(1.0);
    let width = ((f64::from(canvas.client_width().max(1)) * ratio) as u32).clamp(64, 2048);
    let height = ((f64::from(canvas.client_height().max(1)) * ratio) as u32).clamp(64, 2048);
    canvas.set_width(width);
    canvas.set_height(height);

    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::BROWSER_WEBGPU;
    let instance = wgpu::Instance::new(desc);
    let surface = instance
        .create_surface(wgpu::SurfaceTarget::Canvas(canvas.clone()))
        .map_err(|e| format!("cannot draw into the canvas: {e}"))?;
    let mut adapter = None;
    for fallback in [false, true] {
        if let Ok(a) = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                compatible_surface: Some(&surface),
                force_fallback_adapter: fallback,
                apply_limit_buckets: false,
            })
            .await
        {
            adapter = Some(a);
            break;
        }
    }
    let adapter = adapter.ok_or("no WebGPU adapter")?;
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("pellet-web"),
            required_limits: adapter.limits(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot open the GPU: {e}"))?;
    // Errors nothing else catches, and a lost device, go to the console
    // and the status line rather than vanishing.
    device.on_uncaptured_error(Arc::new(|e: wgpu::Error| {
        let text = e.to_string();
        web_sys::console::error_1(&JsValue::from_str(&text));
        fail(&format!("WebGPU: {text}"));
    }));
    device.set_device_lost_callback(|reason, message| {
        let text = format!("the GPU device was lost ({reason:?}): {message}");
        web_sys::console::error_1(&JsValue::from_str(&text));
        fail(&text);
    });
    // The simulation and renderer share the GPU through an `Arc` on every
    // target; the page has one thread.
    #[allow(clippy::arc_with_non_send_sync)]
    let gpu = Arc::new(Gpu::from_parts(adapter, device, queue));
    let mut config = surface
        .get_default_config(&gpu.adapter, width, height)
        .ok_or("the canvas is not supported by this adapter")?;
    // The browser's preferred canvas format (BGRA on most): others may have
    // no shared-image path to the page (headless Chromium loses the device).
    let caps = surface.get_capabilities(&gpu.adapter);
    if let Some(f) = caps
        .formats
        .iter()
        .find(|f| **f == wgpu::TextureFormat::Bgra8Unorm)
    {
        config.format = *f;
    }
    // Colours are written linear: draw through an sRGB view of the canvas.
    let view_format = config.format.add_srgb_suffix();
    if view_format != config.format {
        config.view_formats.push(view_format);
    }
    surface.configure(&gpu.device, &config);

    let setup = loaded.setup;
    let sim = GpuSim::new_async(gpu.clone(), &setup)
        .await
        .map_err(|e| e.to_string())?;
    let renderer = FrameRenderer::with_format(&sim, &setup, width, height, view_format)
        .map_err(|e| e.to_string())?;
    let min = setup.grid.origin;
    let max: [f32; 3] =
        std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
    let camera = Camera::frame_particles(&setup.particles.pos, min, max);
    let mut status = STATUS.with(|s| s.borrow().clone());
    status.particles = setup.particles.len() as u64;
    // Browsers describe adapters sparingly (often with nothing at all).
    status.adapter = match (gpu.report.name.as_str(), gpu.report.device_type.as_str()) {
        ("", "Cpu") => "WebGPU fallback adapter (CPU)".to_owned(),
        ("", _) => "WebGPU".to_owned(),
        (name, _) => format!("WebGPU: {name}"),
    };
    status.playing = !q.paused;
    let mut sim = sim;
    // The first evaluation, as `prime` does, without waiting.
    sim.begin_batch(0).map_err(|e| e.to_string())?;
    let app = Rc::new(RefCell::new(App {
        _instance: instance,
        gpu,
        surface,
        config,
        view_format,
        setup,
        sim,
        renderer,
        camera,
        status,
        steps_per_frame: q.steps,
        stop: q.stop,
        batch: Some((now_ms(), 0)),
        drag: None,
        pinch: None,
        position_requests: Vec::new(),
        positions_read: None,
    }));
    APP.with(|a| *a.borrow_mut() = Some(app.clone()));
    panel(&app, q.steps);
    input(&app, &canvas);

    let tick: Rc<RefCell<Option<FrameCallback>>> = Rc::new(RefCell::new(None));
    let again = tick.clone();
    *tick.borrow_mut() = Some(Closure::new(move |_t: f64| {
        let result = app.borrow_mut().frame();
        let status = app.borrow().status.clone();
        match result {
            Ok(()) => {
                STATUS.with(|s| *s.borrow_mut() = status.clone());
                show(&status);
                if let Some(f) = again.borrow().as_ref() {
                    next_frame(f);
                }
            }
            Err(e) => {
                STATUS.with(|s| *s.borrow_mut() = status);
                fail(&e);
            }
        }
    }));
    if let Some(f) = tick.borrow().as_ref() {
        next_frame(f);
    }
    Ok(())
}

/// Wires the panel: play/pause, steps per frame, gravity, time step.
fn panel(app: &Rc<RefCell<App>>, steps: u32) {
    let listen = |id: &str, event: &str, f: Box<dyn FnMut(web_sys::Event)>| {
        if let Some(el) = element::<HtmlElement>(id) {
            let c = Closure::<dyn FnMut(web_sys::Event)>::wrap(f);
            let _ = el.add_event_listener_with_callback(event, c.as_ref().unchecked_ref());
            c.forget();
        }
    };
    let a = app.clone();
    listen(
        "play",
        "click",
        Box::new(move |_| {
            let mut app = a.borrow_mut();
            app.status.playing = !app.status.playing;
            if app.status.playing && app.stop.is_some_and(|s| app.status.step >= s) {
                app.stop = None;
            }
        }),
    );
    if let Some(input) = element::<HtmlInputElement>("steps") {
        input.set_value(&steps.to_string());
    }
    let a = app.clone();
    listen(
        "steps",
        "input",
        Box::new(move |_| {
            if let Some(v) =
                element::<HtmlInputElement>("steps").and_then(|i| i.value().parse().ok())
            {
                a.borrow_mut().steps_per_frame = v;
            }
        }),
    );
    // Live parameters: a slider's value applied to the simulation at once.
    let live = |id: &'static str, apply: fn(&mut Params, &SimSetup, f64)| {
        let a = app.clone();
        listen(
            id,
            "input",
            Box::new(move |_| {
                if let Some(v) =
                    element::<HtmlInputElement>(id).and_then(|i| i.value().parse().ok())
                {
                    let mut app = a.borrow_mut();
                    let mut params = app.sim.params;
                    apply(&mut params, &app.setup, v);
                    let pairs = app.setup.pairs.clone();
                    app.sim.update_parameters(&params, &pairs);
                }
            }),
        );
    };
    live("gravity", |p, _, g| p.gravity[1] = -g as f32);
    // A fraction of the scene's own (stable) time step: smaller is slower
    // and smoother, never larger.
    live("dt", |p, setup, k| {
        p.dt = (setup.dt * k.clamp(0.05, 1.0)) as f32;
    });
}

/// Orbit (drag), pan (right or shift drag, two fingers), zoom (wheel, pinch).
fn input(app: &Rc<RefCell<App>>, canvas: &HtmlCanvasElement) {
    let on = |event: &str, f: Box<dyn FnMut(web_sys::Event)>| {
        let c = Closure::<dyn FnMut(web_sys::Event)>::wrap(f);
        let _ = canvas.add_event_listener_with_callback(event, c.as_ref().unchecked_ref());
        c.forget();
    };
    let height = f64::from(canvas.client_height().max(1));
    let a = app.clone();
    on(
        "mousedown",
        Box::new(move |e| {
            if let Some(m) = e.dyn_ref::<web_sys::MouseEvent>() {
                let pan = m.button() == 2 || m.shift_key();
                a.borrow_mut().drag = Some((f64::from(m.client_x()), f64::from(m.client_y()), pan));
            }
        }),
    );
    let a = app.clone();
    on(
        "mousemove",
        Box::new(move |e| {
            let Some(m) = e.dyn_ref::<web_sys::MouseEvent>() else {
                return;
            };
            let mut app = a.borrow_mut();
            if let Some((x, y, pan)) = app.drag {
                let (nx, ny) = (f64::from(m.client_x()), f64::from(m.client_y()));
                let (dx, dy) = (nx - x, ny - y);
                if pan {
                    app.camera.pan((dx / height) as f32, (dy / height) as f32);
                } else {
                    app.camera.orbit(-dx as f32 * 0.008, dy as f32 * 0.008);
                }
                app.drag = Some((nx, ny, pan));
            }
        }),
    );
    for event in ["mouseup", "mouseleave"] {
        let a = app.clone();
        on(event, Box::new(move |_| a.borrow_mut().drag = None));
    }
    on("contextmenu", Box::new(|e| e.prevent_default()));
    let a = app.clone();
    on(
        "wheel",
        Box::new(move |e| {
            if let Some(w) = e.dyn_ref::<web_sys::WheelEvent>() {
                e.prevent_default();
                let lines = (w.delta_y() / 100.0) as f32;
                a.borrow_mut().camera.zoom(1.1f32.powf(lines));
            }
        }),
    );
    let touches = |e: &web_sys::Event| -> Vec<(f64, f64)> {
        e.dyn_ref::<web_sys::TouchEvent>()
            .map(|t| {
                let list = t.touches();
                (0..list.length())
                    .filter_map(|i| list.get(i))
                    .map(|p| (f64::from(p.client_x()), f64::from(p.client_y())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let a = app.clone();
    on(
        "touchstart",
        Box::new(move |e| {
            e.prevent_default();
            let t = touches(&e);
            let mut app = a.borrow_mut();
            match t.as_slice() {
                [(x, y)] => app.drag = Some((*x, *y, false)),
                [(x0, y0), (x1, y1), ..] => {
                    app.drag = Some(((x0 + x1) / 2.0, (y0 + y1) / 2.0, true));
                    app.pinch = Some(((x1 - x0).hypot(y1 - y0)).max(1.0));
                }
                [] => {}
            }
        }),
    );
    let a = app.clone();
    on(
        "touchmove",
        Box::new(move |e| {
            e.prevent_default();
            let t = touches(&e);
            let mut app = a.borrow_mut();
            match (t.as_slice(), app.drag) {
                ([(x, y)], Some((px, py, false))) => {
                    app.camera
                        .orbit(-(x - px) as f32 * 0.008, (y - py) as f32 * 0.008);
                    app.drag = Some((*x, *y, false));
                }
                ([(x0, y0), (x1, y1), ..], Some((px, py, _))) => {
                    let (cx, cy) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
                    app.camera
                        .pan(((cx - px) / height) as f32, ((cy - py) / height) as f32);
                    let d = (x1 - x0).hypot(y1 - y0).max(1.0);
                    if let Some(p) = app.pinch {
                        app.camera.zoom((p / d) as f32);
                    }
                    app.pinch = Some(d);
                    app.drag = Some((cx, cy, true));
                }
                _ => {}
            }
        }),
    );
    let a = app.clone();
    on(
        "touchend",
        Box::new(move |_| {
            let mut app = a.borrow_mut();
            app.drag = None;
            app.pinch = None;
        }),
    );
}

/// The status line's JSON (a test hook).
#[wasm_bindgen]
pub fn status() -> String {
    STATUS.with(|s| s.borrow().json())
}

/// A promise of every particle's position and radius in id order, read
/// after the batch in flight (a test hook: `x, y, z, r` per particle).
#[wasm_bindgen]
pub fn positions() -> Promise {
    Promise::new(&mut |resolve, reject| {
        let queued = APP.with(|a| {
            a.borrow().as_ref().is_some_and(|app| {
                app.borrow_mut().position_requests.push(resolve.clone());
                true
            })
        });
        if !queued {
            let _ = reject.call1(&JsValue::NULL, &JsValue::from_str("no scene is playing"));
        }
    })
}
