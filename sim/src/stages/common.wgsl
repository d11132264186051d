// Shared by every simulation stage (sort, forces, integrate, bodies, stats):
// the uniform blocks and structs, constants, every binding, and the helpers
// more than one stage calls. Each stage file is compiled as its own module,
// this file first. Rust twins of the structs: `sim/src/stages/common.rs`
// (`Params`, `BodyGpu`, `ModeGpu`, `ScanLenGpu`); `sim/tests/layout.rs`
// checks their sizes and offsets against these.
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
    // Neighbour-list skin, metres (the pair-list path).
    skin: f32,
    lo_x: f32,
    lo_y: f32,
    lo_z: f32,
    // Closed (walled) domain faces: bit 2a the lower face of axis a, 2a+1 the upper.
    closed: u32,
    hi_x: f32,
    hi_y: f32,
    hi_z: f32,
    // Contact law: HOOKE or HERTZ (the Params.contact_model constants).
    contact_model: u32,
    // Rolling resistance: ROLL_NONE, ROLL_EPSD2 or ROLL_CDT.
    rolling_model: u32,
    // Periodic axes as bits (1 << axis): the CPU engine's; the GPU kernels do not read it yet.
    periodic: u32,
    pad3_1: u32,
    pad3_2: u32,
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
// The contact and rolling laws of this simulation (Params.contact_model and
// Params.rolling_model), fixed per pipeline as overridable constants: a
// kernel carries no code for the laws it does not use (lavapipe runs both
// sides of a branch it cannot prove uniform).
override CONTACT_MODEL: u32 = 0u;
override ROLLING_MODEL: u32 = 0u;
// Periodic axes as bits (Params.periodic).
override PERIODIC: u32 = 0u;

// Params.contact_model.
const HOOKE: u32 = 0u;
const HERTZ: u32 = 1u;
// Params.rolling_model.
const ROLL_NONE: u32 = 0u;
const ROLL_EPSD2: u32 = 1u;
const ROLL_CDT: u32 = 2u;
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

// The pair list (stage `pairs`): a half list in CSR, each pair once (the
// later particle in cell order is the partner), its tangential spring
// beside it, rebuilt when a particle has moved half the skin.
// Positions at the last build.
@group(0) @binding(41) var<storage, read_write> pos_ref: array<vec4<f32>>;
// Pairs owned by each particle (n + 1 entries; the scan's input) and their first index.
@group(0) @binding(42) var<storage, read_write> row_count: array<u32>;
@group(0) @binding(43) var<storage, read_write> pair_start: array<u32>;
// Pairs in which each particle is the partner, and where its entries start.
@group(0) @binding(44) var<storage, read_write> low_count: array<u32>;
@group(0) @binding(45) var<storage, read_write> low_start: array<u32>;
// Per pair: the partner (current index); the spring (xyz, m, in the owner's
// view) and the partner's persistent id (w, as bits).
@group(0) @binding(46) var<storage, read_write> pair_j: array<u32>;
@group(0) @binding(47) var<storage, read_write> pair_hist: array<vec4<f32>>;
// Per pair: force on the owner (xyz, N) and the torque arm term f_t x n (xyz, N).
@group(0) @binding(48) var<storage, read_write> pair_force: array<vec4<f32>>;
@group(0) @binding(49) var<storage, read_write> pair_torque: array<vec4<f32>>;
// Per partner entry: the pair's index.
@group(0) @binding(50) var<storage, read_write> low_index: array<u32>;
// The previous list's row starts and springs (indexed by the order before the rebuild's sort).
@group(0) @binding(51) var<storage, read_write> old_start: array<u32>;
@group(0) @binding(52) var<storage, read_write> old_hist: array<vec4<f32>>;
// Spring with each wall, wall_count per particle, and the copy a rebuild gathers from.
@group(0) @binding(53) var<storage, read_write> wall_hist: array<vec4<f32>>;
@group(0) @binding(54) var<storage, read_write> wall_hist_old: array<vec4<f32>>;
// List state (LS_* in pairs.wgsl) and the indirect dispatches it gates.
@group(0) @binding(55) var<storage, read_write> list_state: array<atomic<u32>>;
@group(0) @binding(56) var<storage, read_write> dispatch_args: array<u32>;
@group(0) @binding(57) var<storage, read_write> dispatch_template: array<vec4<u32>>;
// Per pair: normal and tangential stiffness (N/m), friction, damping (N s/m), set at the build.
@group(0) @binding(58) var<storage, read_write> pair_const: array<vec4<f32>>;
// Per particle: bit w set when wall w (< 32) was within r + skin at the build.
@group(0) @binding(59) var<storage, read_write> wall_mask: array<u32>;
// Per pair: its owner (current index).
@group(0) @binding(60) var<storage, read_write> pair_i: array<u32>;
// Rolling resistance (Params.rolling_model): each pair's stored rolling
// torque (epsd2), the torque M the owner gets as -M and the partner as +M,
// the old list's stored torques, and each particle's wall torques (epsd2).
@group(0) @binding(61) var<storage, read_write> pair_roll: array<vec4<f32>>;
@group(0) @binding(62) var<storage, read_write> pair_roll_m: array<vec4<f32>>;
@group(0) @binding(63) var<storage, read_write> old_roll: array<vec4<f32>>;
@group(0) @binding(64) var<storage, read_write> wall_roll: array<vec4<f32>>;
@group(0) @binding(65) var<storage, read_write> wall_roll_old: array<vec4<f32>>;

