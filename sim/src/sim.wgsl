// Pellet's DEM kernels. CPU twin: player/src/sim/cpu.rs and contact.rs, with
// the same kernel and function names; keep them in step. Buffer layouts are
// documented on `HostState` and `Params` in the Rust sources.
//
// Every kernel runs one invocation per element, 256 per workgroup, laid out
// as a 2-D dispatch (see `flat_index`).

struct Params {
    n: u32,
    slots: u32,
    num_keys: u32,
    hashed: u32,
    dim_x: i32,
    dim_y: i32,
    dim_z: i32,
    wall_count: u32,
    origin_x: f32,
    origin_y: f32,
    origin_z: f32,
    cell_size: f32,
    gravity_x: f32,
    gravity_y: f32,
    gravity_z: f32,
    material_count: u32,
    dt: f32,
    inv_cell: f32,
    body_count: u32,
    pad1: u32,
    lo_x: f32,
    lo_y: f32,
    lo_z: f32,
    // Closed (walled) domain faces: bit 2a the lower face of axis a, 2a+1 the upper.
    closed: u32,
    hi_x: f32,
    hi_y: f32,
    hi_z: f32,
    pad2: u32,
}

// A rigid body (BodyGpu in body.rs).
struct Body {
    position: vec4<f32>,
    orientation: vec4<f32>,
    momentum: vec4<f32>,
    angular_momentum: vec4<f32>,
    omega: vec4<f32>,
    velocity: vec4<f32>,
    inv_inertia0: vec4<f32>,
    inv_inertia1: vec4<f32>,
    inv_inertia2: vec4<f32>,
    range: vec4<u32>,
}

// How compute_forces treats history (extension time, whether to keep it),
// and which particles it evaluates: first <= i < end (all of them in core;
// a block's own particles, not its halo, when stepping block by block).
struct Mode {
    dt_hist: f32,
    commit: u32,
    first: u32,
    end: u32,
}

