//! Reading and writing `.pellet` files, with the file named in every error.

use std::io::{Read, Write};
use std::path::Path;

use crate::assets::{AnyAsset, Asset, decode_any};
use crate::container::{self, DecodeLimits, HEADER_LEN, Header};
use crate::error::{DecodeError, ReadError, WriteError, WriteErrorKind};

/// Why [`read_regular_file`] refused or failed; the message reads after a file name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileReadError {
    /// The OS could not open or read it.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// A device, FIFO, socket or folder where a file was expected.
    #[error("is a {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than the limit (checked before reading, and again while reading).
    #[error("is {size} bytes, more than the {limit}-byte limit")]
    TooLarge {
        /// Bytes the file has (or had read when it grew past the limit).
        size: u64,
        /// The limit, bytes.
        limit: u64,
    },
}

/// What kind of non-regular file `meta` describes, for messages:
/// `character device`, `block device`, `FIFO`, `socket`, `folder`.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_char_device() {
            return "character device";
        }
        if t.is_block_device() {
            return "block device";
        }
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_socket() {
            return "socket";
        }
    }
    if meta.is_dir() {
        "folder"
    } else {
        "special file"
    }
}

/// The metadata of `path` (links followed) if it is a regular file; a
/// device, FIFO, socket or folder is refused without opening it (opening a
/// FIFO blocks until a writer comes; reading `/dev/zero` never ends).
pub fn regular_file_metadata(path: &Path) -> Result<std::fs::Metadata, FileReadError> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        Ok(meta)
    } else {
        Err(FileReadError::NotRegular(file_kind(&meta)))
    }
}

/// Reads a whole untrusted input file (a scene, mesh, buffer or particle
/// file): it must be a regular file (symbolic links are followed) of at most
/// `limit` bytes. Devices (`/dev/zero`), FIFOs (which would block), sockets
/// and folders are refused before they are opened, an oversized file before
/// it is read, and one that grows while it is read is cut off at
/// `limit + 1` bytes and refused, so memory stays bounded.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, FileReadError> {
    let meta = regular_file_metadata(path)?;
    if meta.len() > limit {
        return Err(FileReadError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let file = std::fs::File::open(path)?;
    // The file opened may not be the one checked (a swapped link): check again.
    let opened = file.metadata()?;
    if !opened.is_file() {
        return Err(FileReadError::NotRegular(file_kind(&opened)));
    }
    let mut bytes = Vec::with_capacity(opened.len().min(limit) as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(FileReadError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// Checks, before any work, that a file can be written at `path` (see
/// [`Outputs::prepare`](crate::output::Outputs::prepare)): it is not a
/// folder or a device, its folder exists, and a file can be created there
/// (tried with a probe file that is removed at once). Nothing is left behind.
pub fn check_output_file(path: &Path) -> Result<(), crate::output::OutputError> {
    crate::output::Outputs::prepare(&[path], &[]).map(drop)
}

/// Checks, before any work, that files can be written into folder `dir`,
/// creating it (and its parents) if needed (see
/// [`prepare_folder`](crate::output::prepare_folder)).
pub fn check_output_folder(dir: &Path) -> Result<(), crate::output::OutputError> {
    crate::output::prepare_folder(dir)
}

/// Reads the file's bytes, never more than its header allows: the header is
/// read and checked first, then at most the declared payload plus one byte.
pub fn read_bytes(path: &Path, limits: &DecodeLimits) -> Result<Vec<u8>, ReadError> {
    read_bytes_inner(path, limits).map_err(|e| ReadError::new(path, e))
}

fn read_bytes_inner(path: &Path, limits: &DecodeLimits) -> Result<Vec<u8>, DecodeError> {
    regular_file_metadata(path).map_err(|e| match e {
        FileReadError::Io(io) => io,
        other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
    })?;
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
