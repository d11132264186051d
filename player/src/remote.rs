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

/// Why loading or polling a served baked folder failed. Every message names
/// the URL (or the cache file) first and is one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// A 4xx answer (not retried).
    #[error("{url}: the server answered {status}")]
    Status {
        /// The request.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// A body over the size limit.
    #[error("{url}: larger than the {limit}-byte limit")]
    TooLarge {
        /// The request.
        url: String,
        /// The limit, bytes.
        limit: u64,
    },
    /// Every attempt failed (unreachable, 5xx, cut short).
    #[error("{url}: {last}; gave up after {attempts} attempts")]
    GaveUp {
        /// The request.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// How the last one failed.
        last: String,
    },
    /// The whole load ran past its time limit.
    #[error(
        "{url}: the whole load took more than {limit_s:.0} s, the limit (PELLET_HTTP_TIMEOUT_S sets it){}",
        if last.is_empty() { String::new() } else { format!("; last: {last}") }
    )]
    Deadline {
        /// The request under way.
        url: String,
        /// The limit, seconds.
        limit_s: f64,
        /// How the last attempt failed, if one did.
        last: String,
    },
    /// A manifest names an object by something that is not a hash.
    #[error("{url}: object name {name:?} is not a BLAKE3 hash")]
    BadName {
        /// The manifest.
        url: String,
        /// The name.
        name: String,
    },
    /// An object's bytes do not hash to its name.
    #[error(
        "{url}: content hash is {actual}, not the {expected} its name promises (corrupt, truncated or tampered)"
    )]
    HashMismatch {
        /// The object.
        url: String,
        /// The hash its name gives.
        expected: String,
        /// The hash of its bytes.
        actual: String,
    },
    /// The manifest or an object's header is not valid.
    #[error("{url}: {error}")]
    Decode {
        /// The file.
        url: String,
        /// Why.
        error: pellet_formats::DecodeError,
    },
    /// A 304 to a request that sent no validators.
    #[error("{url}: answered 304 to an unconditional request")]
    UnexpectedNotModified {
        /// The request.
        url: String,
    },
    /// The local cache folder could not be written.
    #[error("{}: {error}", path.display())]
    Cache {
        /// The cache file or folder.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
}

fn cache_err(path: &Path) -> impl FnOnce(std::io::Error) -> RemoteError + '_ {
    move |error| RemoteError::Cache {
        path: path.to_path_buf(),
        error,
    }
}

/// Largest manifest accepted, bytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// Largest object accepted, bytes.
pub const MAX_OBJECT_BYTES: u64 = 1 << 30;
/// Attempts per request (the first and the retries).
pub const ATTEMPTS: u32 = 4;
/// Seconds one request may take in all.
pub const TIMEOUT_S: u64 = 60;
/// Seconds one whole load (the manifest and every object it names, retries
/// included) may take by default, so a server that drips bytes cannot hold a
/// load for long; `PELLET_HTTP_TIMEOUT_S` in the environment changes it.
pub const LOAD_TIMEOUT_S: u64 = 120;

/// The whole-load time limit: `PELLET_HTTP_TIMEOUT_S` when it is a positive
/// number of seconds, else [`LOAD_TIMEOUT_S`].
pub fn load_timeout() -> Duration {
    std::env::var("PELLET_HTTP_TIMEOUT_S")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
        .map_or(Duration::from_secs(LOAD_TIMEOUT_S), Duration::from_secs_f64)
}

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

/// The HTTP cache root: `CACHE_DIR/http` when a cache folder is given, else
/// [`default_http_cache`].
pub fn http_cache_root(cache_dir: Option<&Path>) -> PathBuf {
    cache_dir.map_or_else(default_http_cache, |d| d.join("http"))
}

/// What a GET returned.
enum Fetched {
    /// 200 with a body and the validators to send next time.
    Body {
        bytes: Vec<u8>,
        validators: Validators,
    },
    /// 304: unchanged since the validators sent.
    NotModified,
}

/// HTTP cache validators of the last manifest seen: sent back as
/// `If-None-Match` / `If-Modified-Since` so an unchanged manifest costs a 304.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// The `ETag` header.
    pub etag: Option<String>,
    /// The `Last-Modified` header.
    pub last_modified: Option<String>,
}