// Length of the array one scan level works on.
struct ScanLen {
    len: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

const WG: u32 = 256u;
const WALL_ID_BASE: u32 = 0xffffff00u;
const FREE: u32 = 0xffffffffu;
const EXP_MASK: u32 = 0x7f800000u;
const DYNAMIC: u32 = 0u;
const STATIC: u32 = 1u;

// Counter slots (Counter in mod.rs).
const C_CONTACTS: u32 = 0u;
const C_WALL_CONTACTS: u32 = 1u;
const C_MAX_OCCUPANCY: u32 = 2u;
const C_OVERFLOWS: u32 = 3u;
const C_NAN_STEP: u32 = 4u;
const C_NAN_ID: u32 = 5u;
const C_ESCAPE_STEP: u32 = 6u;
const C_ESCAPE_ID: u32 = 7u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<uniform> mode: Mode;
@group(0) @binding(2) var<storage, read_write> pos: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> vel: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> angvel: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> pinfo: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> force: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> torque: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> hist_count: array<u32>;
@group(0) @binding(9) var<storage, read_write> hist: array<vec4<f32>>;
@group(0) @binding(10) var<storage, read_write> hist_count_old: array<u32>;
@group(0) @binding(11) var<storage, read_write> hist_old: array<vec4<f32>>;
@group(0) @binding(12) var<storage, read_write> keys: array<u32>;
@group(0) @binding(13) var<storage, read_write> cell_count: array<atomic<u32>>;
@group(0) @binding(14) var<storage, read_write> cell_start: array<u32>;
@group(0) @binding(15) var<storage, read_write> cursor: array<atomic<u32>>;
@group(0) @binding(16) var<storage, read_write> sorted_index: array<u32>;
@group(0) @binding(17) var<storage, read_write> pairs: array<vec4<f32>>;
@group(0) @binding(18) var<storage, read_write> walls: array<vec4<f32>>;
@group(0) @binding(19) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(20) var<storage, read_write> clock: array<u32>;
// Gather targets of the reorder kernels (copied back afterwards).
@group(0) @binding(21) var<storage, read_write> pos_out: array<vec4<f32>>;
@group(0) @binding(22) var<storage, read_write> vel_out: array<vec4<f32>>;
@group(0) @binding(23) var<storage, read_write> angvel_out: array<vec4<f32>>;
@group(0) @binding(24) var<storage, read_write> pinfo_out: array<vec4<u32>>;
// RK2 start-of-step copies.
@group(0) @binding(25) var<storage, read_write> pos0: array<vec4<f32>>;
@group(0) @binding(26) var<storage, read_write> vel0: array<vec4<f32>>;
@group(0) @binding(27) var<storage, read_write> angvel0: array<vec4<f32>>;
// Prefix sum, one level.
@group(0) @binding(28) var<uniform> scan_len: ScanLen;
@group(0) @binding(29) var<storage, read_write> scan_in: array<u32>;
@group(0) @binding(30) var<storage, read_write> scan_out: array<u32>;
@group(0) @binding(31) var<storage, read_write> scan_sums: array<u32>;
// Statistics: one (kinetic energy, max speed^2) pair per workgroup.
@group(0) @binding(32) var<storage, read_write> partials: array<vec2<f32>>;

// Rigid bodies.
@group(0) @binding(35) var<storage, read_write> bodies: array<Body>;
@group(0) @binding(36) var<storage, read_write> body_force: array<vec4<f32>>;
@group(0) @binding(37) var<storage, read_write> body_torque: array<vec4<f32>>;
// Body-frame offset of each body particle from its body's centre of mass.
@group(0) @binding(38) var<storage, read_write> local: array<vec4<f32>>;
@group(0) @binding(39) var<storage, read_write> local_out: array<vec4<f32>>;
// Current (sorted) index of each particle id.
@group(0) @binding(40) var<storage, read_write> inv_index: array<u32>;

var<workgroup> wg_u32: array<u32, 256>;
var<workgroup> wg_v4a: array<vec4<f32>, 256>;
var<workgroup> wg_v4b: array<vec4<f32>, 256>;
var<workgroup> wg_f32a: array<f32, 256>;
var<workgroup> wg_f32b: array<f32, 256>;

fn flat_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

fn kernel_time() -> f32 {
    return f32(clock[0]) * params.dt;
}

// ---- cells ------------------------------------------------------------------

fn cell_coord(p: vec3<f32>) -> vec3<i32> {
    let origin = vec3<f32>(params.origin_x, params.origin_y, params.origin_z);
    let c = vec3<i32>(floor((p - origin) * params.inv_cell));
    if (params.hashed == 0u) {
        let hi = vec3<i32>(params.dim_x - 1, params.dim_y - 1, params.dim_z - 1);
        return clamp(c, vec3<i32>(0), hi);
    }
    return c;
}

fn cell_key(c: vec3<i32>) -> u32 {
    if (params.hashed == 0u) {
        return u32(c.x + params.dim_x * (c.y + params.dim_y * c.z));
    }
    // Linear index modulo the bucket count (wrapping u32), as grid.rs.
    let lin = bitcast<u32>(c.x) + bitcast<u32>(params.dim_x) * (bitcast<u32>(c.y) + bitcast<u32>(params.dim_y) * bitcast<u32>(c.z));
    return lin & (params.num_keys - 1u);
}

@compute @workgroup_size(256)
fn cell_keys(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let k = cell_key(cell_coord(pos[i].xyz));
    keys[i] = k;
    atomicAdd(&cell_count[k], 1u);
}

// Exclusive scan of scan_in[0..len] in blocks of 256; block totals to scan_sums.
@compute @workgroup_size(256)
fn scan_block(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = wid.x + wid.y * nwg.x;
    let i = block * WG + lid;
    var v = 0u;
    if (i < scan_len.len) {
        v = scan_in[i];
    }
    wg_u32[lid] = v;
    workgroupBarrier();
    // Hillis-Steele inclusive scan.
    for (var off = 1u; off < WG; off = off * 2u) {
        var t = 0u;
        if (lid >= off) {
            t = wg_u32[lid - off];
        }
        workgroupBarrier();
        wg_u32[lid] = wg_u32[lid] + t;
        workgroupBarrier();
    }
    if (i < scan_len.len) {
        scan_out[i] = wg_u32[lid] - v;
    }
    if (lid == WG - 1u) {
        scan_sums[block] = wg_u32[lid];
    }
}

// Adds the scanned block totals (scan_in) to each block of scan_out.
@compute @workgroup_size(256)
fn scan_add(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = wid.x + wid.y * nwg.x;
    let i = block * WG + lid;
    if (i < scan_len.len) {
        scan_out[i] = scan_out[i] + scan_in[block];
    }
}

@compute @workgroup_size(256)
fn scatter(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let k = keys[i];
    let slot = cell_start[k] + atomicAdd(&cursor[k], 1u);
    sorted_index[slot] = i;
}

// One invocation per key: order its particles by persistent id.
@compute @workgroup_size(256)
fn sort_cells(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.num_keys) {
        return;
    }
    let start = cell_start[k];
    let end = cell_start[k + 1u];
    if (end > start) {
        atomicMax(&counters[C_MAX_OCCUPANCY], end - start);
    }
    for (var a = start + 1u; a < end; a = a + 1u) {
        let v = sorted_index[a];
        let id = pinfo[v].x;
        var b = a;
        loop {
            if (b == start) {
                break;
            }
            let u = sorted_index[b - 1u];
            if (pinfo[u].x <= id) {
                break;
            }
            sorted_index[b] = u;
            b = b - 1u;
        }
        sorted_index[b] = v;
    }
}

