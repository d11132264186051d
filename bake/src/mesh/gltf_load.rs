//! glTF 2.0 loading (`.glb`, and `.gltf` with `.bin` files or data URIs).
//!
//! The `gltf` crate parses and validates the document; buffers and accessors
//! are read here, with every offset, stride and count checked against the
//! bytes really present, so a malformed file is an error and never a panic.

use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use gltf::accessor::{DataType, Dimensions};
use gltf::mesh::Mode;
use pellet_formats::io::{FileReadError, read_regular_file};
use thiserror::Error;

use super::TriMesh;

/// Most triangles a mesh may have (2^26 = 67 M).
pub const MAX_TRIANGLES: usize = 1 << 26;
/// Largest mesh or buffer file read, bytes (2 GiB).
pub const MAX_FILE_BYTES: u64 = 2 << 30;
/// Deepest node hierarchy followed.
const MAX_NODE_DEPTH: usize = 64;

/// Why a mesh could not be loaded. Wrapped with the file name by
/// [`load_mesh`]'s caller as `bunny.glb: problem`.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MeshError {
    /// The file could not be read: missing, unreadable, not a regular file
    /// (a device, FIFO or folder, refused before it is opened), or larger
    /// than [`MAX_FILE_BYTES`] (refused before it is read).
    #[error("{0}")]
    File(FileReadError),
    /// Not valid glTF (or a truncated GLB).
    #[error("not a valid glTF 2.0 file: {0}")]
    Gltf(String),
    /// A buffer URI points somewhere it may not.
    #[error("buffer {buffer} has URI {uri:?}, which {reason}")]
    ForbiddenUri {
        /// Buffer index.
        buffer: usize,
        /// The URI as written.
        uri: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A buffer's data could not be read.
    #[error("buffer {buffer} ({uri}): {message}")]
    Buffer {
        /// Buffer index.
        buffer: usize,
        /// Where it was supposed to come from.
        uri: String,
        /// What went wrong.
        message: String,
    },
    /// A buffer holds fewer bytes than the document declares.
    #[error("buffer {buffer} holds {actual} bytes but the document declares {declared}")]
    ShortBuffer {
        /// Buffer index.
        buffer: usize,
        /// Declared length.
        declared: usize,
        /// Bytes present.
        actual: usize,
    },
    /// There is no scene to take meshes from.
    #[error("the file has no scene")]
    NoScene,
    /// Node hierarchy too deep or cyclic.
    #[error("node {0} is nested more than {MAX_NODE_DEPTH} levels deep (or in a cycle)")]
    NodeDepth(usize),
    /// A primitive is not made of triangles.
    #[error("{place} draws {mode}; only triangles can be voxelized")]
    NotTriangles {
        /// `mesh "name" primitive 2`.
        place: String,
        /// `points`, `lines`, ...
        mode: &'static str,
    },
    /// A primitive has no POSITION attribute.
    #[error("{0} has no POSITION attribute")]
    MissingPositions(String),
    /// An accessor is malformed or points outside its data.
    #[error("{place}: {problem}")]
    Accessor {
        /// Where.
        place: String,
        /// What.
        problem: String,
    },
    /// A vertex coordinate is NaN or infinite.
    #[error("{place} vertex {vertex} is {value:?}, which is not finite")]
    NonFinite {
        /// Where.
        place: String,
        /// Vertex index.
        vertex: usize,
        /// Its coordinates after transforms.
        value: [f32; 3],
    },
    /// An index refers past the vertex list.
    #[error("{place} index {index} refers to vertex {vertex}, but there are {vertices}")]
    IndexOutOfRange {
        /// Where.
        place: String,
        /// Index position.
        index: usize,
        /// The value.
        vertex: u32,
        /// Vertex count.
        vertices: usize,
    },
    /// No triangles at all.
    #[error("the default scene contains no triangles")]
    Empty,
    /// Too many triangles.
    #[error("the mesh has more than {MAX_TRIANGLES} triangles")]
    TooManyTriangles,
}

/// Loads every triangle primitive of the default scene (or the first scene),
/// with node transforms applied, as one triangle soup.
pub fn load_mesh(path: &Path) -> Result<TriMesh, MeshError> {
    load_mesh_hashed(path).map(|(mesh, _)| mesh)
}

/// [`load_mesh`], plus the BLAKE3 (hex) of every byte it read: the file and
/// any external buffer files, so an edit to either makes a bake stale.
///
/// The mesh and its buffer files must be regular files of at most
/// [`MAX_FILE_BYTES`]: devices (`/dev/zero`), FIFOs and folders are refused
/// before they are opened, so loading never blocks or reads without bound.
pub fn load_mesh_hashed(path: &Path) -> Result<(TriMesh, String), MeshError> {
    load_mesh_with_files(path).map(|(mesh, hash, _)| (mesh, hash))
}

