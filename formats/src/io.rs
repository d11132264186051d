//! Reading and writing `.pellet` files, with the file named in every error.

use std::io::{Read, Write};
use std::path::Path;

use crate::assets::{AnyAsset, Asset, decode_any};
use crate::container::{self, DecodeLimits, HEADER_LEN, Header};
use crate::error::{DecodeError, ReadError, WriteError, WriteErrorKind};

/// Reads the file's bytes, never more than its header allows: the header is
/// read and checked first, then at most the declared payload plus one byte.
pub fn read_bytes(path: &Path, limits: &DecodeLimits) -> Result<Vec<u8>, ReadError> {
    read_bytes_inner(path, limits).map_err(|e| ReadError::new(path, e))
}

fn read_bytes_inner(path: &Path, limits: &DecodeLimits) -> Result<Vec<u8>, DecodeError> {
    let mut file = std::fs::File::open(path)?;
    let mut head = Vec::with_capacity(HEADER_LEN);
    (&mut file).take(HEADER_LEN as u64).read_to_end(&mut head)?;
    let header = Header::parse(&head)?;
    header.check_limits(limits)?;
    let mut bytes = head;
    bytes.reserve(header.stored_len as usize);
    file.take(header.stored_len.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads, verifies, decodes and validates an asset of type `A` from `path`.
pub fn read_asset<A: Asset>(path: &Path, limits: &DecodeLimits) -> Result<A, ReadError> {
    let bytes = read_bytes(path, limits)?;
    container::decode(&bytes, limits).map_err(|e| ReadError::new(path, e))
}

/// Reads whatever asset `path` holds.
pub fn read_any(path: &Path, limits: &DecodeLimits) -> Result<(Header, AnyAsset), ReadError> {
    let bytes = read_bytes(path, limits)?;
    decode_any(&bytes, limits).map_err(|e| ReadError::new(path, e))
}

/// Encodes `asset` and writes it to `path` atomically: a temporary file in the
/// same folder, flushed, then renamed over `path`. A reader sees the old file
/// or the new one, never half of one. Returns the bytes written.
pub fn write_asset<A: Asset>(path: &Path, asset: &A) -> Result<Vec<u8>, WriteError> {
    let bytes =
        container::encode(asset).map_err(|e| WriteError::new(path, WriteErrorKind::Encode(e)))?;
    write_atomic(path, &bytes).map_err(|e| WriteError::new(path, WriteErrorKind::Io(e)))?;
    Ok(bytes)
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name")
    })?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
