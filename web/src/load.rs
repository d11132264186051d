//! A served baked folder, fetched and checked as the native loader checks a
//! folder on disk (`player`'s `read_baked_scene`): the manifest first, then
//! the scene object, then exactly the objects the scene names that the
//! manifest lists with the right kind; every object's bytes must hash to
//! its name before anything decodes them, and every response is held to the
//! same size limit. The fetcher is a parameter: the page's `fetch`, or the
//! file system in the native tests.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;

use pellet_formats::assets::{AssetKind, BakedScene, Manifest, ParticleBody};
use pellet_formats::baked_folder::{BakedFolderError, MANIFEST_FILE, content_hash, decode_object};
use pellet_formats::container::{DEFAULT_MAX_PAYLOAD, DecodeLimits, decode};
use pellet_formats::scene::MemoryFiles;
use pellet_sim::setup::{BodyRequest, BodySource};
use pellet_sim::{GridMode, SimError, SimOptions, SimSetup};
use thiserror::Error;

/// Gets the bytes at a URL.
pub trait Fetch {
    /// The body of `url`, refused when longer than `limit` bytes.
    fn get(&self, url: &str, limit: u64) -> impl Future<Output = Result<Vec<u8>, String>>;
}

/// A folder on disk as the server (native tools and tests): a URL is a path.
#[derive(Debug, Clone, Copy, Default)]
pub struct FolderFetch;

impl Fetch for FolderFetch {
    async fn get(&self, url: &str, limit: u64) -> Result<Vec<u8>, String> {
        pellet_formats::io::read_regular_file(Path::new(url), limit).map_err(|e| e.to_string())
    }
}

