//! The `.pellet` container: a fixed 80-byte header, then a zstd-compressed
//! MessagePack payload.
//!
//! ```text
//! offset size field
//!      0    8 magic             89 50 45 4C 4C 45 54 0A  ("\x89PELLET\n")
//!      8    2 format version    u16 LE, currently 1
//!     10    2 asset kind        u16 LE, see AssetKind
//!     12    4 flags             u32 LE, bit 0 = payload is zstd-compressed
//!     16    8 stored length     u64 LE, bytes of payload in the file
//!     24    8 payload length    u64 LE, bytes after decompression
//!     32   32 BLAKE3            hash of the uncompressed payload
//!     64   16 reserved          must be zero
//!     80    - payload
//! ```
//!
//! Decoding untrusted bytes runs in this order and stops at the first failure:
//! header fields, declared sizes against [`DecodeLimits`] (before anything is
//! allocated), file length against the stored length, bounded decompression
//! (never more than the declared length plus one byte), BLAKE3 check,
//! MessagePack decode, then the asset's own semantic validation.

use std::io::Read;

use serde::de::DeserializeOwned;

use crate::assets::{Asset, AssetKind};
use crate::error::{DecodeError, EncodeError};

/// The first eight bytes of every `.pellet` file. The high byte and the newline
/// catch 7-bit and line-ending mangling, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"\x89PELLET\n";
/// The format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 80;
/// Flag bit 0: the payload is a zstd frame (otherwise stored raw).
pub const FLAG_ZSTD: u32 = 1;
/// All flag bits this build understands.
pub const KNOWN_FLAGS: u32 = FLAG_ZSTD;
/// Offset and length of the reserved bytes.
const RESERVED: std::ops::Range<usize> = 64..80;
/// Default cap on the declared uncompressed payload: 1 GiB.
pub const DEFAULT_MAX_PAYLOAD: u64 = 1 << 30;
/// zstd level used when writing: a good ratio at several hundred MB/s.
pub const ZSTD_LEVEL: i32 = 3;
/// Largest zstd window accepted when reading: 2^24 = 16 MiB, so a crafted
/// frame cannot make the decoder reserve a huge window. Writers use level
/// [`ZSTD_LEVEL`], whose window is 2^21 at most; a writer that raises the
/// level must keep the window at or below this.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// Limits applied to untrusted input before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest accepted payload, compressed or not, in bytes. Default 1 GiB.
    pub max_payload: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            max_payload: DEFAULT_MAX_PAYLOAD,
        }
    }
}

/// The parsed fixed-size header of a `.pellet` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Format version the file was written with.
    pub version: u16,
    /// What the payload holds.
    pub kind: AssetKind,
    /// Flag bits, a subset of [`KNOWN_FLAGS`].
    pub flags: u32,
    /// Bytes of payload stored in the file (compressed length if zstd).
    pub stored_len: u64,
    /// Bytes of payload after decompression.
    pub payload_len: u64,
    /// BLAKE3 of the uncompressed payload.
    pub hash: [u8; 32],
}