@compute @workgroup_size(256)
fn reorder_particles(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.n) {
        return;
    }
    let src = sorted_index[k];
    pos_out[k] = pos[src];
    vel_out[k] = vel[src];
    angvel_out[k] = angvel[src];
    pinfo_out[k] = pinfo[src];
    local_out[k] = local[src];
    // A block holds some of the particles; ids beyond its table are not its.
    let id = pinfo[src].x;
    if (id < arrayLength(&inv_index)) {
        inv_index[id] = k;
    }
}

@compute @workgroup_size(256)
fn reorder_rk2(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.n) {
        return;
    }
    let src = sorted_index[k];
    pos_out[k] = pos0[src];
    vel_out[k] = vel0[src];
    angvel_out[k] = angvel0[src];
}

@compute @workgroup_size(256)
fn reorder_history(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.n) {
        return;
    }
    let src = sorted_index[k];
    let c = hist_count[src];
    hist_count_old[k] = c;
    for (var s = 0u; s < c; s = s + 1u) {
        hist_old[k * params.slots + s] = hist[src * params.slots + s];
    }
}

// ---- contacts ---------------------------------------------------------------

struct Acc {
    force: vec3<f32>,
    torque: vec3<f32>,
    new_count: u32,
    touching: u32,
    wall_touching: u32,
    overflow: u32,
}

struct ContactOut {
    f: vec3<f32>,
    ft: vec3<f32>,
    xi: vec3<f32>,
}

fn contact_force(n: vec3<f32>, delta: f32, vr: vec3<f32>, wsum: vec3<f32>, m_eff: f32, pa: vec4<f32>, pb: vec4<f32>, xi_old: vec3<f32>, dt_hist: f32) -> ContactOut {
    let kn = pa.x;
    let kt = pa.y;
    let mu = pa.z;
    let vn = dot(vr, n);
    let vc = vr - cross(wsum, n);
    let vt = vc - n * dot(vc, n);
    var c = pb.x;
    if (!(pb.x > 0.0)) {
        c = pa.w * sqrt(m_eff * kn);
    }
    let fn_mag = kn * delta - c * vn;
    let xi_rot = xi_old - n * dot(xi_old, n);
    var xi = xi_rot + vt * dt_hist;
    var ft = xi * (-kt) - vt * c;
    let ft_max = mu * abs(fn_mag);
    let ft2 = dot(ft, ft);
    if (ft2 > ft_max * ft_max) {
        ft = ft * (ft_max / sqrt(ft2));
        if (kt > 0.0) {
            xi = (ft + vt * c) * (-1.0 / kt);
        } else {
            xi = vec3<f32>(0.0);
        }
    }
    return ContactOut(n * fn_mag + ft, ft, xi);
}

fn find_history(i: u32, old_count: u32, partner: u32) -> vec3<f32> {
    let base = i * params.slots;
    for (var s = 0u; s < old_count; s = s + 1u) {
        let h = hist_old[base + s];
        if (bitcast<u32>(h.w) == partner) {
            return h.xyz;
        }
    }
    return vec3<f32>(0.0);
}