/// GET `url` with retries; 4xx answers are not retried. With `validators`,
/// a conditional request.
fn get(
    agent: &ureq::Agent,
    url: &str,
    limit: u64,
    validators: Option<&Validators>,
    deadline: &Deadline,
) -> Result<Fetched, RemoteError> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(
                Duration::from_millis(200 << (attempt - 1)).min(deadline.remaining()),
            );
            tracing::warn!("{url}: retry {attempt} after: {last}");
        }
        let remaining = deadline.remaining();
        if remaining.is_zero() {
            return Err(deadline.expired(url, &last));
        }
        let mut request = agent.get(url);
        if let Some(v) = validators {
            if let Some(etag) = &v.etag {
                request = request.header("If-None-Match", etag);
            }
            if let Some(date) = &v.last_modified {
                request = request.header("If-Modified-Since", date);
            }
        }
        let request = request
            .config()
            .timeout_global(Some(remaining.min(Duration::from_secs(TIMEOUT_S))))
            .build();
        match request.call() {
            Ok(mut response) => {
                let status = response.status().as_u16();
                if status == 304 && validators.is_some() {
                    return Ok(Fetched::NotModified);
                }
                if (400..500).contains(&status) {
                    return Err(RemoteError::Status {
                        url: url.to_owned(),
                        status,
                    });
                }
                if status >= 300 {
                    last = format!("the server answered {status}");
                    continue;
                }
                let header = |name: &str| {
                    response
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                // Servers such as nginx and Python's derive validators from
                // the file's modification time in whole seconds: a manifest
                // served in the second it was written may change again
                // within that second under the same validators, so such an
                // answer is not trusted for a conditional poll (the next poll
                // downloads the small manifest and compares its hash).
                let (date, modified) = (header("date"), header("last-modified"));
                let validators = if modified.is_some() && modified == date {
                    Validators::default()
                } else {
                    Validators {
                        etag: header("etag"),
                        last_modified: modified,
                    }
                };
                match response.body_mut().with_config().limit(limit).read_to_vec() {
                    Ok(bytes) => return Ok(Fetched::Body { bytes, validators }),
                    Err(ureq::Error::BodyExceedsLimit(_)) => {
                        return Err(RemoteError::TooLarge {
                            url: url.to_owned(),
                            limit,
                        });
                    }
                    Err(e) => last = format!("the body was cut short ({e})"),
                }
            }
            Err(e) => last = format!("cannot reach the server ({e})"),
        }
        if deadline.remaining().is_zero() {
            return Err(deadline.expired(url, &last));
        }
    }
    Err(RemoteError::GaveUp {
        url: url.to_owned(),
        attempts: ATTEMPTS,
        last,
    })
}

/// The time one load may still take.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: std::time::Instant,
    limit: Duration,
}

impl Deadline {
    fn new(limit: Duration) -> Self {
        Self {
            at: std::time::Instant::now() + limit,
            limit,
        }
    }

    fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(std::time::Instant::now())
    }

    fn expired(&self, url: &str, last: &str) -> RemoteError {
        RemoteError::Deadline {
            url: url.to_owned(),
            limit_s: self.limit.as_secs_f64(),
            last: last.to_owned(),
        }
    }
}

/// Fetches the baked folder at `url` into its cache folder below
/// `cache_root` and returns that folder. Objects already cached with the
/// right hash are not fetched again.
pub fn fetch_baked_folder(url: &str, cache_root: &Path) -> Result<PathBuf, RemoteError> {
    RemoteFolder::new(url, cache_root).fetch()
}

/// Requests a [`RemoteFolder`] has made, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Manifests downloaded (200).
    pub manifests: u64,
    /// Manifest polls answered 304 Not Modified.
    pub not_modified: u64,
    /// Objects downloaded.
    pub objects: u64,
    /// Object bytes downloaded.
    pub object_bytes: u64,
}

/// A baked folder on an HTTP server mirrored into a local cache folder, kept
/// up to date by polling its manifest with conditional requests.
#[derive(Debug)]
pub struct RemoteFolder {
    base: String,
    folder: PathBuf,
    agent: ureq::Agent,
    validators: Option<Validators>,
    manifest_hash: Option<String>,
    counts: RequestCounts,
    load_timeout: Duration,
}

