//! Every error `pellet-formats` returns. Messages are lower-case fragments that
//! read well after a file name: `duck.pellet: format version 3 is newer than
//! this build reads (1)`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::assets::AssetKind;

/// Why a `.pellet` byte string could not be turned into an asset.
///
/// The variants follow the decode pipeline in order: header, limits,
/// decompression, hash, MessagePack decode, semantic validation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than the fixed-size header.
    #[error("file is {got} bytes, shorter than the {need}-byte Pellet header")]
    TruncatedHeader { got: u64, need: u64 },
    /// The magic bytes are not Pellet's: some other kind of file.
    #[error("not a Pellet file (starts with {found}, expected {expected})")]
    NotPellet { found: String, expected: String },
    /// Version 0 is never written.
    #[error("format version 0 is invalid")]
    VersionZero,
    /// Written by a newer Pellet.
    #[error("format version {found} is newer than this build reads ({supported})")]
    VersionTooNew { found: u16, supported: u16 },
    /// An asset kind this build does not know.
    #[error("unknown asset kind {0}")]
    UnknownKind(u16),
    /// A valid file of another kind than the caller asked for.
    #[error("expected a {expected} asset, found a {found} asset")]
    WrongKind {
        expected: AssetKind,
        found: AssetKind,
    },
    /// Flag bits this build does not understand.
    #[error("unknown header flags {0:#010x}")]
    UnknownFlags(u32),
    /// A reserved header byte is not zero.
    #[error("reserved header byte at offset {offset} is {value:#04x}, must be zero")]
    ReservedNotZero { offset: usize, value: u8 },
    /// A declared size is above the reader's limit; nothing was allocated.
    #[error("declared {what} size of {declared} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        what: &'static str,
        declared: u64,
        limit: u64,
    },
    /// The file ends before the declared payload does.
    #[error("payload truncated: header declares {declared} bytes, file has {actual}")]
    TruncatedPayload { declared: u64, actual: u64 },
    /// Bytes after the declared payload.
    #[error("{extra} unexpected bytes after the payload")]
    TrailingBytes { extra: u64 },
    /// A raw (uncompressed) payload whose two declared lengths differ.
    #[error("raw payload is {stored} bytes but the header declares {declared} uncompressed")]
    RawLengthMismatch { stored: u64, declared: u64 },
    /// The zstd stream is corrupt.
    #[error("zstd decompression failed: {0}")]
    Decompress(String),
    /// The zstd stream inflates past the declared size (a decompression bomb or
    /// a corrupt header); decompression stopped at the limit.
    #[error("payload decompresses to more than the declared {declared} bytes")]
    PayloadOverflow { declared: u64 },
    /// The zstd stream ends before the declared size.
    #[error("payload decompresses to {actual} bytes, header declares {declared}")]
    PayloadUnderflow { declared: u64, actual: u64 },
    /// The payload is not what the header's hash says.
    #[error("content hash mismatch: header says {expected}, payload hashes to {actual}")]
    HashMismatch { expected: String, actual: String },
    /// The payload is not valid MessagePack for the asset type.
    #[error("payload is not a valid {kind}: {message}")]
    Decode { kind: AssetKind, message: String },
    /// The asset decoded but its contents are inconsistent.
    #[error("invalid {kind}: {error}")]
    Invalid {
        kind: AssetKind,
        error: ValidationError,
    },
    /// Reading the bytes failed.
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
}

/// A semantic problem in a decoded asset or scene: which field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {problem}")]
pub struct ValidationError {
    /// Path of the offending field, e.g. `positions[12]` or `inertia`.
    pub field: String,
    /// What is wrong with it, e.g. `is NaN`.
    pub problem: String,
}

impl ValidationError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, problem: impl fmt::Display) -> Self {
        Self {
            field: field.into(),
            problem: problem.to_string(),
        }
    }
}

/// Why an asset could not be encoded.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The asset failed its own validation; invalid assets are never written.
    #[error("refusing to write an invalid {kind}: {error}")]
    Invalid {
        kind: AssetKind,
        error: ValidationError,
    },
    /// MessagePack serialization failed.
    #[error("cannot serialize {kind}: {message}")]
    Serialize { kind: AssetKind, message: String },
    /// The payload is larger than the format allows.
    #[error("payload of {size} bytes exceeds the format limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64 },
    /// zstd compression failed.
    #[error("zstd compression failed: {0}")]
    Compress(io::Error),
}

/// An error tied to the file it happened in. Displays as `path: problem`.
#[derive(Debug, Error)]
#[error("{}: {error}", path.display())]
pub struct FileError<E: std::error::Error> {
    /// The file, as the caller named it.
    pub path: PathBuf,
    /// What went wrong.
    pub error: E,
}

impl<E: std::error::Error> FileError<E> {
    /// Ties `error` to `path`.
    pub fn new(path: impl AsRef<Path>, error: E) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            error,
        }
    }
}

/// Reading or decoding a `.pellet` file failed.
pub type ReadError = FileError<DecodeError>;

/// Why writing a `.pellet` file failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WriteErrorKind {
    /// Encoding failed.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The file system refused.
    #[error("cannot write: {0}")]
    Io(#[from] io::Error),
}

/// Writing a `.pellet` file failed.
pub type WriteError = FileError<WriteErrorKind>;