fn store_history(i: u32, acc: ptr<function, Acc>, partner: u32, xi: vec3<f32>) {
    if (mode.commit == 0u) {
        return;
    }
    let k = (*acc).new_count;
    if (k < params.slots) {
        hist[i * params.slots + k] = vec4<f32>(xi, bitcast<f32>(partner));
        (*acc).new_count = k + 1u;
    } else {
        (*acc).overflow = (*acc).overflow + 1u;
    }
}

fn interact_pair(i: u32, j: u32, pi: vec4<f32>, vi: vec4<f32>, wi: vec4<f32>, mi: vec4<u32>, old_count: u32, acc: ptr<function, Acc>) {
    if (j == i) {
        return;
    }
    let pj = pos[j];
    let d = pi.xyz - pj.xyz;
    let dist2 = dot(d, d);
    let rsum = pi.w + pj.w;
    if (dist2 >= rsum * rsum) {
        return;
    }
    let mj = pinfo[j];
    if (mi.z != FREE && mi.z == mj.z) {
        return;
    }
    let vj = vel[j];
    if (vi.w + vj.w == 0.0) {
        // Two immovable particles (static or kinematic bodies).
        return;
    }
    let dist = sqrt(dist2);
    var n: vec3<f32>;
    if (dist > 0.0) {
        n = d * (1.0 / dist);
    } else if (mi.x < mj.x) {
        n = vec3<f32>(0.0, 1.0, 0.0);
    } else {
        n = vec3<f32>(0.0, -1.0, 0.0);
    }
    let delta = rsum - dist;
    let wj = angvel[j];
    let m_eff = 1.0 / (vi.w + vj.w);
    let vr = vi.xyz - vj.xyz;
    let wsum = wi.xyz * pi.w + wj.xyz * pj.w;
    let p = (mi.y * params.material_count + mj.y) * 2u;
    let xi_old = find_history(i, old_count, mj.x);
    let out = contact_force(n, delta, vr, wsum, m_eff, pairs[p], pairs[p + 1u], xi_old, mode.dt_hist);
    (*acc).force = (*acc).force + out.f;
    (*acc).torque = (*acc).torque + cross(out.ft, n) * pi.w;
    (*acc).touching = (*acc).touching + 1u;
    store_history(i, acc, mj.x, out.xi);
}

fn interact_wall(i: u32, w: u32, pi: vec4<f32>, vi: vec4<f32>, wi: vec4<f32>, material: u32, old_count: u32, acc: ptr<function, Acc>) {
    let wa = walls[w * 2u];
    let wb = walls[w * 2u + 1u];
    let n = wa.xyz;
    let dist = dot(n, pi.xyz) - wa.w;
    let delta = pi.w - dist;
    if (delta <= 0.0) {
        return;
    }
    let partner = WALL_ID_BASE + w;
    let p = (material * params.material_count + bitcast<u32>(wb.x)) * 2u;
    let xi_old = find_history(i, old_count, partner);
    let out = contact_force(n, delta, vi.xyz, wi.xyz * pi.w, 1.0 / vi.w, pairs[p], pairs[p + 1u], xi_old, mode.dt_hist);
    (*acc).force = (*acc).force + out.f;
    (*acc).torque = (*acc).torque + cross(out.ft, n) * pi.w;
    (*acc).wall_touching = (*acc).wall_touching + 1u;
    store_history(i, acc, partner, out.xi);
}

