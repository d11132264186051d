//! The neighbour-list file (`player nns --out`), documented in docs/nns.md:
//! little-endian, a 32-byte header then the CSR arrays.
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `PELLETNN` |
//! | 4 | version, 1 |
//! | 4 | reserved, 0 |
//! | 8 | points `n` |
//! | 8 | neighbours `m` (the length of `indices`) |
//! | 8 (n + 1) | `offsets`, u64: the neighbours of point `i` are `indices[offsets[i]..offsets[i + 1]]` |
//! | 4 m | `indices`, u32 input indices |

use std::io::{BufWriter, Read, Write};
use std::path::Path;

use super::Neighbours;

/// File magic.
pub const MAGIC: &[u8; 8] = b"PELLETNN";
/// File version.
pub const VERSION: u32 = 1;

/// Writes `lists` to `path` (through a temporary file, renamed at the end).
pub fn write_neighbours(path: &Path, lists: &Neighbours) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp-write");
    {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        w.write_all(MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&0u32.to_le_bytes())?;
        w.write_all(&(lists.len() as u64).to_le_bytes())?;
        w.write_all(&(lists.indices.len() as u64).to_le_bytes())?;
        for o in &lists.offsets {
            w.write_all(&o.to_le_bytes())?;
        }
        for chunk in lists.indices.chunks(1 << 16) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|i| i.to_le_bytes()).collect();
            w.write_all(&bytes)?;
        }
        w.flush()?;
    }
    std::fs::rename(&tmp, path)
}

/// Reads a file written by [`write_neighbours`], checking its structure.
pub fn read_neighbours(path: &Path) -> Result<Neighbours, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() < 32 || &bytes[..8] != MAGIC {
        return Err("not a Pellet neighbour-list file".into());
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or([0; 4]));
    if version != VERSION {
        return Err(format!("version {version}, this build reads {VERSION}"));
    }
    let (n, m) = (u64_at(16), u64_at(24));
    let expected = n
        .checked_add(1)
        .and_then(|k| k.checked_mul(8))
        .and_then(|o| m.checked_mul(4).and_then(|i| o.checked_add(i)))
        .and_then(|body| body.checked_add(32));
    if expected != Some(bytes.len() as u64) {
        return Err(format!(
            "{} bytes, but the header promises {n} points and {m} neighbours",
            bytes.len()
        ));
    }
    let offsets: Vec<u64> = (0..=n as usize).map(|i| u64_at(32 + 8 * i)).collect();
    if offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) || offsets[n as usize] != m {
        return Err("offsets are not increasing from 0 to the neighbour count".into());
    }
    let base = 32 + 8 * (n as usize + 1);
    let indices: Vec<u32> = bytes[base..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if let Some(bad) = indices.iter().find(|&&i| u64::from(i) >= n) {
        return Err(format!("index {bad} is not a point (there are {n})"));
    }
    Ok(Neighbours { offsets, indices })
}

/// Writes each point's neighbour count, one line per point, in input order.
pub fn write_counts(path: &Path, lists: &Neighbours) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    for pair in lists.offsets.windows(2) {
        writeln!(w, "{}", pair[1] - pair[0])?;
    }
    w.flush()
}