/// [`load_mesh_hashed`], plus every file it read: `path` first, then the
/// external buffer files (so a caller can refuse to overwrite any of them).
pub fn load_mesh_with_files(path: &Path) -> Result<(TriMesh, String, Vec<PathBuf>), MeshError> {
    let bytes = read_regular_file(path, MAX_FILE_BYTES).map_err(MeshError::File)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes);
    let gltf = parse(&bytes)?;
    let folder = path.parent().unwrap_or(Path::new("."));
    let mut files = vec![path.to_path_buf()];
    let buffers = load_buffers(&gltf, folder, &mut files)?;
    for (buffer, data) in gltf.document.buffers().zip(&buffers) {
        if matches!(buffer.source(), gltf::buffer::Source::Uri(_)) {
            hasher.update(data);
        }
    }
    let scene = gltf
        .document
        .default_scene()
        .or_else(|| gltf.document.scenes().next())
        .ok_or(MeshError::NoScene)?;
    let mut mesh = TriMesh::default();
    for node in scene.nodes() {
        visit(&node, IDENTITY, 0, &buffers, &mut mesh)?;
    }
    if mesh.triangles.is_empty() {
        return Err(MeshError::Empty);
    }
    Ok((mesh, hasher.finalize().to_hex().to_string(), files))
}

/// Parses and validates the document. `gltf-json`'s validator indexes the
/// POSITION accessor before checking that it exists (and panics when it does
/// not), so accessor references are checked here first.
fn parse(bytes: &[u8]) -> Result<gltf::Gltf, MeshError> {
    let raw = gltf::Gltf::from_slice_without_validation(bytes)
        .map_err(|e| MeshError::Gltf(e.to_string()))?;
    let root = raw.document.into_json();
    let accessors = root.accessors.len();
    for (m, mesh) in root.meshes.iter().enumerate() {
        for (p, primitive) in mesh.primitives.iter().enumerate() {
            let references = primitive
                .attributes
                .values()
                .chain(primitive.indices.as_ref());
            if let Some(bad) = references.map(|i| i.value()).find(|&i| i >= accessors) {
                return Err(MeshError::Gltf(format!(
                    "meshes[{m}].primitives[{p}] names accessor {bad}, but there are {accessors}"
                )));
            }
        }
    }
    let document = gltf::Document::from_json(root).map_err(|e| MeshError::Gltf(e.to_string()))?;
    Ok(gltf::Gltf {
        document,
        blob: raw.blob,
    })
}

