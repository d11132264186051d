// Epsilon-neighbour search of one block (a box of grid cells) on the GPU.
// CPU twin: player/src/nns/cpu.rs (`neighbours_of`, `within`).
//
// Points of the block are sorted by local cell (x fastest). Only points in
// the block's inner cells (whose whole search sphere lies in the block) are
// searched; the others are the CPU's. A pair is a neighbour when the squared
// distance is at most eps^2 summed in f64 (the CPU's definition): the GPU
// computes in f32, counts pairs clearly inside, and hands pairs within a
// hair (2^-14 relative) of eps^2 to the CPU to decide exactly.
//
// `count` writes each point's number of clear neighbours and appends
// borderline pairs; `fill` writes the clear neighbours' input indices at
// the offsets the host computed from the counts.

struct Params {
    dims: vec3<u32>,
    n: u32,
    inner_lo: vec3<u32>,
    border_cap: u32,
    inner_hi: vec3<u32>,
    out_cap: u32,
    eps2_lo: f32,
    eps2_hi: f32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// x, y, z as f32 bits, and the input index.
@group(0) @binding(1) var<storage, read> points: array<vec4<u32>>;
// Local linear cell of each point.
@group(0) @binding(2) var<storage, read> cell_of: array<u32>;
// starts[c]..starts[c + 1]: the points of local cell c.
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;
@group(0) @binding(5) var<storage, read> offsets: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<u32>;
@group(0) @binding(7) var<storage, read_write> border: array<vec2<u32>>;
@group(0) @binding(8) var<storage, read_write> border_count: atomic<u32>;

const WG: u32 = 256u;

fn position(i: u32) -> vec3<f32> {
    let p = points[i];
    return vec3<f32>(bitcast<f32>(p.x), bitcast<f32>(p.y), bitcast<f32>(p.z));
}

fn cell_coords(c: u32) -> vec3<u32> {
    let d = params.dims;
    return vec3<u32>(c % d.x, (c / d.x) % d.y, c / (d.x * d.y));
}

// Walks the 27 cells around point i: mode 0 counts (and records borderline
// pairs), mode 1 writes. Returns the number of clear neighbours.
fn visit(i: u32, mode: u32) -> u32 {
    let c = cell_coords(cell_of[i]);
    let p = position(i);
    let lo = vec3<u32>(max(c, vec3<u32>(1u)) - vec3<u32>(1u));
    let hi = min(c + vec3<u32>(1u), params.dims - vec3<u32>(1u));
    var found = 0u;
    var at = 0u;
    if (mode == 1u) {
        at = offsets[i];
    }
    for (var z = lo.z; z <= hi.z; z++) {
        for (var y = lo.y; y <= hi.y; y++) {
            let row = params.dims.x * (y + params.dims.y * z);
            let first = starts[row + lo.x];
            let past = starts[row + hi.x + 1u];
            for (var j = first; j < past; j++) {
                if (j == i) {
                    continue;
                }
                let d = position(j) - p;
                let d2 = d.x * d.x + d.y * d.y + d.z * d.z;
                if (d2 <= params.eps2_lo) {
                    if (mode == 1u && at + found < params.out_cap) {
                        out[at + found] = points[j].w;
                    }
                    found++;
                } else if (d2 <= params.eps2_hi && mode == 0u) {
                    let k = atomicAdd(&border_count, 1u);
                    if (k < params.border_cap) {
                        border[k] = vec2<u32>(i, j);
                    }
                }
            }
        }
    }
    return found;
}

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

fn is_inner(i: u32) -> bool {
    let c = cell_coords(cell_of[i]);
    return all(c >= params.inner_lo) && all(c < params.inner_hi);
}

@compute @workgroup_size(256)
fn count(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = thread_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    if (!is_inner(i)) {
        counts[i] = 0u;
        return;
    }
    counts[i] = visit(i, 0u);
}

@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = thread_index(gid, nwg);
    if (i >= params.n || !is_inner(i)) {
        return;
    }
    _ = visit(i, 1u);
}
