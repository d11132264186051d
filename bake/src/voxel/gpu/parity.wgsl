// Marks voxels inside by the parity of peeled layers in front of their centre,
// for one tile of columns along one axis. Output: per column, ceil(D / 32)
// words of bits along the axis (the axis-local layout read by vote.wgsl).
// Keep ParityParams in sync with `ParityParams` in gpu/mod.rs.
// CPU twin: `cpu::axis_parity` (same rule: count layers with depth < k + 0.5).

struct ParityParams {
    tile_u0: u32,
    tile_v0: u32,
    tile_w: u32,
    tile_h: u32,
    columns_u: u32,      // grid columns along u (for the global column index)
    depth_cells: u32,    // voxels along the axis
    layers: u32,         // layers peeled in this tile
    row_floats: u32,     // floats per row of a layer (rows padded to 256 bytes)
    layer_floats: u32,   // floats per layer
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: ParityParams;
@group(0) @binding(1) var<storage, read> layers: array<f32>;
@group(0) @binding(2) var<storage, read_write> axis_bits: array<u32>;

@compute @workgroup_size(8, 8)
fn parity(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= params.tile_w || id.y >= params.tile_h {
        return;
    }
    let pixel = id.y * params.row_floats + id.x;
    let column = (params.tile_u0 + id.x) + params.columns_u * (params.tile_v0 + id.y);
    let words = (params.depth_cells + 31u) / 32u;
    var crossed = 0u;
    var word = 0u;
    for (var k = 0u; k < params.depth_cells; k++) {
        let centre = f32(k) + 0.5;
        while crossed < params.layers && layers[crossed * params.layer_floats + pixel] < centre {
            crossed++;
        }
        if (crossed & 1u) == 1u {
            word |= 1u << (k & 31u);
        }
        if (k & 31u) == 31u || k + 1u == params.depth_cells {
            axis_bits[column * words + k / 32u] = word;
            word = 0u;
        }
    }
}