fn load_buffers(
    gltf: &gltf::Gltf,
    folder: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<Vec<Vec<u8>>, MeshError> {
    let mut out = Vec::new();
    for buffer in gltf.document.buffers() {
        let index = buffer.index();
        let data = match buffer.source() {
            gltf::buffer::Source::Bin => gltf.blob.clone().ok_or_else(|| MeshError::Buffer {
                buffer: index,
                uri: "GLB binary chunk".into(),
                message: "the file has no binary chunk".into(),
            })?,
            gltf::buffer::Source::Uri(uri) => read_uri(index, uri, folder, files)?,
        };
        if data.len() < buffer.length() {
            return Err(MeshError::ShortBuffer {
                buffer: index,
                declared: buffer.length(),
                actual: data.len(),
            });
        }
        out.push(data);
    }
    Ok(out)
}

/// Reads a buffer URI: a base64 data URI, or a relative path inside `folder`
/// (a regular file of at most [`MAX_FILE_BYTES`], added to `files`).
fn read_uri(
    buffer: usize,
    uri: &str,
    folder: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<Vec<u8>, MeshError> {
    if let Some(rest) = uri.strip_prefix("data:") {
        let (_, payload) = rest
            .split_once(";base64,")
            .ok_or_else(|| MeshError::ForbiddenUri {
                buffer,
                uri: shorten(uri),
                reason: "is a data URI without base64 data",
            })?;
        return base64::engine::general_purpose::STANDARD
            .decode(payload)
            .map_err(|e| MeshError::Buffer {
                buffer,
                uri: "data URI".into(),
                message: format!("bad base64: {e}"),
            });
    }
    let forbid = |reason| MeshError::ForbiddenUri {
        buffer,
        uri: shorten(uri),
        reason,
    };
    if uri.contains("://") || uri.split('/').next().is_some_and(|s| s.contains(':')) {
        return Err(forbid(
            "is not a file inside the mesh's folder (only relative paths and data URIs are read)",
        ));
    }
    let decoded = percent_decode(uri).ok_or_else(|| forbid("has invalid percent-encoding"))?;
    let relative = PathBuf::from(&decoded);
    for component in relative.components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(forbid("leaves the mesh's folder with `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(forbid("is an absolute path")),
        }
    }
    let path = folder.join(&relative);
    let bytes = read_regular_file(&path, MAX_FILE_BYTES).map_err(|e| MeshError::Buffer {
        buffer,
        uri: decoded.clone(),
        message: e.to_string(),
    })?;
    files.push(path);
    Ok(bytes)
}

fn shorten(uri: &str) -> String {
    if uri.chars().count() > 60 {
        format!("{}...", uri.chars().take(60).collect::<String>())
    } else {
        uri.to_owned()
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

type Mat4 = [[f64; 4]; 4];
const IDENTITY: Mat4 = [
    [1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0],
    [0.0, 0.0, 0.0, 1.0],
];

/// `a * b` for column-major matrices (`m[column][row]`).
fn mul(a: &Mat4, b: &Mat4) -> Mat4 {
    std::array::from_fn(|c| std::array::from_fn(|r| (0..4).map(|k| a[k][r] * b[c][k]).sum()))
}

fn transform_point(m: &Mat4, p: [f32; 3]) -> [f32; 3] {
    std::array::from_fn(|r| {
        (m[0][r] * f64::from(p[0])
            + m[1][r] * f64::from(p[1])
            + m[2][r] * f64::from(p[2])
            + m[3][r]) as f32
    })
}

fn visit(
    node: &gltf::Node<'_>,
    parent: Mat4,
    depth: usize,
    buffers: &[Vec<u8>],
    out: &mut TriMesh,
) -> Result<(), MeshError> {
    if depth > MAX_NODE_DEPTH {
        return Err(MeshError::NodeDepth(node.index()));
    }
    let local = node.transform().matrix().map(|c| c.map(f64::from));
    let world = mul(&parent, &local);
    if let Some(mesh) = node.mesh() {
        for primitive in mesh.primitives() {
            let place = match mesh.name() {
                Some(name) => format!("mesh {name:?} primitive {}", primitive.index()),
                None => format!("mesh {} primitive {}", mesh.index(), primitive.index()),
            };
            add_primitive(&place, &primitive, &world, buffers, out)?;
        }
    }
    for child in node.children() {
        visit(&child, world, depth + 1, buffers, out)?;
    }
    Ok(())
}

fn add_primitive(
    place: &str,
    primitive: &gltf::Primitive<'_>,
    world: &Mat4,
    buffers: &[Vec<u8>],
    out: &mut TriMesh,
) -> Result<(), MeshError> {
    let mode = primitive.mode();
    let mode_name = match mode {
        Mode::Points => "points",
        Mode::Lines => "lines",
        Mode::LineLoop => "a line loop",
        Mode::LineStrip => "a line strip",
        Mode::Triangles | Mode::TriangleStrip | Mode::TriangleFan => "",
    };
    if !mode_name.is_empty() {
        return Err(MeshError::NotTriangles {
            place: place.to_owned(),
            mode: mode_name,
        });
    }
    let positions_accessor = primitive
        .get(&gltf::Semantic::Positions)
        .ok_or_else(|| MeshError::MissingPositions(place.to_owned()))?;
    let positions = read_positions(place, &positions_accessor, buffers)?;
    let base = out.positions.len();
    for (i, p) in positions.iter().enumerate() {
        let w = transform_point(world, *p);
        if !(p.iter().all(|c| c.is_finite()) && w.iter().all(|c| c.is_finite())) {
            return Err(MeshError::NonFinite {
                place: place.to_owned(),
                vertex: i,
                value: *p,
            });
        }
        out.positions.push(w);
    }
    let indices: Vec<u32> = match primitive.indices() {
        Some(accessor) => read_indices(place, &accessor, buffers)?,
        None => (0..positions.len() as u32).collect(),
    };
    if let Some((index, &vertex)) = indices
        .iter()
        .enumerate()
        .find(|&(_, &v)| v as usize >= positions.len())
    {
        return Err(MeshError::IndexOutOfRange {
            place: place.to_owned(),
            index,
            vertex,
            vertices: positions.len(),
        });
    }
    let tri = |a: u32, b: u32, c: u32| [a, b, c].map(|i| base as u32 + i);
    let n = indices.len();
    match mode {
        Mode::TriangleStrip => {
            for i in 0..n.saturating_sub(2) {
                let (a, b, c) = (indices[i], indices[i + 1], indices[i + 2]);
                out.triangles.push(if i % 2 == 0 {
                    tri(a, b, c)
                } else {
                    tri(b, a, c)
                });
            }
        }
        Mode::TriangleFan => {
            for i in 1..n.saturating_sub(1) {
                out.triangles
                    .push(tri(indices[0], indices[i], indices[i + 1]));
            }
        }
        _ => {
            for t in indices.chunks_exact(3) {
                out.triangles.push(tri(t[0], t[1], t[2]));
            }
        }
    }
    if out.triangles.len() > MAX_TRIANGLES {
        return Err(MeshError::TooManyTriangles);
    }
    Ok(())
}

/// The bytes of an accessor's elements: checks the view, stride and count
/// against the buffer actually present. Returns `(data, stride)`.
fn accessor_bytes<'b>(
    place: &str,
    what: &str,
    accessor: &gltf::Accessor<'_>,
    element: usize,
    buffers: &'b [Vec<u8>],
) -> Result<(&'b [u8], usize), MeshError> {
    let err = |problem: String| MeshError::Accessor {
        place: place.to_owned(),
        problem: format!("{what} accessor {}: {problem}", accessor.index()),
    };
    if accessor.sparse().is_some() {
        return Err(err("sparse accessors are not supported".into()));
    }
    let view = accessor
        .view()
        .ok_or_else(|| err("has no buffer view".into()))?;
    let buffer = buffers
        .get(view.buffer().index())
        .ok_or_else(|| err("names a missing buffer".into()))?;
    let view_end = view
        .offset()
        .checked_add(view.length())
        .filter(|&e| e <= buffer.len())
        .ok_or_else(|| {
            err(format!(
                "buffer view {} reaches past its buffer",
                view.index()
            ))
        })?;
    let view_bytes = &buffer[view.offset()..view_end];
    let stride = view.stride().unwrap_or(element);
    if stride < element {
        return Err(err(format!(
            "stride {stride} is less than the element size {element}"
        )));
    }
    let count = accessor.count();
    if count == 0 {
        return Ok((&[], stride));
    }
    let end = stride
        .checked_mul(count - 1)
        .and_then(|x| x.checked_add(element))
        .and_then(|x| x.checked_add(accessor.offset()))
        .filter(|&e| e <= view_bytes.len())
        .ok_or_else(|| {
            err(format!(
                "{count} elements reach past buffer view {}",
                view.index()
            ))
        })?;
    Ok((&view_bytes[accessor.offset()..end], stride))
}

fn read_positions(
    place: &str,
    accessor: &gltf::Accessor<'_>,
    buffers: &[Vec<u8>],
) -> Result<Vec<[f32; 3]>, MeshError> {
    if accessor.data_type() != DataType::F32 || accessor.dimensions() != Dimensions::Vec3 {
        return Err(MeshError::Accessor {
            place: place.to_owned(),
            problem: format!(
                "POSITION accessor {} is {:?} {:?}; glTF requires float VEC3",
                accessor.index(),
                accessor.data_type(),
                accessor.dimensions()
            ),
        });
    }
    let (bytes, stride) = accessor_bytes(place, "POSITION", accessor, 12, buffers)?;
    Ok((0..accessor.count())
        .map(|i| {
            let e = &bytes[i * stride..i * stride + 12];
            std::array::from_fn(|k| {
                f32::from_le_bytes([e[4 * k], e[4 * k + 1], e[4 * k + 2], e[4 * k + 3]])
            })
        })
        .collect())
}

fn read_indices(
    place: &str,
    accessor: &gltf::Accessor<'_>,
    buffers: &[Vec<u8>],
) -> Result<Vec<u32>, MeshError> {
    let size = match (accessor.data_type(), accessor.dimensions()) {
        (DataType::U8, Dimensions::Scalar) => 1,
        (DataType::U16, Dimensions::Scalar) => 2,
        (DataType::U32, Dimensions::Scalar) => 4,
        (t, d) => {
            return Err(MeshError::Accessor {
                place: place.to_owned(),
                problem: format!(
                    "index accessor {} is {t:?} {d:?}; indices must be unsigned scalars",
                    accessor.index()
                ),
            });
        }
    };
    let (bytes, stride) = accessor_bytes(place, "index", accessor, size, buffers)?;
    Ok((0..accessor.count())
        .map(|i| {
            let e = &bytes[i * stride..i * stride + size];
            match size {
                1 => u32::from(e[0]),
                2 => u32::from(u16::from_le_bytes([e[0], e[1]])),
                _ => u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
            }
        })
        .collect())
}
