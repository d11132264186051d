//! `bake inspect`: the header and a summary of any `.pellet` file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use pellet_formats::assets::Summary;
use pellet_formats::container::HEADER_LEN;
use pellet_formats::io::read_any;
use pellet_formats::{AnyAsset, AssetKind, DecodeLimits, Header};

use crate::BakeError;

/// What `bake inspect` reports about one file.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// The file as named on the command line.
    pub path: PathBuf,
    /// The container header.
    pub header: HeaderReport,
    /// Kind-specific facts.
    pub summary: Summary,
    /// For neighbour-overlap tables: every stored entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<TableEntry>>,
}

/// One stored entry of a neighbour-overlap table.
#[derive(Debug, Clone, Serialize)]
pub struct TableEntry {
    /// Ratio eps / l.
    pub ratio: f32,
    /// Canonical offset (0 <= dx <= dy <= dz).
    pub offset: [i8; 3],
    /// Mean overlap, cell volumes.
    pub value: f32,
    /// Standard error.
    pub stderr: f32,
}

/// The header fields, in JSON-friendly form.
#[derive(Debug, Clone, Serialize)]
pub struct HeaderReport {
    /// Format version.
    pub version: u16,
    /// Asset kind identifier (`particle_body`, ...).
    pub kind: &'static str,
    /// Asset kind number in the header.
    pub kind_id: u16,
    /// Raw flag bits.
    pub flags: u32,
    /// Whether the payload is zstd-compressed.
    pub compressed: bool,
    /// File size, bytes.
    pub file_bytes: u64,
    /// Stored payload, bytes.
    pub stored_bytes: u64,
    /// Uncompressed payload, bytes.
    pub payload_bytes: u64,
    /// BLAKE3 of the uncompressed payload, hex.
    pub payload_blake3: String,
}

impl HeaderReport {
    fn new(h: &Header) -> Self {
        Self {
            version: h.version,
            kind: h.kind.ident(),
            kind_id: h.kind as u16,
            flags: h.flags,
            compressed: h.is_compressed(),
            file_bytes: HEADER_LEN as u64 + h.stored_len,
            stored_bytes: h.stored_len,
            payload_bytes: h.payload_len,
            payload_blake3: h.hash_hex(),
        }
    }
}

/// Reads, verifies and summarizes `path` (any asset kind).
pub fn inspect(path: &Path, limits: &DecodeLimits) -> Result<Inspection, BakeError> {
    let (header, asset) = read_any(path, limits)?;
    let entries = match &asset {
        AnyAsset::OverlapTable(t) => Some(
            t.ratios
                .iter()
                .enumerate()
                .flat_map(|(r, &ratio)| {
                    t.offsets.iter().enumerate().map(move |(o, &offset)| {
                        let i = r * t.offsets.len() + o;
                        TableEntry {
                            ratio,
                            offset,
                            value: t.values[i],
                            stderr: t.stderr[i],
                        }
                    })
                })
                .collect(),
        ),
        _ => None,
    };
    Ok(Inspection {
        path: path.to_path_buf(),
        header: HeaderReport::new(&header),
        summary: asset.summary(),
        entries,
    })
}

impl Inspection {
    /// The human-readable report: aligned `key  value` lines.
    pub fn to_text(&self) -> String {
        let h = &self.header;
        let kind = AssetKind::from_u16(h.kind_id).map_or("?", AssetKind::name);
        let ratio = if h.stored_bytes > 0 {
            h.payload_bytes as f64 / h.stored_bytes as f64
        } else {
            0.0
        };
        let mut rows: Vec<(String, String)> = vec![
            ("file".into(), self.path.display().to_string()),
            ("kind".into(), format!("{kind} ({})", h.kind)),
            ("format version".into(), h.version.to_string()),
            (
                "payload".into(),
                format!(
                    "{} bytes, stored as {} bytes{} ({ratio:.1}x)",
                    h.payload_bytes,
                    h.stored_bytes,
                    if h.compressed { " of zstd" } else { " raw" }
                ),
            ),
            ("blake3".into(), format!("{} (verified)", h.payload_blake3)),
        ];
        rows.extend(
            self.summary
                .0
                .iter()
                .map(|(k, v)| (k.replace('_', " "), v.to_string())),
        );
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (k, v) in rows {
            let _ = writeln!(out, "{k:<width$}  {v}");
        }
        out
    }
}
