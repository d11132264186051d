//! Baked folders over HTTP: `player http://host/path/` fetches the
//! manifest, then every object it names into a local cache folder (one per
//! URL, under `$XDG_CACHE_HOME/pellet/http/`), checking each object's BLAKE3
//! against its name before it is kept. Size limits, timeouts and retries
//! with backoff; a server that is down, a 404, a hash mismatch or a
//! truncated body is one clear error, and nothing half-loaded is ever used.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pellet_formats::DecodeLimits;
use pellet_formats::assets::{Manifest, is_object_hash};
use pellet_formats::baked_folder::{MANIFEST_FILE, content_hash, object_path};
use pellet_formats::container::decode;
use pellet_formats::io::write_atomic;

use crate::sim::SimError;

/// Largest manifest accepted, bytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// Largest object accepted, bytes.
pub const MAX_OBJECT_BYTES: u64 = 1 << 30;
/// Attempts per request (the first and the retries).
pub const ATTEMPTS: u32 = 4;
/// Seconds one request may take in all.
pub const TIMEOUT_S: u64 = 60;

/// Whether `scene` names an HTTP(S) URL rather than a file.
pub fn is_url(scene: &Path) -> bool {
    let s = scene.to_string_lossy();
    s.starts_with("http://") || s.starts_with("https://")
}

/// The local folder URL `url` is cached in, below `cache_root`.
pub fn cache_folder(cache_root: &Path, url: &str) -> PathBuf {
    cache_root.join(&content_hash(url.as_bytes())[..24])
}

/// `$XDG_CACHE_HOME/pellet/http`, else `$HOME/.cache/pellet/http`, else a temporary folder.
pub fn default_http_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("pellet")
        .join("http")
}

fn err(url: &str, what: impl std::fmt::Display) -> SimError {
    SimError::Invalid(format!("{url}: {what}"))
}

/// GET `url` with retries; 4xx answers are not retried.
fn get(agent: &ureq::Agent, url: &str, limit: u64) -> Result<Vec<u8>, SimError> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(200 << (attempt - 1)));
            tracing::warn!("{url}: retry {attempt} after: {last}");
        }
        match agent.get(url).call() {
            Ok(mut response) => {
                let status = response.status().as_u16();
                if (400..500).contains(&status) {
                    return Err(err(url, format!("the server answered {status}")));
                }
                if status >= 500 {
                    last = format!("the server answered {status}");
                    continue;
                }
                match response.body_mut().with_config().limit(limit).read_to_vec() {
                    Ok(bytes) => return Ok(bytes),
                    Err(ureq::Error::BodyExceedsLimit(_)) => {
                        return Err(err(url, format!("larger than the {limit}-byte limit")));
                    }
                    Err(e) => last = format!("the body was cut short ({e})"),
                }
            }
            Err(e) => last = format!("cannot reach the server ({e})"),
        }
    }
    Err(err(
        url,
        format!("{last}; gave up after {ATTEMPTS} attempts"),
    ))
}

/// Fetches the baked folder at `url` into its cache folder below
/// `cache_root` and returns that folder. Objects already cached with the
/// right hash are not fetched again.
pub fn fetch_baked_folder(url: &str, cache_root: &Path) -> Result<PathBuf, SimError> {
    let base = url.trim_end_matches('/');
    let folder = cache_folder(cache_root, base);
    std::fs::create_dir_all(&folder).map_err(|e| err(&folder.display().to_string(), e))?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(TIMEOUT_S)))
        .http_status_as_error(false)
        .build()
        .into();
    let manifest_url = format!("{base}/{MANIFEST_FILE}");
    let bytes = get(&agent, &manifest_url, MAX_MANIFEST_BYTES)?;
    let manifest: Manifest =
        decode(&bytes, &DecodeLimits::default()).map_err(|e| err(&manifest_url, e))?;
    for entry in &manifest.objects {
        // Names come from the network: only 64-digit hashes become file names.
        if !is_object_hash(&entry.hash) {
            return Err(err(
                &manifest_url,
                format!("object name {:?} is not a BLAKE3 hash", entry.hash),
            ));
        }
        let path = object_path(&folder, &entry.hash);
        if let Ok(existing) = std::fs::read(&path)
            && content_hash(&existing) == entry.hash
        {
            continue;
        }
        let object_url = format!("{base}/{}.pellet", entry.hash);
        let limit = entry.size.min(MAX_OBJECT_BYTES);
        let data = get(&agent, &object_url, limit)?;
        let actual = content_hash(&data);
        if actual != entry.hash {
            return Err(err(
                &object_url,
                format!(
                    "content hash is {actual}, not the {} its name promises (corrupt, truncated or tampered)",
                    entry.hash
                ),
            ));
        }
        // A kind check before keeping it.
        let _: pellet_formats::container::Header =
            pellet_formats::container::Header::parse(&data).map_err(|e| err(&object_url, e))?;
        write_atomic(&path, &data).map_err(|e| err(&path.display().to_string(), e))?;
    }
    // The manifest last: the cached folder is never half-written.
    write_atomic(&folder.join(MANIFEST_FILE), &bytes)
        .map_err(|e| err(&folder.display().to_string(), e))?;
    Ok(folder)
}