impl Header {
    /// Parses and checks the first [`HEADER_LEN`] bytes of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let Some(head) = bytes.get(..HEADER_LEN) else {
            // A short file that does not even start like Pellet is "not Pellet",
            // which is the more useful message for e.g. an empty or text file.
            let n = bytes.len().min(MAGIC.len());
            if bytes[..n] != MAGIC[..n] || bytes.is_empty() {
                return Err(not_pellet(bytes));
            }
            return Err(DecodeError::TruncatedHeader {
                got: bytes.len() as u64,
                need: HEADER_LEN as u64,
            });
        };
        if head[..8] != MAGIC {
            return Err(not_pellet(head));
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        if version == 0 {
            return Err(DecodeError::VersionZero);
        }
        if version > FORMAT_VERSION {
            return Err(DecodeError::VersionTooNew {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let raw_kind = u16::from_le_bytes([head[10], head[11]]);
        let kind = AssetKind::from_u16(raw_kind).ok_or(DecodeError::UnknownKind(raw_kind))?;
        let flags = u32::from_le_bytes(array(&head[12..16]));
        if flags & !KNOWN_FLAGS != 0 {
            return Err(DecodeError::UnknownFlags(flags & !KNOWN_FLAGS));
        }
        if let Some(offset) = RESERVED.clone().find(|&i| head[i] != 0) {
            return Err(DecodeError::ReservedNotZero {
                offset,
                value: head[offset],
            });
        }
        Ok(Self {
            version,
            kind,
            flags,
            stored_len: u64::from_le_bytes(array(&head[16..24])),
            payload_len: u64::from_le_bytes(array(&head[24..32])),
            hash: array(&head[32..64]),
        })
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..10].copy_from_slice(&self.version.to_le_bytes());
        out[10..12].copy_from_slice(&(self.kind as u16).to_le_bytes());
        out[12..16].copy_from_slice(&self.flags.to_le_bytes());
        out[16..24].copy_from_slice(&self.stored_len.to_le_bytes());
        out[24..32].copy_from_slice(&self.payload_len.to_le_bytes());
        out[32..64].copy_from_slice(&self.hash);
        out
    }

    /// Whether the payload is zstd-compressed.
    pub fn is_compressed(&self) -> bool {
        self.flags & FLAG_ZSTD != 0
    }

    /// The payload hash as lower-case hex.
    pub fn hash_hex(&self) -> String {
        hex(&self.hash)
    }

    /// Checks the declared sizes against `limits`. Call before allocating.
    pub fn check_limits(&self, limits: &DecodeLimits) -> Result<(), DecodeError> {
        for (what, declared) in [
            ("uncompressed payload", self.payload_len),
            ("stored payload", self.stored_len),
        ] {
            if declared > limits.max_payload {
                return Err(DecodeError::TooLarge {
                    what,
                    declared,
                    limit: limits.max_payload,
                });
            }
        }
        if !self.is_compressed() && self.stored_len != self.payload_len {
            return Err(DecodeError::RawLengthMismatch {
                stored: self.stored_len,
                declared: self.payload_len,
            });
        }
        Ok(())
    }
}

/// Encodes `asset` into a complete `.pellet` byte string (validating it first).
pub fn encode<A: Asset>(asset: &A) -> Result<Vec<u8>, EncodeError> {
    asset.validate().map_err(|error| EncodeError::Invalid {
        kind: A::KIND,
        error,
    })?;
    let payload = rmp_serde::to_vec_named(asset).map_err(|e| EncodeError::Serialize {
        kind: A::KIND,
        message: e.to_string(),
    })?;
    encode_payload(A::KIND, &payload)
}

/// Wraps an already serialized MessagePack payload in a compressed container.
/// Deterministic: the same payload always gives the same bytes.
pub fn encode_payload(kind: AssetKind, payload: &[u8]) -> Result<Vec<u8>, EncodeError> {
    let payload_len = payload.len() as u64;
    if payload_len > DEFAULT_MAX_PAYLOAD {
        return Err(EncodeError::TooLarge {
            size: payload_len,
            limit: DEFAULT_MAX_PAYLOAD,
        });
    }
    let compressed = compress(payload)?;
    let header = Header {
        version: FORMAT_VERSION,
        kind,
        flags: FLAG_ZSTD,
        stored_len: compressed.len() as u64,
        payload_len,
        hash: *blake3::hash(payload).as_bytes(),
    };
    let mut out = Vec::with_capacity(HEADER_LEN + compressed.len());
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(&compressed);
    Ok(out)
}

/// Decodes and validates an asset of type `A` from untrusted bytes.
pub fn decode<A: Asset>(bytes: &[u8], limits: &DecodeLimits) -> Result<A, DecodeError> {
    let (header, payload) = open(bytes, limits)?;
    if header.kind != A::KIND {
        return Err(DecodeError::WrongKind {
            expected: A::KIND,
            found: header.kind,
        });
    }
    decode_payload(&payload)
}

/// Checks the header and hash of untrusted bytes and returns the header with
/// the uncompressed, hash-verified payload (not yet decoded).
pub fn open(bytes: &[u8], limits: &DecodeLimits) -> Result<(Header, Vec<u8>), DecodeError> {
    let header = Header::parse(bytes)?;
    header.check_limits(limits)?;
    let stored = &bytes[HEADER_LEN..];
    let actual = stored.len() as u64;
    if actual < header.stored_len {
        return Err(DecodeError::TruncatedPayload {
            declared: header.stored_len,
            actual,
        });
    }
    if actual > header.stored_len {
        return Err(DecodeError::TrailingBytes {
            extra: actual - header.stored_len,
        });
    }
    let payload = if header.is_compressed() {
        decompress_bounded(stored, header.payload_len)?
    } else {
        stored.to_vec()
    };
    let actual_hash = blake3::hash(&payload);
    if actual_hash.as_bytes() != &header.hash {
        return Err(DecodeError::HashMismatch {
            expected: header.hash_hex(),
            actual: actual_hash.to_hex().to_string(),
        });
    }
    Ok((header, payload))
}

/// Decodes a verified MessagePack payload into `A` and validates it.
pub fn decode_payload<A: Asset>(payload: &[u8]) -> Result<A, DecodeError> {
    let asset: A = decode_messagepack(A::KIND, payload)?;
    asset.validate().map_err(|error| DecodeError::Invalid {
        kind: A::KIND,
        error,
    })?;
    Ok(asset)
}

/// MessagePack decode only (no validation), mapping errors to [`DecodeError`].
pub(crate) fn decode_messagepack<T: DeserializeOwned>(
    kind: AssetKind,
    payload: &[u8],
) -> Result<T, DecodeError> {
    rmp_serde::from_slice(payload).map_err(|e| DecodeError::Decode {
        kind,
        message: e.to_string(),
    })
}

/// Compresses a payload: the C library at [`ZSTD_LEVEL`] natively; in the
/// browser (wasm32, where it does not build) ruzstd's fastest level, which
/// any zstd decoder reads.
#[cfg(not(target_arch = "wasm32"))]
fn compress(payload: &[u8]) -> Result<Vec<u8>, EncodeError> {
    zstd::bulk::compress(payload, ZSTD_LEVEL).map_err(EncodeError::Compress)
}

#[cfg(target_arch = "wasm32")]
fn compress(payload: &[u8]) -> Result<Vec<u8>, EncodeError> {
    Ok(ruzstd::encoding::compress_to_vec(
        payload,
        ruzstd::encoding::CompressionLevel::Fastest,
    ))
}

/// Inflates a zstd stream, reading at most `declared + 1` bytes of output so a
/// bomb stops at the declared size; the output must be exactly `declared` long.
/// The C library natively, the pure-Rust decoder in the browser.
#[cfg(not(target_arch = "wasm32"))]
fn decompress_bounded(stored: &[u8], declared: u64) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(stored)
        .map_err(|e| DecodeError::Decompress(e.to_string()))?;
    decoder
        .window_log_max(ZSTD_WINDOW_LOG_MAX)
        .map_err(|e| DecodeError::Decompress(e.to_string()))?;
    read_bounded(decoder, stored, declared)
}

