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

fn flat_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

fn kernel_time() -> f32 {
    return f32(clock[0]) * params.dt;
}


// Grid cells (GridSpec::cell_coord and cell_key in grid.rs).

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
