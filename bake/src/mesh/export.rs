//! Writes a [`TriMesh`] as glTF: a binary `.glb`, or a `.gltf` with its buffer
//! in a separate `.bin` or a data URI. Used to make test meshes and fixtures.

use base64::Engine as _;

use super::TriMesh;

/// Where a `.gltf` keeps its buffer.
#[derive(Debug, Clone)]
pub enum BufferUri {
    /// Inline as a base64 data URI.
    DataUri,
    /// In a file of this (relative) name next to the `.gltf`.
    File(String),
}

fn buffer_bytes(mesh: &TriMesh) -> (Vec<u8>, usize) {
    let mut bytes: Vec<u8> = bytemuck::cast_slice(&mesh.positions).to_vec();
    let positions_len = bytes.len();
    bytes.extend_from_slice(bytemuck::cast_slice(&mesh.triangles));
    (bytes, positions_len)
}

fn document(mesh: &TriMesh, uri: Option<&str>, buffer_len: usize, positions_len: usize) -> String {
    let (min, max) = mesh
        .bounds()
        .map_or(([0.0; 3], [0.0; 3]), |b| (b.min, b.max));
    let uri = uri.map_or(String::new(), |u| format!(r#""uri":"{u}","#));
    format!(
        r#"{{"asset":{{"version":"2.0","generator":"pellet-bake"}},"scene":0,"scenes":[{{"nodes":[0]}}],"nodes":[{{"mesh":0}}],"meshes":[{{"primitives":[{{"attributes":{{"POSITION":0}},"indices":1,"mode":4}}]}}],"buffers":[{{{uri}"byteLength":{buffer_len}}}],"bufferViews":[{{"buffer":0,"byteOffset":0,"byteLength":{positions_len},"target":34962}},{{"buffer":0,"byteOffset":{positions_len},"byteLength":{index_len},"target":34963}}],"accessors":[{{"bufferView":0,"componentType":5126,"count":{vertices},"type":"VEC3","min":{min:?},"max":{max:?}}},{{"bufferView":1,"componentType":5125,"count":{indices},"type":"SCALAR"}}]}}"#,
        index_len = buffer_len - positions_len,
        vertices = mesh.positions.len(),
        indices = mesh.triangles.len() * 3,
    )
}

/// The mesh as a binary glTF (`.glb`) file.
pub fn to_glb(mesh: &TriMesh) -> Vec<u8> {
    let (bin, positions_len) = buffer_bytes(mesh);
    let mut json = document(mesh, None, bin.len(), positions_len).into_bytes();
    while !json.len().is_multiple_of(4) {
        json.push(b' ');
    }
    let mut bin = bin;
    while !bin.len().is_multiple_of(4) {
        bin.push(0);
    }
    let total = 12 + 8 + json.len() + 8 + bin.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(b"glTF");
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(b"JSON");
    out.extend_from_slice(&json);
    out.extend_from_slice(&(bin.len() as u32).to_le_bytes());
    out.extend_from_slice(b"BIN\0");
    out.extend_from_slice(&bin);
    out
}

/// The mesh as a `.gltf` document plus, for [`BufferUri::File`], the bytes of
/// the `.bin` file to write next to it.
pub fn to_gltf(mesh: &TriMesh, buffer: &BufferUri) -> (String, Option<Vec<u8>>) {
    let (bin, positions_len) = buffer_bytes(mesh);
    match buffer {
        BufferUri::DataUri => {
            let uri = format!(
                "data:application/octet-stream;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(&bin)
            );
            (document(mesh, Some(&uri), bin.len(), positions_len), None)
        }
        BufferUri::File(name) => (
            document(mesh, Some(name), bin.len(), positions_len),
            Some(bin),
        ),
    }
}