#[cfg(target_arch = "wasm32")]
fn decompress_bounded(stored: &[u8], declared: u64) -> Result<Vec<u8>, DecodeError> {
    decompress_bounded_pure(stored, declared)
}

/// [`decompress_bounded`] with the pure-Rust decoder (ruzstd): the
/// browser's path, public so native tests hold it to the C library's
/// results. The same window cap ([`ZSTD_WINDOW_LOG_MAX`]), read from the
/// frame header before anything is allocated.
pub fn decompress_bounded_pure(stored: &[u8], declared: u64) -> Result<Vec<u8>, DecodeError> {
    let window = zstd_window_size(stored)?;
    if window > 1u64 << ZSTD_WINDOW_LOG_MAX {
        return Err(DecodeError::Decompress(format!(
            "frame window of {window} bytes exceeds the limit of {} bytes",
            1u64 << ZSTD_WINDOW_LOG_MAX
        )));
    }
    let decoder = ruzstd::decoding::StreamingDecoder::new(stored)
        .map_err(|e| DecodeError::Decompress(e.to_string()))?;
    read_bounded(decoder, stored, declared)
}

/// Reads `decoder` to at most `declared + 1` bytes; exactly `declared` is
/// the only success.
fn read_bounded(decoder: impl Read, stored: &[u8], declared: u64) -> Result<Vec<u8>, DecodeError> {
    // Reserve what the stored bytes can plausibly inflate to (not simply the
    // declared length, which a lying header could set to the limit for a tiny
    // file); the vector grows as real output arrives, up to `declared + 1`.
    let plausible = (stored.len() as u64).saturating_mul(8).max(64 << 10);
    let mut out = Vec::with_capacity(declared.min(plausible) as usize);
    decoder
        .take(declared.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| DecodeError::Decompress(e.to_string()))?;
    let actual = out.len() as u64;
    if actual > declared {
        return Err(DecodeError::PayloadOverflow { declared });
    }
    if actual < declared {
        return Err(DecodeError::PayloadUnderflow { declared, actual });
    }
    Ok(out)
}

/// The window size a zstd frame header declares (RFC 8878, 3.1.1.1), in
/// bytes: from the window descriptor, or for a single-segment frame its
/// content size.
fn zstd_window_size(stored: &[u8]) -> Result<u64, DecodeError> {
    let bad = |what: &str| DecodeError::Decompress(format!("zstd frame header: {what}"));
    if stored.get(..4) != Some(&[0x28, 0xB5, 0x2F, 0xFD][..]) {
        return Err(bad("not a zstd frame"));
    }
    let descriptor = *stored.get(4).ok_or_else(|| bad("truncated"))?;
    let single_segment = descriptor & 0x20 != 0;
    let mut at = 5;
    if !single_segment {
        let w = *stored.get(at).ok_or_else(|| bad("truncated"))?;
        let log = 10 + u64::from(w >> 3);
        let base = 1u64 << log;
        return Ok(base + (base / 8) * u64::from(w & 7));
    }
    at += [0, 1, 2, 4][usize::from(descriptor & 3)];
    let size_bytes = [1, 2, 4, 8][usize::from(descriptor >> 6)];
    let field = stored
        .get(at..at + size_bytes)
        .ok_or_else(|| bad("truncated"))?;
    let mut size = field
        .iter()
        .rev()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b));
    if size_bytes == 2 {
        size += 256;
    }
    Ok(size)
}

fn not_pellet(bytes: &[u8]) -> DecodeError {
    let shown = &bytes[..bytes.len().min(MAGIC.len())];
    DecodeError::NotPellet {
        found: if shown.is_empty() {
            "nothing (empty file)".to_owned()
        } else {
            escape(shown)
        },
        expected: escape(&MAGIC),
    }
}

/// `"\x89PELLET\n"`-style quoting of raw bytes.
fn escape(bytes: &[u8]) -> String {
    let inner: String = bytes
        .iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    format!("\"{inner}\"")
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(bytes);
    out
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