@compute @workgroup_size(256)
fn compute_forces(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n || i < mode.first || i >= mode.end) {
        return;
    }
    let pi = pos[i];
    let vi = vel[i];
    let wi = angvel[i];
    let mi = pinfo[i];
    let old_count = hist_count_old[i];
    var acc: Acc;
    acc.force = vec3<f32>(0.0);
    if (vi.w > 0.0) {
        acc.force = vec3<f32>(params.gravity_x, params.gravity_y, params.gravity_z) * (1.0 / vi.w);
    }
    acc.torque = vec3<f32>(0.0);
    acc.new_count = 0u;
    acc.touching = 0u;
    acc.wall_touching = 0u;
    acc.overflow = 0u;
    let c = cell_coord(pi.xyz);
    for (var dz = -1; dz <= 1; dz = dz + 1) {
        for (var dy = -1; dy <= 1; dy = dy + 1) {
            if (params.hashed != 0u) {
                for (var dx = -1; dx <= 1; dx = dx + 1) {
                    let cc = c + vec3<i32>(dx, dy, dz);
                    let k = cell_key(cc);
                    let end = cell_start[k + 1u];
                    for (var j = cell_start[k]; j < end; j = j + 1u) {
                        if (all(cell_coord(pos[j].xyz) == cc)) {
                            interact_pair(i, j, pi, vi, wi, mi, old_count, &acc);
                        }
                    }
                }
            } else {
                let cy = c.y + dy;
                let cz = c.z + dz;
                if (cy < 0 || cy >= params.dim_y || cz < 0 || cz >= params.dim_z) {
                    continue;
                }
                let x0 = max(c.x - 1, 0);
                let x1 = min(c.x + 1, params.dim_x - 1);
                let end = cell_start[cell_key(vec3<i32>(x1, cy, cz)) + 1u];
                for (var j = cell_start[cell_key(vec3<i32>(x0, cy, cz))]; j < end; j = j + 1u) {
                    interact_pair(i, j, pi, vi, wi, mi, old_count, &acc);
                }
            }
        }
    }
    let time = kernel_time();
    for (var w = 0u; w < params.wall_count; w = w + 1u) {
        if (vi.w > 0.0 && time < walls[w * 2u + 1u].y) {
            interact_wall(i, w, pi, vi, wi, mi.y, old_count, &acc);
        }
    }
    force[i] = vec4<f32>(acc.force, 0.0);
    torque[i] = vec4<f32>(acc.torque, 0.0);
    if (mode.commit != 0u) {
        hist_count[i] = acc.new_count;
    } else {
        let base = i * params.slots;
        for (var s = 0u; s < old_count; s = s + 1u) {
            hist[base + s] = hist_old[base + s];
        }
        hist_count[i] = old_count;
    }
    if (acc.touching > 0u) {
        atomicAdd(&counters[C_CONTACTS], acc.touching);
    }
    if (acc.wall_touching > 0u) {
        atomicAdd(&counters[C_WALL_CONTACTS], acc.wall_touching);
    }
    if (acc.overflow > 0u) {
        atomicAdd(&counters[C_OVERFLOWS], acc.overflow);
    }
}

// ---- integration ------------------------------------------------------------

fn bad(v: vec3<f32>) -> bool {
    let e = bitcast<vec3<u32>>(v) & vec3<u32>(EXP_MASK);
    return any(e == vec3<u32>(EXP_MASK));
}

// Whether the centre lies more than the radius beyond a closed domain face
// (escaped_face in setup.rs); NaN compares false.
fn escaped(p: vec4<f32>) -> bool {
    let lo = vec3<f32>(params.lo_x, params.lo_y, params.lo_z) - vec3<f32>(p.w);
    let hi = vec3<f32>(params.hi_x, params.hi_y, params.hi_z) + vec3<f32>(p.w);
    let c = params.closed;
    let below = p.xyz < lo;
    let above = p.xyz > hi;
    return (below.x && (c & 1u) != 0u) || (above.x && (c & 2u) != 0u)
        || (below.y && (c & 4u) != 0u) || (above.y && (c & 8u) != 0u)
        || (below.z && (c & 16u) != 0u) || (above.z && (c & 32u) != 0u);
}

fn check_finite(i: u32, p: vec4<f32>, v: vec4<f32>, w: vec4<f32>) {
    if (bad(p.xyz) || bad(v.xyz) || bad(w.xyz)) {
        let step = clock[0];
        let prev = atomicMin(&counters[C_NAN_STEP], step);
        if (prev >= step) {
            atomicMin(&counters[C_NAN_ID], pinfo[i].x);
        }
    }
    if (escaped(p)) {
        let step = clock[0];
        let prev = atomicMin(&counters[C_ESCAPE_STEP], step);
        if (prev >= step) {
            atomicMin(&counters[C_ESCAPE_ID], pinfo[i].x);
        }
    }
}

@compute @workgroup_size(256)
fn verlet_begin(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n || pinfo[i].z != FREE) {
        return;
    }
    let half = 0.5 * params.dt;
    var p = pos[i];
    var v = vel[i];
    var w = angvel[i];
    v = vec4<f32>(v.xyz + force[i].xyz * (v.w * half), v.w);
    w = vec4<f32>(w.xyz + torque[i].xyz * (w.w * half), w.w);
    p = vec4<f32>(p.xyz + v.xyz * params.dt, p.w);
    pos[i] = p;
    vel[i] = v;
    angvel[i] = w;
    check_finite(i, p, v, w);
}

