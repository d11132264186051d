//! # pellet-web
//!
//! The browser player: a page that fetches a served baked folder (the one
//! `bake scene -o DIR` writes and `player http://...` plays), checks every
//! object's BLAKE3 as the native loader does, and plays it on WebGPU with
//! the simulation's own WGSL kernels (in the packed binding layout WebGPU's
//! limits need, `pellet_sim::stages::packed`) and the viewer's sphere
//! impostors (`pellet-render`).
//!
//! - [`load`]: the baked folder over any fetcher, into a simulation setup;
//! - [`status`]: the page's status line, one JSON object for scripts;
//! - `app` (wasm32 only): the page itself: canvas, camera on mouse and
//!   touch, the panel, the stepping loop that never blocks, the test hooks.
//!
//! `bash scripts/web.sh SCENE OUT` builds it into a static site.

pub mod load;
pub mod status;

#[cfg(target_arch = "wasm32")]
mod app;
