//! Point sets for neighbour search and model validation: positions only.
//!
//! Three encodings, chosen by the file name:
//! - `*.f32`: raw little-endian `f32` triples `x y z`, 12 bytes per point
//!   (the fast path for tens of millions of points);
//! - `*.pellet`: a simulation state (`player run --save`); its positions;
//! - anything else: CSV lines `x,y,z` (further columns are ignored, `#`
//!   starts a comment, one header line is allowed).
//!
//! Every coordinate must be finite. Errors name the file and, for CSV, the line.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::assets::SimState;
use crate::container::DecodeLimits;

/// Why a point file could not be read.
#[derive(Debug, Error)]
#[error("{}{}: {reason}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct PointsError {
    /// The file.
    pub path: PathBuf,
    /// The 1-based line, for CSV.
    pub line: Option<usize>,
    /// What is wrong, a lower-case fragment.
    pub reason: String,
}

impl PointsError {
    fn new(path: &Path, line: Option<usize>, reason: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            line,
            reason: reason.into(),
        }
    }
}

/// Reads the points of `path` (see the module docs for the encodings).
pub fn read_points(path: &Path) -> Result<Vec<[f32; 3]>, PointsError> {
    crate::io::regular_file_metadata(path).map_err(|e| {
        let reason = match e {
            crate::io::FileReadError::Io(io) => format!("cannot open: {io}"),
            other => other.to_string(),
        };
        PointsError::new(path, None, reason)
    })?;
    let file = std::fs::File::open(path)
        .map_err(|e| PointsError::new(path, None, format!("cannot open: {e}")))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let points = match ext {
        "f32" => read_f32(path, file, len)?,
        "pellet" => {
            let limits = DecodeLimits {
                max_payload: 16 << 30,
            };
            let state: SimState = crate::io::read_asset(path, &limits)
                .map_err(|e| PointsError::new(path, None, strip_path(path, &e.to_string())))?;
            state.positions.to_vec()
        }
        _ => read_csv(path, std::io::BufReader::new(file))?,
    };
    if let Some(i) = points.iter().position(|p| p.iter().any(|x| !x.is_finite())) {
        return Err(PointsError::new(
            path,
            None,
            format!("point {i} has a coordinate that is not finite"),
        ));
    }
    Ok(points)
}

/// `read_asset`'s messages start with the path already.
fn strip_path(path: &Path, message: &str) -> String {
    let prefix = format!("{}: ", path.display());
    message.strip_prefix(&prefix).unwrap_or(message).to_string()
}

fn read_f32(path: &Path, mut file: std::fs::File, len: u64) -> Result<Vec<[f32; 3]>, PointsError> {
    if !len.is_multiple_of(12) {
        return Err(PointsError::new(
            path,
            None,
            format!("is {len} bytes, not a whole number of 12-byte x,y,z f32 triples"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| PointsError::new(path, None, format!("cannot read: {e}")))?;
    if bytes.len() as u64 != len {
        return Err(PointsError::new(path, None, "changed while it was read"));
    }
    Ok(bytes
        .chunks_exact(12)
        .map(|c| {
            std::array::from_fn(|k| {
                f32::from_le_bytes([c[4 * k], c[4 * k + 1], c[4 * k + 2], c[4 * k + 3]])
            })
        })
        .collect())
}

fn read_csv(path: &Path, reader: impl BufRead) -> Result<Vec<[f32; 3]>, PointsError> {
    let mut out = Vec::new();
    let mut seen_data = false;
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let raw = line.map_err(|e| PointsError::new(path, Some(line_no), e.to_string()))?;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let parsed: Result<Vec<f32>, _> = fields.iter().take(3).map(|f| f.parse::<f32>()).collect();
        match parsed {
            Ok(v) if v.len() == 3 => {
                out.push([v[0], v[1], v[2]]);
                seen_data = true;
            }
            Ok(v) => {
                return Err(PointsError::new(
                    path,
                    Some(line_no),
                    format!("has {} fields, expected x,y,z", v.len()),
                ));
            }
            Err(_)
                if !seen_data
                    && fields
                        .iter()
                        .all(|f| f.chars().all(|c| c.is_alphanumeric() || c == '_')) =>
            {
                seen_data = true; // one header line
            }
            Err(e) => {
                return Err(PointsError::new(
                    path,
                    Some(line_no),
                    format!("{line:?} is not numbers: {e}"),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn csv_with_header_comments_and_extra_columns() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "p.csv",
            b"x,y,z,radius\n# a comment\n1,2,3,0.1\n\n-4.5, 5e-1 ,6 # tail\n",
        );
        assert_eq!(
            read_points(&p).unwrap(),
            vec![[1.0, 2.0, 3.0], [-4.5, 0.5, 6.0]]
        );
    }

    #[test]
    fn csv_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "p.csv", b"1,2,3\n1,2\n");
        let e = read_points(&p).unwrap_err().to_string();
        assert!(e.ends_with("p.csv:2: has 2 fields, expected x,y,z"), "{e}");
        let p = write(dir.path(), "q.csv", b"1,2,3\n1,x,3\n");
        let e = read_points(&p).unwrap_err().to_string();
        assert!(e.contains("q.csv:2: \"1,x,3\" is not numbers"), "{e}");
        let p = write(dir.path(), "n.csv", b"1,2,NaN\n");
        let e = read_points(&p).unwrap_err().to_string();
        assert!(
            e.contains("point 0 has a coordinate that is not finite"),
            "{e}"
        );
    }

    #[test]
    fn raw_f32_triples() {
        let dir = tempfile::tempdir().unwrap();
        let values = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let p = write(dir.path(), "p.f32", &bytes);
        assert_eq!(
            read_points(&p).unwrap(),
            vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
        );
        let p = write(dir.path(), "bad.f32", &bytes[..13]);
        let e = read_points(&p).unwrap_err().to_string();
        assert!(e.contains("13 bytes, not a whole number"), "{e}");
    }

    #[test]
    fn missing_and_corrupt_files() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_points(&dir.path().join("none.csv"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.csv: cannot open"), "{e}");
        let p = write(dir.path(), "s.pellet", b"not a pellet file at all");
        let e = read_points(&p).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
        assert!(!e[p.display().to_string().len() + 2..].starts_with(&p.display().to_string()));
    }
}
