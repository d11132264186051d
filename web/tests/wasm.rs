//! The wasm-side units, compiled for wasm32 and run by
//! `wasm-bindgen-test-runner` (in Node.js, no WebGPU needed):
//! `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
//! cargo test -p pellet-web --target wasm32-unknown-unknown`
//! (scripts/test-web.sh). Containers decode with the pure-Rust zstd decoder
//! there, hashes are checked, and a baked folder is set up from fetched
//! bytes, as in the page.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use pellet_formats::assets::{AssetKind, BakedScene, Manifest, ManifestEntry, SimState};
use pellet_formats::baked_folder::content_hash;
use pellet_formats::container::{DecodeLimits, decode, encode};
use pellet_web::load::{Fetch, LoadError, load_baked};
use pellet_web::status::Status;
use wasm_bindgen_test::wasm_bindgen_test;

const GOLDEN_STATE: &[u8] = include_bytes!("../../formats/tests/golden/sim_state.pellet");
const BALLPIT: &str = include_str!("../../assets/scenes/ballpit.toml");

#[wasm_bindgen_test]
fn a_golden_container_decodes_in_wasm_and_a_flipped_byte_is_refused() {
    let state: SimState = decode(GOLDEN_STATE, &DecodeLimits::default()).unwrap();
    assert!(!state.positions.is_empty());
    let mut bad = GOLDEN_STATE.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(decode::<SimState>(&bad, &DecodeLimits::default()).is_err());
    // What wasm encodes (ruzstd), wasm decodes to the same asset.
    let again: SimState = decode(&encode(&state).unwrap(), &DecodeLimits::default()).unwrap();
    assert_eq!(again, state);
}

/// A server in memory: URL to bytes.
struct Memory(BTreeMap<String, Vec<u8>>);

impl Fetch for Memory {
    async fn get(&self, url: &str, limit: u64) -> Result<Vec<u8>, String> {
        let bytes = self.0.get(url).ok_or("HTTP 404 Not Found")?;
        if bytes.len() as u64 > limit {
            return Err("too large".into());
        }
        Ok(bytes.clone())
    }
}

/// The ball pit as a served folder under `site/scene/`.
fn served_ballpit() -> (Memory, String) {
    let scene =
        pellet_formats::Scene::parse(BALLPIT, std::path::Path::new("ballpit.toml")).unwrap();
    let baked = encode(&BakedScene {
        scene,
        bodies: Vec::new(),
    })
    .unwrap();
    let hash = content_hash(&baked);
    let manifest = Manifest {
        name: "ballpit".into(),
        scene: hash.clone(),
        objects: vec![ManifestEntry {
            hash: hash.clone(),
            kind: AssetKind::BakedScene,
            size: baked.len() as u64,
            label: String::new(),
        }],
        generator: "test".into(),
    };
    let mut files = BTreeMap::new();
    files.insert(
        "site/scene/manifest.pellet".to_owned(),
        encode(&manifest).unwrap(),
    );
    files.insert(format!("site/scene/{hash}.pellet"), baked);
    (Memory(files), hash)
}

#[wasm_bindgen_test]
async fn a_served_folder_sets_up_in_wasm_and_a_tampered_object_fails_by_its_hash() {
    let (mut server, hash) = served_ballpit();
    let loaded = load_baked(&server, "site/scene/").await.unwrap();
    assert_eq!(loaded.setup.particles.len(), 4096);
    let object = server
        .0
        .get_mut(&format!("site/scene/{hash}.pellet"))
        .unwrap();
    let last = object.len() - 1;
    object[last] ^= 1;
    let err = load_baked(&server, "site/scene/").await.unwrap_err();
    assert!(matches!(err, LoadError::Object(_)), "{err}");
    assert!(err.to_string().contains("hash"), "{err}");
    let missing = load_baked(&server, "elsewhere/").await.unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("elsewhere/manifest.pellet: HTTP 404"),
        "{missing}"
    );
}

#[wasm_bindgen_test]
fn the_status_line_is_json_in_wasm() {
    let s = Status {
        scene: "scene/".into(),
        particles: 4096,
        ..Default::default()
    };
    let line = s.text().lines().last().unwrap().to_owned();
    assert!(
        line.starts_with("{\"scene\":\"scene/\",\"particles\":4096,"),
        "{line}"
    );
}