fn flat_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

fn kernel_time() -> f32 {
    return f32(clock[0]) * params.dt;
}


// Grid cells (GridSpec::cell_coord and cell_key in grid.rs).

fn cell_coord(p: vec3<f32>) -> vec3<i32> {
    let origin = vec3<f32>(params.origin_x, params.origin_y, params.origin_z);
    var c = vec3<i32>(floor((p - origin) * params.inv_cell));
    if (PERIODIC != 0u) {
        // Whole cells span each periodic axis; coordinates wrap.
        let dims = vec3<i32>(params.dim_x, params.dim_y, params.dim_z);
        let period = vec3<f32>(params.hi_x - params.lo_x, params.hi_y - params.lo_y, params.hi_z - params.lo_z);
        for (var a = 0u; a < 3u; a = a + 1u) {
            if ((PERIODIC & (1u << a)) != 0u) {
                let w = i32(floor((p[a] - origin[a]) * (f32(dims[a]) / period[a])));
                c[a] = ((w % dims[a]) + dims[a]) % dims[a];
            }
        }
    }
    if (params.hashed == 0u) {
        let hi = vec3<i32>(params.dim_x - 1, params.dim_y - 1, params.dim_z - 1);
        return clamp(c, vec3<i32>(0), hi);
    }
    return c;
}

// The minimum image of the separation d = p_i - p_j (GridSpec::min_image).
fn min_image(d: vec3<f32>) -> vec3<f32> {
    var out = d;
    if (PERIODIC != 0u) {
        let period = vec3<f32>(params.hi_x - params.lo_x, params.hi_y - params.lo_y, params.hi_z - params.lo_z);
        for (var a = 0u; a < 3u; a = a + 1u) {
            if ((PERIODIC & (1u << a)) != 0u) {
                let l = period[a];
                out[a] = d[a] - l * round(d[a] * (1.0 / l));
            }
        }
    }
    return out;
}

// A free particle back in the box along the periodic axes (GridSpec::wrap).
fn wrap_position(p: vec4<f32>) -> vec4<f32> {
    var out = p;
    let lo = vec3<f32>(params.lo_x, params.lo_y, params.lo_z);
    let period = vec3<f32>(params.hi_x - params.lo_x, params.hi_y - params.lo_y, params.hi_z - params.lo_z);
    for (var a = 0u; a < 3u; a = a + 1u) {
        if ((PERIODIC & (1u << a)) != 0u) {
            let l = period[a];
            out[a] = p[a] - l * floor((p[a] - lo[a]) * (1.0 / l));
        }
    }
    return out;
}

fn cell_key(c: vec3<i32>) -> u32 {
    if (params.hashed == 0u) {
        return u32(c.x + params.dim_x * (c.y + params.dim_y * c.z));
    }
    // Linear index modulo the bucket count (wrapping u32), as grid.rs.
    let lin = bitcast<u32>(c.x) + bitcast<u32>(params.dim_x) * (bitcast<u32>(c.y) + bitcast<u32>(params.dim_y) * bitcast<u32>(c.z));
    return lin & (params.num_keys - 1u);
}

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
    check_finite_at(i, p, v, w, clock[0]);
}

// check_finite for the values of (0-based) step `step`.
fn check_finite_at(i: u32, p: vec4<f32>, v: vec4<f32>, w: vec4<f32>, step: u32) {
    if (bad(p.xyz) || bad(v.xyz) || bad(w.xyz)) {
        let prev = atomicMin(&counters[C_NAN_STEP], step);
        if (prev >= step) {
            atomicMin(&counters[C_NAN_ID], pinfo[i].x);
        }
    }
    if (escaped(p)) {
        let prev = atomicMin(&counters[C_ESCAPE_STEP], step);
        if (prev >= step) {
            atomicMin(&counters[C_ESCAPE_ID], pinfo[i].x);
        }
    }
}

// The contact model (contact_force_damped in forces.rs): force on the
// particle, its tangential part and the new tangential spring, for normal
// `n` (from the partner to the particle), overlap `delta`, relative
// velocity `vr`, `wsum` = w_i r_i + w_j r_j, damping `c` (N s/m), normal
// and tangential stiffness (N/m), friction, the stored spring and the time
// it is extended over.
struct ContactOut {
    f: vec3<f32>,
    ft: vec3<f32>,
    xi: vec3<f32>,
    // What the rolling resistance reads: the contact's tangential
    // stiffness, its elastic normal force, its whole normal force.
    kt: f32,
    kn_delta: f32,
    fn_mag: f32,
}

