// Majority of the three axes' parity for each voxel, written in grid order
// (x fastest, 32 voxels per word), and the number of voxels where the axes
// did not all agree. CPU twin: `voxel::vote`.
// Keep VoteParams in sync with `VoteParams` in gpu/mod.rs.

struct VoteParams {
    dims: vec4<u32>,     // voxels along x, y, z (w unused)
    words: u32,          // output words
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: VoteParams;
@group(0) @binding(1) var<storage, read> bits_x: array<u32>;
@group(0) @binding(2) var<storage, read> bits_y: array<u32>;
@group(0) @binding(3) var<storage, read> bits_z: array<u32>;
@group(0) @binding(4) var<storage, read_write> grid: array<u32>;
@group(0) @binding(5) var<storage, read_write> disagreements: atomic<u32>;

fn axis_bit(axis: u32, c: vec3<u32>) -> u32 {
    // Column along u = (axis + 1) % 3, v = (axis + 2) % 3; position k along the axis.
    var u = 0u;
    var v = 0u;
    var k = 0u;
    var nu = 0u;
    var d = 0u;
    if axis == 0u {
        u = c.y; v = c.z; k = c.x; nu = params.dims.y; d = params.dims.x;
    } else if axis == 1u {
        u = c.z; v = c.x; k = c.y; nu = params.dims.z; d = params.dims.y;
    } else {
        u = c.x; v = c.y; k = c.z; nu = params.dims.x; d = params.dims.z;
    }
    let words = (d + 31u) / 32u;
    let index = (u + nu * v) * words + k / 32u;
    var w = 0u;
    if axis == 0u {
        w = bits_x[index];
    } else if axis == 1u {
        w = bits_y[index];
    } else {
        w = bits_z[index];
    }
    return (w >> (k & 31u)) & 1u;
}

@compute @workgroup_size(64)
fn vote(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let w = gid.x + gid.y * groups.x * 64u;
    if w >= params.words {
        return;
    }
    let total = params.dims.x * params.dims.y * params.dims.z;
    var out = 0u;
    var differ = 0u;
    for (var b = 0u; b < 32u; b++) {
        let i = w * 32u + b;
        if i >= total {
            break;
        }
        let c = vec3<u32>(i % params.dims.x, (i / params.dims.x) % params.dims.y, i / (params.dims.x * params.dims.y));
        let x = axis_bit(0u, c);
        let y = axis_bit(1u, c);
        let z = axis_bit(2u, c);
        if x + y + z >= 2u {
            out |= 1u << b;
        }
        if x != y || x != z {
            differ++;
        }
    }
    grid[w] = out;
    if differ > 0u {
        atomicAdd(&disagreements, differ);
    }
}
