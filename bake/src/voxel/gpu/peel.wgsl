// Depth peeling along one grid axis. Each pass keeps, per pixel (= voxel
// column), the nearest surface strictly behind the previous layer, and writes
// its position along the axis in voxel units to an R32Float target.
// Keep PeelParams in sync with `PeelParams` in gpu/mod.rs.

struct PeelParams {
    origin: vec4<f32>,     // grid minimum corner, metres (w unused)
    voxel_size: f32,       // metres
    axis: u32,             // 0 = x, 1 = y, 2 = z: the viewing direction
    tile_u0: u32,          // first column of this tile along u = (axis + 1) % 3
    tile_v0: u32,          // first column along v = (axis + 2) % 3
    tile_w: u32,           // tile size in columns along u
    tile_h: u32,           // and along v
    depth_cells: u32,      // voxels along the axis
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: PeelParams;
@group(0) @binding(1) var previous_layer: texture_2d<f32>;

struct VertexOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) depth: f32,
}

// Grid coordinates (voxel units) rotated so that z is the viewing axis.
fn to_view(p: vec3<f32>) -> vec3<f32> {
    let g = (p - params.origin.xyz) / params.voxel_size;
    if params.axis == 0u {
        return vec3<f32>(g.y, g.z, g.x);
    }
    if params.axis == 1u {
        return vec3<f32>(g.z, g.x, g.y);
    }
    return g;
}

@vertex
fn vs_peel(@location(0) position: vec3<f32>) -> VertexOut {
    let g = to_view(position);
    var out: VertexOut;
    // Pixel i of the tile has its centre at column tile_u0 + i + 0.5.
    let x = (g.x - f32(params.tile_u0)) / f32(params.tile_w) * 2.0 - 1.0;
    let y = 1.0 - (g.y - f32(params.tile_v0)) / f32(params.tile_h) * 2.0;
    // The grid's depth range maps to [0.25, 0.75], clear of the clip planes.
    let z = g.z / f32(params.depth_cells) * 0.5 + 0.25;
    out.clip = vec4<f32>(x, y, z, 1.0);
    out.depth = g.z;
    return out;
}

@fragment
fn fs_peel(in: VertexOut) -> @location(0) vec4<f32> {
    let previous = textureLoad(previous_layer, vec2<i32>(in.clip.xy), 0).r;
    if in.depth <= previous {
        discard;
    }
    return vec4<f32>(in.depth, 0.0, 0.0, 0.0);
}
