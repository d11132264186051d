// Shell voxelization: each invocation takes one triangle and sets the bit of
// every voxel whose box (grown by the shell margin) it overlaps, by the
// separating axis theorem. CPU twin: `cpu::shell` with `sat::triangle_overlaps_box`
// (same axes, same order; f32 here, f64 there).
// Keep ShellParams in sync with `ShellParams` in gpu/mod.rs.

struct ShellParams {
    origin: vec4<f32>,   // grid minimum corner, metres
    dims: vec4<u32>,     // voxels along x, y, z
    voxel_size: f32,
    half: f32,           // half the grown voxel edge, metres
    margin: f32,         // growth as a fraction of the voxel size
    triangles: u32,
}

@group(0) @binding(0) var<uniform> params: ShellParams;
@group(0) @binding(1) var<storage, read> positions: array<f32>;
@group(0) @binding(2) var<storage, read> indices: array<u32>;
@group(0) @binding(3) var<storage, read_write> grid: array<atomic<u32>>;

fn vertex(i: u32) -> vec3<f32> {
    return vec3<f32>(positions[3u * i], positions[3u * i + 1u], positions[3u * i + 2u]);
}

fn overlaps(v0: vec3<f32>, v1: vec3<f32>, v2: vec3<f32>, h: f32) -> bool {
    let e = array<vec3<f32>, 3>(v1 - v0, v2 - v1, v0 - v2);
    for (var i = 0u; i < 3u; i++) {
        for (var j = 0u; j < 3u; j++) {
            var axis = vec3<f32>(0.0);
            let edge = e[i];
            if j == 0u {
                axis = vec3<f32>(0.0, -edge.z, edge.y);
            } else if j == 1u {
                axis = vec3<f32>(edge.z, 0.0, -edge.x);
            } else {
                axis = vec3<f32>(-edge.y, edge.x, 0.0);
            }
            let p0 = dot(v0, axis);
            let p1 = dot(v1, axis);
            let p2 = dot(v2, axis);
            let r = h * (abs(axis.x) + abs(axis.y) + abs(axis.z));
            if min(p0, min(p1, p2)) > r || max(p0, max(p1, p2)) < -r {
                return false;
            }
        }
    }
    let lo = min(v0, min(v1, v2));
    let hi = max(v0, max(v1, v2));
    if any(lo > vec3<f32>(h)) || any(hi < vec3<f32>(-h)) {
        return false;
    }
    let n = cross(e[0], e[1]);
    let d = dot(n, v0);
    return abs(d) <= h * (abs(n.x) + abs(n.y) + abs(n.z));
}

@compute @workgroup_size(64)
fn shell(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = gid.x + gid.y * groups.x * 64u;
    if t >= params.triangles {
        return;
    }
    let a = vertex(indices[3u * t]);
    let b = vertex(indices[3u * t + 1u]);
    let c = vertex(indices[3u * t + 2u]);
    let vs = params.voxel_size;
    let lo = (min(a, min(b, c)) - params.origin.xyz) / vs;
    let hi = (max(a, max(b, c)) - params.origin.xyz) / vs;
    // Voxel k spans [k, k + 1] grown by the margin.
    let first = vec3<i32>(max(ceil(lo - 1.0 - params.margin), vec3<f32>(0.0)));
    let last = vec3<i32>(min(floor(hi + params.margin), vec3<f32>(params.dims.xyz) - 1.0));
    for (var z = first.z; z <= last.z; z++) {
        for (var y = first.y; y <= last.y; y++) {
            for (var x = first.x; x <= last.x; x++) {
                let centre = params.origin.xyz + (vec3<f32>(f32(x), f32(y), f32(z)) + 0.5) * vs;
                if overlaps(a - centre, b - centre, c - centre, params.half) {
                    let i = u32(x) + params.dims.x * (u32(y) + params.dims.y * u32(z));
                    atomicOr(&grid[i / 32u], 1u << (i & 31u));
                }
            }
        }
    }
}