@compute @workgroup_size(256)
fn verlet_end(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n || pinfo[i].z != FREE) {
        return;
    }
    let half = 0.5 * params.dt;
    var v = vel[i];
    var w = angvel[i];
    v = vec4<f32>(v.xyz + force[i].xyz * (v.w * half), v.w);
    w = vec4<f32>(w.xyz + torque[i].xyz * (w.w * half), w.w);
    vel[i] = v;
    angvel[i] = w;
    check_finite(i, pos[i], v, w);
}

@compute @workgroup_size(256)
fn rk2_mid(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let half = 0.5 * params.dt;
    var p = pos[i];
    var v = vel[i];
    var w = angvel[i];
    pos0[i] = p;
    vel0[i] = v;
    angvel0[i] = w;
    p = vec4<f32>(p.xyz + v.xyz * half, p.w);
    v = vec4<f32>(v.xyz + force[i].xyz * (v.w * half), v.w);
    w = vec4<f32>(w.xyz + torque[i].xyz * (w.w * half), w.w);
    pos[i] = p;
    vel[i] = v;
    angvel[i] = w;
    check_finite(i, p, v, w);
}

@compute @workgroup_size(256)
fn rk2_end(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let dt = params.dt;
    let v = vel[i];
    let w = angvel[i];
    let p = vec4<f32>(pos0[i].xyz + v.xyz * dt, pos[i].w);
    let v1 = vec4<f32>(vel0[i].xyz + force[i].xyz * (v.w * dt), v.w);
    let w1 = vec4<f32>(angvel0[i].xyz + torque[i].xyz * (w.w * dt), w.w);
    pos[i] = p;
    vel[i] = v1;
    angvel[i] = w1;
    check_finite(i, p, v1, w1);
}

// One thread: the step counter.
@compute @workgroup_size(1)
fn tick() {
    clock[0] = clock[0] + 1u;
}

// Per-workgroup kinetic energy (translational + rotational) and max speed^2,
// summed in a fixed tree order.
@compute @workgroup_size(256)
fn stats(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = wid.x + wid.y * nwg.x;
    let i = block * WG + lid;
    var ke = 0.0;
    var v2 = 0.0;
    if (i < params.n) {
        let v = vel[i];
        let w = angvel[i];
        v2 = dot(v.xyz, v.xyz);
        if (v.w > 0.0) {
            ke = 0.5 * v2 / v.w;
        }
        if (w.w > 0.0) {
            ke = ke + 0.5 * dot(w.xyz, w.xyz) / w.w;
        }
    }
    wg_f32a[lid] = ke;
    wg_f32b[lid] = v2;
    workgroupBarrier();
    for (var off = WG / 2u; off > 0u; off = off / 2u) {
        if (lid < off) {
            wg_f32a[lid] = wg_f32a[lid] + wg_f32a[lid + off];
            wg_f32b[lid] = max(wg_f32b[lid], wg_f32b[lid + off]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        partials[block] = vec2<f32>(wg_f32a[0], wg_f32b[0]);
    }
}

// ---- rigid bodies -------------------------------------------------------------

fn quat_mul(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(
        a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
        a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
        a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w,
        a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z,
    );
}

fn quat_normalize(q: vec4<f32>) -> vec4<f32> {
    let len = sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w);
    return vec4<f32>(q.x / len, q.y / len, q.z / len, q.w / len);
}

fn quat_exp(theta: vec3<f32>) -> vec4<f32> {
    let angle = sqrt(dot(theta, theta));
    if (angle < 1e-12) {
        return vec4<f32>(0.5 * theta, 1.0);
    }
    let s = sin(0.5 * angle) / angle;
    return vec4<f32>(theta * s, cos(0.5 * angle));
}

fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    let u = q.xyz;
    let t = cross(u, v) * 2.0;
    return v + t * q.w + cross(u, t);
}