// Rolling resistance of one contact (rolling_torque in forces.rs): the
// torque M (the first particle gets -M, the second +M) and the new stored
// torque, from the relative spin w_rel without its twisting part.
struct RollOut {
    m: vec3<f32>,
    stored: vec3<f32>,
}

fn rolling_torque(n: vec3<f32>, w_rel: vec3<f32>, kt: f32, kn_delta: f32, fn_mag: f32, r_eff: f32, mu_roll: f32, stored: vec3<f32>, dt_hist: f32) -> RollOut {
    let wt = w_rel - n * dot(w_rel, n);
    if (ROLLING_MODEL == ROLL_CDT) {
        let w2 = dot(wt, wt);
        if (w2 > 0.0) {
            return RollOut(wt * (mu_roll * kn_delta * r_eff / sqrt(w2)), vec3<f32>(0.0));
        }
        return RollOut(vec3<f32>(0.0), vec3<f32>(0.0));
    }
    let kr = kt * r_eff * r_eff;
    var m = stored + wt * (dt_hist * kr);
    let cap = abs(fn_mag) * r_eff * mu_roll;
    let m2 = dot(m, m);
    if (m2 > cap * cap) {
        m = m * (cap / sqrt(m2));
    }
    return RollOut(m, m);
}

fn contact_force_damped(n: vec3<f32>, delta: f32, vr: vec3<f32>, wsum: vec3<f32>, c: f32, ct: f32, kn: f32, kt: f32, mu: f32, xi_old: vec3<f32>, dt_hist: f32) -> ContactOut {
    let vn = dot(vr, n);
    let vc = vr - cross(wsum, n);
    let vt = vc - n * dot(vc, n);
    let kn_delta = kn * delta;
    let fn_mag = kn_delta - c * vn;
    let xi_rot = xi_old - n * dot(xi_old, n);
    var xi = xi_rot + vt * dt_hist;
    var ft = xi * (-kt) - vt * ct;
    let ft_max = mu * abs(fn_mag);
    let ft2 = dot(ft, ft);
    if (ft2 > ft_max * ft_max) {
        ft = ft * (ft_max / sqrt(ft2));
        if (kt > 0.0) {
            xi = (ft + vt * ct) * (-1.0 / kt);
        } else {
            xi = vec3<f32>(0.0);
        }
    }
    return ContactOut(n * fn_mag + ft, ft, xi, kt, kn_delta, fn_mag);
}

// The constants (kn, kt, mu, c) of a contact of the materials' pair `pa`,
// `pb` (kn, kt, mu, damping factor; absolute damping) with effective radius
// `r_eff` and mass `m_eff` (pair_constants in forces.rs). Hertz: kn and kt
// are 4/3 E* and 8 G* times sqrt(r_eff), c = 2 sqrt(5/6) beta sqrt(3/2 kn m_eff).
fn pair_constants_of(pa: vec4<f32>, pb: vec4<f32>, r_eff: f32, m_eff: f32) -> vec4<f32> {
    if (CONTACT_MODEL == HERTZ) {
        let sr = sqrt(r_eff);
        let kn = pa.x * sr;
        return vec4<f32>(kn, pa.y * sr, pa.z, pa.w * sqrt(1.5 * kn * m_eff));
    }
    var c = pb.x;
    if (!(pb.x > 0.0)) {
        c = pa.w * sqrt(m_eff * pa.x);
    }
    return vec4<f32>(pa.x, pa.y, pa.z, c);
}

// The contact with constants `k` (pair_constants_of) at overlap `delta`:
// Hertz scales the stiffnesses by sqrt(delta) and the damping by
// delta^(1/4), tangentially times sqrt(2/3 kt / kn) (contact_stiffness in forces.rs).
fn contact_force_k(n: vec3<f32>, delta: f32, vr: vec3<f32>, wsum: vec3<f32>, k: vec4<f32>, xi_old: vec3<f32>, dt_hist: f32) -> ContactOut {
    if (CONTACT_MODEL == HERTZ) {
        let s = sqrt(max(delta, 0.0));
        let q = sqrt(s);
        var kn0 = k.x;
        if (!(kn0 > 0.0)) {
            kn0 = 1.0;
        }
        let cn = k.w * q;
        let ct = cn * sqrt(k.y * (2.0 / 3.0) / kn0);
        return contact_force_damped(n, delta, vr, wsum, cn, ct, k.x * s, k.y * s, k.z, xi_old, dt_hist);
    }
    return contact_force_damped(n, delta, vr, wsum, k.w, k.w, k.x, k.y, k.z, xi_old, dt_hist);
}

// contact_force_k with the constants of the materials' pair `pa`, `pb`
// (contact_force in forces.rs).
fn contact_force(n: vec3<f32>, delta: f32, vr: vec3<f32>, wsum: vec3<f32>, m_eff: f32, r_eff: f32, pa: vec4<f32>, pb: vec4<f32>, xi_old: vec3<f32>, dt_hist: f32) -> ContactOut {
    return contact_force_k(n, delta, vr, wsum, pair_constants_of(pa, pb, r_eff, m_eff), xi_old, dt_hist);
}