impl RemoteFolder {
    /// The baked folder at `url` (a trailing `/` is optional), cached below `cache_root`.
    pub fn new(url: &str, cache_root: &Path) -> Self {
        let base = url.trim_end_matches('/').to_owned();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(TIMEOUT_S)))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            folder: cache_folder(cache_root, &base),
            base,
            agent,
            validators: None,
            manifest_hash: None,
            counts: RequestCounts::default(),
            load_timeout: load_timeout(),
        }
    }

    /// Bounds each fetch or poll (manifest, objects, retries) to `limit` in
    /// all; default [`load_timeout`].
    pub fn with_load_timeout(mut self, limit: Duration) -> Self {
        self.load_timeout = limit;
        self
    }

    /// The local cache folder (a baked folder once fetched).
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// What has been requested so far.
    pub fn counts(&self) -> RequestCounts {
        self.counts
    }

    /// Fetches the manifest unconditionally, then every missing object.
    pub fn fetch(&mut self) -> Result<PathBuf, RemoteError> {
        self.validators = None;
        self.manifest_hash = None;
        self.poll()?;
        Ok(self.folder.clone())
    }

    /// One conditional request for the manifest. `Ok(Some(folder))` when the
    /// manifest changed and every object it names is now cached and checked;
    /// `Ok(None)` when it is unchanged (304, or the same bytes). On an error
    /// the cache keeps the last good manifest and its objects.
    pub fn poll(&mut self) -> Result<Option<PathBuf>, RemoteError> {
        std::fs::create_dir_all(&self.folder).map_err(cache_err(&self.folder))?;
        let deadline = Deadline::new(self.load_timeout);
        let manifest_url = format!("{}/{MANIFEST_FILE}", self.base);
        let (bytes, validators) = match get(
            &self.agent,
            &manifest_url,
            MAX_MANIFEST_BYTES,
            self.validators.as_ref(),
            &deadline,
        )? {
            Fetched::NotModified => {
                self.counts.not_modified += 1;
                return Ok(None);
            }
            Fetched::Body { bytes, validators } => (bytes, validators),
        };
        self.counts.manifests += 1;
        let hash = content_hash(&bytes);
        if self.manifest_hash.as_deref() == Some(hash.as_str()) {
            // A server without validators (or a touched file): same content.
            self.validators = Some(validators);
            return Ok(None);
        }
        let manifest: Manifest =
            decode(&bytes, &DecodeLimits::default()).map_err(|error| RemoteError::Decode {
                url: manifest_url.clone(),
                error,
            })?;
        for entry in &manifest.objects {
            // Names come from the network: only 64-digit hashes become file
            // names, so `..`, `/etc/passwd` and the like never reach the disk.
            if !is_object_hash(&entry.hash) {
                return Err(RemoteError::BadName {
                    url: manifest_url,
                    name: entry.hash.clone(),
                });
            }
            let path = object_path(&self.folder, &entry.hash);
            if let Ok(existing) = std::fs::read(&path)
                && content_hash(&existing) == entry.hash
            {
                continue;
            }
            let object_url = format!("{}/{}.pellet", self.base, entry.hash);
            let limit = entry.size.min(MAX_OBJECT_BYTES);
            let Fetched::Body { bytes: data, .. } =
                get(&self.agent, &object_url, limit, None, &deadline)?
            else {
                return Err(RemoteError::UnexpectedNotModified { url: object_url });
            };
            let actual = content_hash(&data);
            if actual != entry.hash {
                return Err(RemoteError::HashMismatch {
                    url: object_url,
                    expected: entry.hash.clone(),
                    actual,
                });
            }
            // A kind check before keeping it.
            let _: pellet_formats::container::Header =
                pellet_formats::container::Header::parse(&data).map_err(|error| {
                    RemoteError::Decode {
                        url: object_url.clone(),
                        error,
                    }
                })?;
            write_atomic(&path, &data).map_err(cache_err(&path))?;
            self.counts.objects += 1;
            self.counts.object_bytes += data.len() as u64;
        }
        // The manifest last: the cached folder is never half-written.
        let manifest_path = self.folder.join(MANIFEST_FILE);
        write_atomic(&manifest_path, &bytes).map_err(cache_err(&manifest_path))?;
        self.validators = Some(validators);
        self.manifest_hash = Some(hash);
        Ok(Some(self.folder.clone()))
    }
}

/// Polls a [`RemoteFolder`] on a background thread every `interval`; the
/// viewer's remote hot reload. Each change (or error) arrives once.
#[derive(Debug)]
pub struct RemoteWatcher {
    events: std::sync::mpsc::Receiver<Result<PathBuf, String>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl RemoteWatcher {
    /// Starts polling `remote` (already fetched once) every `interval`.
    pub fn start(mut remote: RemoteFolder, interval: Duration) -> Self {
        let (send, events) = std::sync::mpsc::channel();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let mut last_error = None;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(interval);
                let event = match remote.poll() {
                    Ok(None) => {
                        last_error = None;
                        continue;
                    }
                    Ok(Some(folder)) => Ok(folder),
                    // Report an error once, not every poll.
                    Err(e) if last_error.as_ref() == Some(&e.to_string()) => continue,
                    Err(e) => {
                        last_error = Some(e.to_string());
                        Err(e.to_string())
                    }
                };
                if send.send(event).is_err() {
                    break;
                }
            }
        });
        Self { events, stop }
    }

    /// The newest change since the last call: a freshly cached folder, or an error.
    pub fn changed(&mut self) -> Option<Result<PathBuf, String>> {
        self.events.try_iter().last()
    }
}

impl Drop for RemoteWatcher {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