/// Why a baked folder could not be played.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A request failed.
    #[error("{url}: {message}")]
    Fetch {
        /// What was asked for.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The manifest is not one.
    #[error("{url}: {error}")]
    Manifest {
        /// The manifest's URL.
        url: String,
        /// Why.
        error: pellet_formats::DecodeError,
    },
    /// An object failed its hash check or would not decode.
    #[error(transparent)]
    Object(#[from] BakedFolderError),
    /// The scene names an object the manifest does not list.
    #[error("{url}: the baked scene reads outside its folder: {what}")]
    Confinement {
        /// The folder.
        url: String,
        /// Which entry.
        what: String,
    },
    /// The scene cannot be simulated.
    #[error("{0}")]
    Setup(#[from] SimError),
}

/// A baked folder, fetched, checked and set up.
#[derive(Debug)]
pub struct Loaded {
    /// The scene's name.
    pub name: String,
    /// The simulation's setup.
    pub setup: SimSetup,
    /// Objects fetched (the manifest included).
    pub objects: usize,
    /// Bytes fetched.
    pub bytes: u64,
}

/// `name` in folder `base` (with or without its trailing `/`).
pub fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

/// The bodies the scene names, in its order.
struct FetchedBodies(Vec<ParticleBody>);

impl BodySource for FetchedBodies {
    fn body(&mut self, index: usize, _request: &BodyRequest) -> Result<ParticleBody, SimError> {
        self.0
            .get(index)
            .cloned()
            .ok_or_else(|| SimError::BodyUnavailable {
                index,
                error: "the baked folder has no body for it".into(),
            })
    }
}

/// Fetches, checks and sets up the baked folder at `base` (a URL ending in
/// the folder, e.g. `scene/` or `https://host/scenes/ballpit/`).
pub async fn load_baked<F: Fetch>(fetch: &F, base: &str) -> Result<Loaded, LoadError> {
    let limits = DecodeLimits::default();
    let limit = limits.max_payload.min(DEFAULT_MAX_PAYLOAD);
    let mut bytes_total = 0u64;
    let mut get = async |url: String| -> Result<Vec<u8>, LoadError> {
        let bytes = fetch
            .get(&url, limit)
            .await
            .map_err(|message| LoadError::Fetch {
                url: url.clone(),
                message,
            })?;
        if bytes.len() as u64 > limit {
            return Err(LoadError::Fetch {
                url,
                message: format!("{} bytes, more than the limit of {limit}", bytes.len()),
            });
        }
        bytes_total += bytes.len() as u64;
        Ok(bytes)
    };
    let manifest_url = join(base, MANIFEST_FILE);
    let manifest: Manifest =
        decode(&get(manifest_url.clone()).await?, &limits).map_err(|error| {
            LoadError::Manifest {
                url: manifest_url.clone(),
                error,
            }
        })?;
    let object_url = |hash: &str| join(base, &format!("{hash}.pellet"));
    let scene_url = object_url(&manifest.scene);
    let baked: BakedScene = decode_object(
        Path::new(&scene_url),
        &manifest.scene,
        &get(scene_url.clone()).await?,
        &limits,
    )?;
    let needed = baked
        .objects_in(&manifest)
        .map_err(|what| LoadError::Confinement {
            url: base.to_owned(),
            what,
        })?;
    // Each object once (a body may be used by several entries), hash-checked
    // before anything decodes it.
    let mut fetched: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut bodies = Vec::new();
    for (hash, kind) in &needed {
        let url = object_url(hash);
        if !fetched.contains_key(hash) {
            let bytes = get(url.clone()).await?;
            let actual = content_hash(&bytes);
            if &actual != hash {
                return Err(BakedFolderError::HashMismatch {
                    path: url.into(),
                    expected: hash.clone(),
                    actual,
                }
                .into());
            }
            fetched.insert(hash.clone(), bytes);
        }
        if *kind == AssetKind::ParticleBody {
            bodies.push(decode_object(
                Path::new(&url),
                hash,
                &fetched[hash],
                &limits,
            )?);
        }
    }
    let objects = 2 + fetched.len();
    // The particle files move to the setup's reader (no copy).
    let mut files = MemoryFiles::default();
    for (hash, kind) in &needed {
        if *kind != AssetKind::ParticleBody
            && let Some(bytes) = fetched.remove(hash)
        {
            files.0.insert(format!("{hash}.pellet"), bytes);
        }
    }
    let setup = SimSetup::from_scene_with_files(
        &baked.scene,
        &files,
        SimOptions {
            grid: GridMode::Auto,
        },
        &mut FetchedBodies(bodies),
    )?;
    Ok(Loaded {
        name: baked.scene.name.clone(),
        setup,
        objects,
        bytes: bytes_total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use FolderFetch as Files;

    #[test]
    fn urls_join_with_one_slash() {
        assert_eq!(join("scene", "manifest.pellet"), "scene/manifest.pellet");
        assert_eq!(join("scene/", "a.pellet"), "scene/a.pellet");
        assert_eq!(join("", "a.pellet"), "a.pellet");
    }

    /// The ball pit baked by hand into `dir`: its scene object and manifest.
    fn baked_ballpit(dir: &Path) -> (pellet_formats::Scene, String) {
        use pellet_formats::assets::ManifestEntry;
        use pellet_formats::baked_folder::{write_manifest, write_object};
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes/ballpit.toml");
        let scene = pellet_formats::Scene::load(&path).expect("the ball pit");
        let baked = BakedScene {
            scene: scene.clone(),
            bodies: Vec::new(),
        };
        let (hash, size) = write_object(dir, &baked).expect("written");
        let manifest = Manifest {
            name: scene.name.clone(),
            scene: hash.clone(),
            objects: vec![ManifestEntry {
                hash: hash.clone(),
                kind: AssetKind::BakedScene,
                size,
                label: String::new(),
            }],
            generator: "test".into(),
        };
        write_manifest(dir, &manifest).expect("manifest");
        (scene, hash)
    }

    #[test]
    fn a_fetched_folder_sets_up_what_the_native_loader_does_and_a_tampered_one_fails() {
        let dir = tempfile::tempdir().expect("a folder");
        let (scene, hash) = baked_ballpit(dir.path());
        let base = dir.path().to_string_lossy().into_owned();
        let loaded = pollster::block_on(load_baked(&Files, &base)).expect("loads");
        let native =
            SimSetup::from_scene(&scene, dir.path(), SimOptions::default()).expect("setup");
        assert_eq!(loaded.name, "ballpit");
        assert_eq!(loaded.setup.particles, native.particles);
        assert_eq!(loaded.setup.dt, native.dt);
        assert_eq!(loaded.objects, 2);
        // One byte of the scene object changed: refused by its hash.
        let object = dir.path().join(format!("{hash}.pellet"));
        let mut bytes = std::fs::read(&object).expect("object");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&object, bytes).expect("tampered");
        let err = pollster::block_on(load_baked(&Files, &base)).expect_err("tampered");
        assert!(
            matches!(
                err,
                LoadError::Object(BakedFolderError::HashMismatch { .. })
            ),
            "{err}"
        );
    }

    #[test]
    fn a_missing_folder_is_one_clear_error() {
        let err = pollster::block_on(load_baked(&Files, "/nonexistent/folder"))
            .expect_err("nothing there");
        let line = err.to_string();
        assert!(
            line.starts_with("/nonexistent/folder/manifest.pellet: "),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
