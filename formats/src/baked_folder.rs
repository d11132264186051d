//! A baked folder: content-addressed objects (`<blake3>.pellet`, the file
//! name is the hash of the file's bytes) and one small `manifest.pellet`
//! naming the scene object and every object it needs. Objects are written
//! before the manifest, each atomically, so a reader never sees a
//! half-written state; every object's hash is checked before it is decoded.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::assets::{Asset, Manifest, is_object_hash};
use crate::container::{DecodeLimits, decode, encode};
use crate::error::{DecodeError, EncodeError};
use crate::io::write_atomic;

/// File name of a baked folder's manifest.
pub const MANIFEST_FILE: &str = "manifest.pellet";

/// Why reading or writing a baked folder failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BakedFolderError {
    /// A file could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// A file is not a valid asset of the expected kind.
    #[error("{}: {error}", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// Why.
        error: DecodeError,
    },
    /// An object's bytes do not hash to its name.
    #[error("{}: content hash is {actual}, not the {expected} its name promises (corrupt or tampered)", path.display())]
    HashMismatch {
        /// The object file.
        path: PathBuf,
        /// The hash its name gives.
        expected: String,
        /// The hash of its bytes.
        actual: String,
    },
    /// A manifest names something that is not a hash.
    #[error("{}: object name {name:?} is not a 64-digit BLAKE3 hash", path.display())]
    BadName {
        /// The manifest.
        path: PathBuf,
        /// The offending name.
        name: String,
    },
    /// Encoding an object failed.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// BLAKE3 of `bytes`, 64 lower-case hex digits.
pub fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Path of object `hash` in `dir`.
pub fn object_path(dir: &Path, hash: &str) -> PathBuf {
    dir.join(format!("{hash}.pellet"))
}

/// Reads object `hash` from `dir`, checks its hash, then decodes it.
pub fn read_object<A: Asset>(
    dir: &Path,
    hash: &str,
    limits: &DecodeLimits,
) -> Result<A, BakedFolderError> {
    if !is_object_hash(hash) {
        return Err(BakedFolderError::BadName {
            path: dir.join(MANIFEST_FILE),
            name: hash.to_owned(),
        });
    }
    let path = object_path(dir, hash);
    let bytes = std::fs::read(&path).map_err(|error| BakedFolderError::Io {
        path: path.clone(),
        error,
    })?;
    decode_object(&path, hash, &bytes, limits)
}

/// Checks that `bytes` hash to `hash`, then decodes them.
pub fn decode_object<A: Asset>(
    path: &Path,
    hash: &str,
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<A, BakedFolderError> {
    let actual = content_hash(bytes);
    if actual != hash {
        return Err(BakedFolderError::HashMismatch {
            path: path.to_path_buf(),
            expected: hash.to_owned(),
            actual,
        });
    }
    decode(bytes, limits).map_err(|error| BakedFolderError::Decode {
        path: path.to_path_buf(),
        error,
    })
}

/// Reads `dir/manifest.pellet`.
pub fn read_manifest(dir: &Path, limits: &DecodeLimits) -> Result<Manifest, BakedFolderError> {
    let path = dir.join(MANIFEST_FILE);
    let bytes = std::fs::read(&path).map_err(|error| BakedFolderError::Io {
        path: path.clone(),
        error,
    })?;
    decode(&bytes, limits).map_err(|error| BakedFolderError::Decode { path, error })
}

/// Encodes `asset` and writes it as an object in `dir` (atomically; an
/// existing object of the same hash is left alone). Returns its hash and size.
pub fn write_object<A: Asset>(dir: &Path, asset: &A) -> Result<(String, u64), BakedFolderError> {
    let bytes = encode(asset)?;
    let hash = content_hash(&bytes);
    let path = object_path(dir, &hash);
    if !path.exists() {
        write_atomic(&path, &bytes).map_err(|error| BakedFolderError::Io { path, error })?;
    }
    Ok((hash, bytes.len() as u64))
}

/// Writes the manifest last, atomically.
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), BakedFolderError> {
    let bytes = encode(manifest)?;
    let path = dir.join(MANIFEST_FILE);
    write_atomic(&path, &bytes).map_err(|error| BakedFolderError::Io { path, error })
}