fn world_omega(b: Body, q: vec4<f32>, l: vec3<f32>) -> vec3<f32> {
    let lb = rotate(vec4<f32>(-q.xyz, q.w), l);
    let wb = vec3<f32>(dot(b.inv_inertia0.xyz, lb), dot(b.inv_inertia1.xyz, lb), dot(b.inv_inertia2.xyz, lb));
    return rotate(q, wb);
}

@compute @workgroup_size(256)
fn body_begin(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.body_count) {
        return;
    }
    var b = bodies[k];
    let kind = b.range.z;
    if (kind == STATIC) {
        return;
    }
    let dt = params.dt;
    if (kind == DYNAMIC) {
        let half = 0.5 * dt;
        let p = b.momentum.xyz + body_force[k].xyz * half;
        let l = b.angular_momentum.xyz + body_torque[k].xyz * half;
        let v = p * b.position.w;
        let x = b.position.xyz + v * dt;
        let w0 = world_omega(b, b.orientation, l);
        let q = quat_normalize(quat_mul(quat_exp(w0 * dt), b.orientation));
        let w = world_omega(b, q, l);
        b.position = vec4<f32>(x, b.position.w);
        b.orientation = q;
        b.momentum = vec4<f32>(p, 0.0);
        b.angular_momentum = vec4<f32>(l, 0.0);
        b.velocity = vec4<f32>(v, 0.0);
        b.omega = vec4<f32>(w, 0.0);
    } else {
        let x = b.position.xyz + b.velocity.xyz * dt;
        b.position = vec4<f32>(x, b.position.w);
        b.orientation = quat_normalize(quat_mul(quat_exp(b.omega.xyz * dt), b.orientation));
    }
    bodies[k] = b;
}

@compute @workgroup_size(256)
fn body_end(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.body_count) {
        return;
    }
    var b = bodies[k];
    if (b.range.z != DYNAMIC) {
        return;
    }
    let half = 0.5 * params.dt;
    let p = b.momentum.xyz + body_force[k].xyz * half;
    let l = b.angular_momentum.xyz + body_torque[k].xyz * half;
    let v = p * b.position.w;
    let w = world_omega(b, b.orientation, l);
    b.momentum = vec4<f32>(p, 0.0);
    b.angular_momentum = vec4<f32>(l, 0.0);
    b.velocity = vec4<f32>(v, 0.0);
    b.omega = vec4<f32>(w, 0.0);
    bodies[k] = b;
}

// Body particles follow their body: world position, velocity, spin.
@compute @workgroup_size(256)
fn body_particles(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let bi = pinfo[i].z;
    if (bi == FREE) {
        return;
    }
    let b = bodies[bi];
    let r = rotate(b.orientation, local[i].xyz);
    let x = b.position.xyz + r;
    let w = b.omega.xyz;
    let p = vec4<f32>(x, pos[i].w);
    let v = vec4<f32>(b.velocity.xyz + cross(w, r), vel[i].w);
    let a = vec4<f32>(w, angvel[i].w);
    pos[i] = p;
    vel[i] = v;
    angvel[i] = a;
    check_finite(i, p, v, a);
}

// One workgroup per body: its particles' forces and moments, summed by
// particle id in 256 strided lanes and a fixed tree (body_reduce in body.rs).
@compute @workgroup_size(256)
fn body_reduce(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = wid.x + wid.y * nwg.x;
    if (block >= params.body_count) {
        return;
    }
    let b = bodies[block];
    let first = b.range.x;
    let count = b.range.y;
    let centre = b.position.xyz;
    var f = vec3<f32>(0.0);
    var t = vec3<f32>(0.0);
    for (var s = lid; s < count; s = s + WG) {
        let k = inv_index[first + s];
        let fk = force[k].xyz;
        let r = pos[k].xyz - centre;
        f = f + fk;
        t = t + (cross(r, fk) + torque[k].xyz);
    }
    wg_v4a[lid] = vec4<f32>(f, 0.0);
    wg_v4b[lid] = vec4<f32>(t, 0.0);
    workgroupBarrier();
    for (var off = WG / 2u; off > 0u; off = off / 2u) {
        if (lid < off) {
            wg_v4a[lid] = wg_v4a[lid] + wg_v4a[lid + off];
            wg_v4b[lid] = wg_v4b[lid] + wg_v4b[lid + off];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        body_force[block] = wg_v4a[0];
        body_torque[block] = wg_v4b[0];
    }
}
