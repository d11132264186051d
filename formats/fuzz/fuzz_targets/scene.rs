//! Any text given to the scene parser returns a scene or an error with a
//! place: never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pellet_formats::Scene;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Scene::parse(text, std::path::Path::new("fuzz.toml"));
    }
});
