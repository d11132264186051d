// Stage `pairs`: the neighbour list with a skin on the GPU. CPU twin:
// `pairs.rs`, same kernel names. Compiled after `common.wgsl`.
//
// Each force evaluation runs:
//   skin_check   every particle: moved more than half the skin since the build?
//   list_gate    one thread: writes the indirect dispatches of the rebuild
//                (all of them, or none) and of the step (none once halted);
//   the rebuild  (indirect) save_list, clear_cells, the counting sort of
//                `sort.wgsl`, commit_reorder (+ commit_rk2), pair_count, two
//                prefix sums, pair_fill; then list_halt (one thread) and
//                pair_fill_low;
//   pair_forces  each pair once: its force, torque term and spring in place;
//   particle_forces  each particle sums its own pairs (+) and those it is the
//                partner of (-) in list order, adds gravity and walls.
// No float atomics: every sum has a fixed order, so reruns are bit-identical.
// A rebuild that needs more pairs than the buffers hold halts the batch
// (every later dispatch gets zero workgroups); the host grows the buffers
// and resumes from that very evaluation (`gpu/pairs/resume.rs`).

// list_state slots (ListState in gpu/pairs/mod.rs).
const LS_REBUILD: u32 = 0u;   // 1: rebuild at the next list_gate
const LS_HALT: u32 = 1u;      // 0, or 1 + the ForceKind of the evaluation that halted (+ HALT_REBUILD_DUE)
const LS_NEEDED: u32 = 2u;    // pairs the halted rebuild needed
const LS_REBUILDS: u32 = 3u;  // rebuilds so far
const LS_CAPACITY: u32 = 4u;  // pairs the buffers hold
const LS_SLOTS: u32 = 5u;     // dispatch slots in dispatch_template

// dispatch_template[k].w: which kind of dispatch slot k is.
const SLOT_STEP: u32 = 0u;
const SLOT_REBUILD: u32 = 1u;
// One invocation per listed pair: the counts follow the list's length.
const SLOT_PAIRS: u32 = 2u;

fn force_kind() -> u32 {
    // ForceKind: Commit 0, Trial 1, Prime 2 (see the modes in buffers.rs).
    if (mode.commit == 0u) {
        return 1u;
    }
    if (mode.dt_hist == 0.0) {
        return 2u;
    }
    return 0u;
}

@compute @workgroup_size(256)
fn skin_check(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let d = pos[i].xyz - pos_ref[i].xyz;
    let half = 0.5 * params.skin;
    // NaN compares false: the non-finite check reports it instead.
    if (dot(d, d) > half * half) {
        atomicMax(&list_state[LS_REBUILD], 1u);
    }
}

fn write_slot(k: u32, on: bool) {
    var t = dispatch_template[k];
    if (t.w == SLOT_PAIRS) {
        // 256 pairs per workgroup, laid out as dispatch_2d lays them.
        let cap = atomicLoad(&list_state[LS_CAPACITY]);
        let groups = max((min(pair_start[params.n], cap) + WG - 1u) / WG, 1u);
        let x = min(groups, 65535u);
        t = vec4<u32>(x, (groups + x - 1u) / x, 1u, t.w);
    }
    if (on) {
        dispatch_args[k * 3u] = t.x;
        dispatch_args[k * 3u + 1u] = t.y;
        dispatch_args[k * 3u + 2u] = t.z;
    } else {
        dispatch_args[k * 3u] = 0u;
        dispatch_args[k * 3u + 1u] = 1u;
        dispatch_args[k * 3u + 2u] = 1u;
    }
}

@compute @workgroup_size(1)
fn list_gate() {
    let halted = atomicLoad(&list_state[LS_HALT]) != 0u;
    let rebuild = atomicLoad(&list_state[LS_REBUILD]) != 0u && !halted;
    atomicStore(&list_state[LS_REBUILD], 0u);
    if (rebuild) {
        atomicAdd(&list_state[LS_REBUILDS], 1u);
    }
    let slots = atomicLoad(&list_state[LS_SLOTS]);
    for (var k = 0u; k < slots; k = k + 1u) {
        let kind = dispatch_template[k].w;
        write_slot(k, !halted && (kind != SLOT_REBUILD || rebuild));
    }
}

// Added to LS_HALT by list_gate_on_demand: the batch halted at a rebuild
// that was due but not recorded.
const HALT_REBUILD_DUE: u32 = 16u;

// The gate of an evaluation recorded without the rebuild's dispatches (the
// schedule for CPU adapters, where each dispatch costs about 0.1 ms even
// with no workgroups): a due rebuild halts the batch here, LS_REBUILD kept
// for the gate of the evaluation the host then resumes with the rebuild
// recorded; otherwise the step's slots as list_gate writes them.
@compute @workgroup_size(1)
fn list_gate_on_demand() {
    if (atomicLoad(&list_state[LS_HALT]) == 0u && atomicLoad(&list_state[LS_REBUILD]) != 0u) {
        atomicStore(&list_state[LS_HALT], HALT_REBUILD_DUE + 1u + force_kind());
    }
    let halted = atomicLoad(&list_state[LS_HALT]) != 0u;
    let slots = atomicLoad(&list_state[LS_SLOTS]);
    for (var k = 0u; k < slots; k = k + 1u) {
        write_slot(k, !halted && dispatch_template[k].w != SLOT_REBUILD);
    }
}

// After pair_fill: a halted batch runs nothing more; otherwise the pair
// kernels follow the new list's length.
@compute @workgroup_size(1)
fn list_halt() {
    let halted = atomicLoad(&list_state[LS_HALT]) != 0u;
    let slots = atomicLoad(&list_state[LS_SLOTS]);
    for (var k = 0u; k < slots; k = k + 1u) {
        if (halted) {
            write_slot(k, false);
        } else if (dispatch_template[k].w == SLOT_PAIRS) {
            write_slot(k, true);
        }
    }
}

// Keeps the list being replaced: its row starts and springs, in the order
// before this rebuild's sort.
@compute @workgroup_size(256)
fn save_list(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i > params.n) {
        return;
    }
    old_start[i] = pair_start[i];
    if (i == params.n) {
        return;
    }
    // Free particles back into the box before the sort (body particles
    // follow their bodies' continuous poses).
    if (PERIODIC != 0u && pinfo[i].z == FREE) {
        pos[i] = wrap_position(pos[i]);
    }
    let cap = atomicLoad(&list_state[LS_CAPACITY]);
    let end = min(pair_start[i + 1u], cap);
    let roll = ROLLING_MODEL == ROLL_EPSD2;
    for (var p = pair_start[i]; p < end; p = p + 1u) {
        old_hist[p] = pair_hist[p];
        if (roll) {
            old_roll[p] = pair_roll[p];
        }
    }
    let w0 = i * params.wall_count;
    for (var w = 0u; w < params.wall_count; w = w + 1u) {
        wall_hist_old[w0 + w] = wall_hist[w0 + w];
        if (roll) {
            wall_roll_old[w0 + w] = wall_roll[w0 + w];
        }
    }
}

@compute @workgroup_size(256)
fn clear_cells(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k > params.num_keys) {
        return;
    }
    atomicStore(&cell_count[k], 0u);
    if (k < params.num_keys) {
        atomicStore(&cursor[k], 0u);
    }
}

// After reorder_particles: the gathered state becomes current, the build
// positions are these, and each wall spring follows its particle.
@compute @workgroup_size(256)
fn commit_reorder(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.n) {
        return;
    }
    pos[k] = pos_out[k];
    vel[k] = vel_out[k];
    angvel[k] = angvel_out[k];
    pinfo[k] = pinfo_out[k];
    local[k] = local_out[k];
    pos_ref[k] = pos_out[k];
    let src = sorted_index[k];
    for (var w = 0u; w < params.wall_count; w = w + 1u) {
        wall_hist[k * params.wall_count + w] = wall_hist_old[src * params.wall_count + w];
        if (ROLLING_MODEL == ROLL_EPSD2) {
            wall_roll[k * params.wall_count + w] = wall_roll_old[src * params.wall_count + w];
        }
    }
    wall_mask[k] = walls_within_reach(pos_out[k], vel_out[k].w);
}

// Walls (below 32) a particle can touch before the next build: closer
// than its radius plus the skin. Immovable particles feel no walls.
fn walls_within_reach(p: vec4<f32>, inv_mass: f32) -> u32 {
    var mask = 0u;
    if (!(inv_mass > 0.0)) {
        return mask;
    }
    for (var w = 0u; w < min(params.wall_count, 32u); w = w + 1u) {
        let wa = walls[w * 2u];
        if (dot(wa.xyz, p.xyz) - wa.w < p.w + params.skin) {
            mask = mask | (1u << w);
        }
    }
    return mask;
}

// After reorder_rk2: RK2's start-of-step copies in the new order.
@compute @workgroup_size(256)
fn commit_rk2(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat_index(gid, nwg);
    if (k >= params.n) {
        return;
    }
    pos0[k] = pos_out[k];
    vel0[k] = vel_out[k];
    angvel0[k] = angvel_out[k];
}

// Whether i and j are listed: closer than r_i + r_j + skin, not of one
// body, not both immovable. Symmetric in i and j to the last bit.
fn listed(pi: vec4<f32>, mi: vec4<u32>, inv_mass_i: f32, j: u32) -> bool {
    let pj = pos[j];
    let d = min_image(pi.xyz - pj.xyz);
    let reach = pi.w + pj.w + params.skin;
    if (dot(d, d) >= reach * reach) {
        return false;
    }
    let mj = pinfo[j];
    if (mi.z != FREE && mi.z == mj.z) {
        return false;
    }
    return inv_mass_i + vel[j].w != 0.0;
}

// Where the old list held the pair (i, j): its index and +1 when found in
// the old row of i (partner id j), -1 in the row of j (partner id i: its
// values negated for i's view), 0 when not listed.
struct Carried {
    p: u32,
    sign: f32,
}

fn carried_entry(i: u32, j: u32) -> Carried {
    let cap = atomicLoad(&list_state[LS_CAPACITY]);
    let id_i = pinfo[i].x;
    let id_j = pinfo[j].x;
    let oi = sorted_index[i];
    let oj = sorted_index[j];
    for (var p = old_start[oi]; p < min(old_start[oi + 1u], cap); p = p + 1u) {
        if (bitcast<u32>(old_hist[p].w) == id_j) {
            return Carried(p, 1.0);
        }
    }
    for (var p = old_start[oj]; p < min(old_start[oj + 1u], cap); p = p + 1u) {
        if (bitcast<u32>(old_hist[p].w) == id_i) {
            return Carried(p, -1.0);
        }
    }
    return Carried(0u, 0.0);
}

const OP_COUNT: u32 = 0u;
const OP_FILL: u32 = 1u;
const OP_LOW: u32 = 2u;

struct Walk {
    up: u32,
    low: u32,
}

fn visit(i: u32, j: u32, pi: vec4<f32>, mi: vec4<u32>, inv_mass_i: f32, op: u32, walk: ptr<function, Walk>) {
    if (j == i || !listed(pi, mi, inv_mass_i, j)) {
        return;
    }
    if (j > i) {
        if (op == OP_FILL) {
            let p = pair_start[i] + (*walk).up;
            pair_i[p] = i;
            pair_j[p] = j;
            // The spring (and stored rolling torque) the old list held, in
            // i's view.
            let c = carried_entry(i, j);
            var spring = vec3<f32>(0.0);
            var roll = vec3<f32>(0.0);
            if (c.sign != 0.0) {
                spring = old_hist[c.p].xyz * c.sign;
                if (ROLLING_MODEL == ROLL_EPSD2) {
                    roll = old_roll[c.p].xyz * c.sign;
                }
            }
            pair_hist[p] = vec4<f32>(spring, bitcast<f32>(pinfo[j].x));
            if (ROLLING_MODEL == ROLL_EPSD2) {
                pair_roll[p] = vec4<f32>(roll, 0.0);
            }
            pair_const[p] = pair_constants(mi.y, pinfo[j].y, inv_mass_i + vel[j].w, pi.w, pos[j].w);
        }
        (*walk).up = (*walk).up + 1u;
    } else {
        if (op == OP_LOW) {
            // The pair (j, i) sits in j's row of the new list.
            var found = 0u;
            for (var p = pair_start[j]; p < pair_start[j + 1u]; p = p + 1u) {
                if (pair_j[p] == i) {
                    found = p;
                    break;
                }
            }
            low_index[low_start[i] + (*walk).low] = found;
        }
        (*walk).low = (*walk).low + 1u;
    }
}

// The contact constants of a pair of materials (pair_constants_of): kn,
// kt, mu and the damping for the pair's effective mass (1 / inv_mass_sum)
// and radius (radii r_i, r_j).
fn pair_constants(mat_i: u32, mat_j: u32, inv_mass_sum: f32, r_i: f32, r_j: f32) -> vec4<f32> {
    let k = (mat_i * params.material_count + mat_j) * 2u;
    return pair_constants_of(pairs[k], pairs[k + 1u], r_i * r_j / (r_i + r_j), 1.0 / inv_mass_sum);
}

// Every listed partner of i in the 27 cells around it, in a fixed order
// (z, y, then x ascending): the same walk counts, fills and finds.
fn walk_neighbours(i: u32, op: u32) -> Walk {
    let pi = pos[i];
    let mi = pinfo[i];
    let inv_mass_i = vel[i].w;
    var walk = Walk(0u, 0u);
    let c = cell_coord(pi.xyz);
    if (PERIODIC != 0u) {
        // The 27 cells one by one, coordinates wrapped along the periodic
        // axes (for_each_neighbour in lib.rs).
        let dims = vec3<i32>(params.dim_x, params.dim_y, params.dim_z);
        for (var dz = -1; dz <= 1; dz = dz + 1) {
            for (var dy = -1; dy <= 1; dy = dy + 1) {
                for (var dx = -1; dx <= 1; dx = dx + 1) {
                    var cc = c + vec3<i32>(dx, dy, dz);
                    var outside = false;
                    for (var a = 0u; a < 3u; a = a + 1u) {
                        if ((PERIODIC & (1u << a)) != 0u) {
                            cc[a] = (cc[a] + dims[a]) % dims[a];
                        } else if (params.hashed == 0u && (cc[a] < 0 || cc[a] >= dims[a])) {
                            outside = true;
                        }
                    }
                    if (outside) {
                        continue;
                    }
                    let k = cell_key(cc);
                    let end = cell_start[k + 1u];
                    for (var j = cell_start[k]; j < end; j = j + 1u) {
                        if (params.hashed == 0u || all(cell_coord(pos[j].xyz) == cc)) {
                            visit(i, j, pi, mi, inv_mass_i, op, &walk);
                        }
                    }
                }
            }
        }
        return walk;
    }
    for (var dz = -1; dz <= 1; dz = dz + 1) {
        for (var dy = -1; dy <= 1; dy = dy + 1) {
            if (params.hashed != 0u) {
                for (var dx = -1; dx <= 1; dx = dx + 1) {
                    let cc = c + vec3<i32>(dx, dy, dz);
                    let k = cell_key(cc);
                    let end = cell_start[k + 1u];
                    for (var j = cell_start[k]; j < end; j = j + 1u) {
                        if (all(cell_coord(pos[j].xyz) == cc)) {
                            visit(i, j, pi, mi, inv_mass_i, op, &walk);
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
                    visit(i, j, pi, mi, inv_mass_i, op, &walk);
                }
            }
        }
    }
    return walk;
}

@compute @workgroup_size(256)
fn pair_count(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let walk = walk_neighbours(i, OP_COUNT);
    row_count[i] = walk.up;
    low_count[i] = walk.low;
}

// Fills each particle's row, carrying springs over; a list larger than the
// buffers halts instead (every invocation sees the same total).
@compute @workgroup_size(256)
fn pair_fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    let total = pair_start[params.n];
    if (total > atomicLoad(&list_state[LS_CAPACITY])) {
        if (i == 0u) {
            atomicMax(&list_state[LS_NEEDED], total);
            atomicStore(&list_state[LS_HALT], 1u + force_kind());
        }
        return;
    }
    walk_neighbours(i, OP_FILL);
}

@compute @workgroup_size(256)
fn pair_fill_low(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= params.n) {
        return;
    }
    walk_neighbours(i, OP_LOW);
}

// Each listed pair once, one invocation per pair: the force on the owner,
// the torque term f_t x n (the owner's torque is it times r_i, the
// partner's times r_j), and the spring kept in place (cleared once apart).
// `pair_forces` also counts the touching pairs: the last step of a batch
// (whose counters are read back), block-wise stepping and the stage tests
// run it; the other steps run `pair_forces_uncounted`, the same forces
// without the count's workgroup atomic and barrier, which cost a sixth of
// the step on lavapipe (docs/simulation.md).
var<workgroup> wg_touching: atomic<u32>;

@compute @workgroup_size(256)
fn pair_forces(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = flat_index(gid, nwg);
    let total = min(pair_start[params.n], atomicLoad(&list_state[LS_CAPACITY]));
    // Pairs owned outside the force range (a block's halo, block-wise
    // stepping) are evaluated for their partners but counted by their block.
    if (p < total && pair_force_of(p) && in_force_range(pair_i[p])) {
        atomicAdd(&wg_touching, 1u);
    }
    // One atomic per workgroup: counted by both partners, as compute_forces counts.
    workgroupBarrier();
    if (lid == 0u) {
        let touching = atomicLoad(&wg_touching);
        if (touching > 0u) {
            atomicAdd(&counters[C_CONTACTS], 2u * touching);
        }
    }
}

@compute @workgroup_size(256)
fn pair_forces_uncounted(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let p = flat_index(gid, nwg);
    if (p < min(pair_start[params.n], atomicLoad(&list_state[LS_CAPACITY]))) {
        _ = pair_force_of(p);
    }
}

// Whether particle `i` is in the force range (`mode.first..end`: all of
// them in core; a block's own particles when stepping block by block).
fn in_force_range(i: u32) -> bool {
    return i >= mode.first && i < mode.end;
}

fn pair_force_of(p: u32) -> bool {
    let i = pair_i[p];
    let j = pair_j[p];
    let pi = pos[i];
    let pj = pos[j];
    let d = min_image(pi.xyz - pj.xyz);
    let dist2 = dot(d, d);
    let rsum = pi.w + pj.w;
    let h = pair_hist[p];
    let rolling = ROLLING_MODEL != ROLL_NONE;
    if (dist2 >= rsum * rsum) {
        pair_force[p] = vec4<f32>(0.0);
        pair_torque[p] = vec4<f32>(0.0);
        if (rolling) {
            pair_roll_m[p] = vec4<f32>(0.0);
        }
        if (mode.commit != 0u) {
            // A spring already cleared (every bit zero) is not written again.
            if (any(bitcast<vec3<u32>>(h.xyz) != vec3<u32>(0u))) {
                pair_hist[p] = vec4<f32>(vec3<f32>(0.0), h.w);
            }
            if (ROLLING_MODEL == ROLL_EPSD2) {
                pair_roll[p] = vec4<f32>(0.0);
            }
        }
        return false;
    }
    let vi = vel[i];
    let vj = vel[j];
    let wi = angvel[i];
    let wj = angvel[j];
    let dist = sqrt(dist2);
    var n: vec3<f32>;
    if (dist > 0.0) {
        n = d * (1.0 / dist);
    } else if (pinfo[i].x < bitcast<u32>(h.w)) {
        n = vec3<f32>(0.0, 1.0, 0.0);
    } else {
        n = vec3<f32>(0.0, -1.0, 0.0);
    }
    let delta = rsum - dist;
    let vr = vi.xyz - vj.xyz;
    let wsum = wi.xyz * pi.w + wj.xyz * pj.w;
    let k = pair_const[p];
    let out = contact_force_k(n, delta, vr, wsum, k, h.xyz, mode.dt_hist);
    pair_force[p] = vec4<f32>(out.f, 0.0);
    pair_torque[p] = vec4<f32>(cross(out.ft, n), 0.0);
    if (mode.commit != 0u) {
        pair_hist[p] = vec4<f32>(out.xi, h.w);
    }
    if (rolling) {
        let mu_roll = pairs[(pinfo[i].y * params.material_count + pinfo[j].y) * 2u + 1u].y;
        var stored = vec3<f32>(0.0);
        if (ROLLING_MODEL == ROLL_EPSD2) {
            stored = pair_roll[p].xyz;
        }
        let r = rolling_torque(n, wi.xyz - wj.xyz, out.kt, out.kn_delta, out.fn_mag, pi.w * pj.w / rsum, mu_roll, stored, mode.dt_hist);
        pair_roll_m[p] = vec4<f32>(r.m, 0.0);
        if (mode.commit != 0u && ROLLING_MODEL == ROLL_EPSD2) {
            pair_roll[p] = vec4<f32>(r.stored, 0.0);
        }
    }
    return true;
}

// What particle_forces does after the sums (velocity Verlet, free
// particles): nothing; the closing half kick of this step; or that and the
// opening kick and drift of the next step with its skin check, in one pass.
const SUM_ONLY: u32 = 0u;
const SUM_END: u32 = 1u;
const SUM_END_BEGIN: u32 = 2u;

@compute @workgroup_size(256)
fn particle_forces(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i < params.n && in_force_range(i)) {
        sum_particle(i, SUM_ONLY);
    }
}

@compute @workgroup_size(256)
fn particle_forces_end(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i < params.n && in_force_range(i)) {
        sum_particle(i, SUM_END);
    }
}

@compute @workgroup_size(256)
fn particle_forces_end_begin(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i < params.n && in_force_range(i)) {
        sum_particle(i, SUM_END_BEGIN);
    }
}

fn sum_particle(i: u32, then: u32) {
    let pi = pos[i];
    let vi = vel[i];
    let wi = angvel[i];
    var f = vec3<f32>(0.0);
    if (vi.w > 0.0) {
        f = vec3<f32>(params.gravity_x, params.gravity_y, params.gravity_z) * (1.0 / vi.w);
    }
    var t = vec3<f32>(0.0);
    let rolling = ROLLING_MODEL != ROLL_NONE;
    for (var p = pair_start[i]; p < pair_start[i + 1u]; p = p + 1u) {
        f = f + pair_force[p].xyz;
        t = t + pair_torque[p].xyz * pi.w;
        if (rolling) {
            t = t - pair_roll_m[p].xyz;
        }
    }
    for (var q = low_start[i]; q < low_start[i + 1u]; q = q + 1u) {
        let p = low_index[q];
        f = f - pair_force[p].xyz;
        t = t + pair_torque[p].xyz * pi.w;
        if (rolling) {
            t = t + pair_roll_m[p].xyz;
        }
    }
    let time = kernel_time();
    let material = pinfo[i].y;
    var wall_touching = 0u;
    // The walls within reach at the build, then any beyond the mask's 32.
    var mask = wall_mask[i];
    var w = 0u;
    loop {
        if (mask != 0u) {
            w = firstTrailingBit(mask);
            mask = mask & (mask - 1u);
        } else {
            w = max(w + 1u, 32u);
            if (w >= params.wall_count) {
                break;
            }
        }
        let slot = i * params.wall_count + w;
        var xi = vec3<f32>(0.0);
        var roll_new = vec3<f32>(0.0);
        let wa = walls[w * 2u];
        let wb = walls[w * 2u + 1u];
        let delta = pi.w - (dot(wa.xyz, pi.xyz) - wa.w);
        if (vi.w > 0.0 && time < wb.y && delta > 0.0) {
            let k = (material * params.material_count + bitcast<u32>(wb.x)) * 2u;
            let out = contact_force(wa.xyz, delta, vi.xyz, wi.xyz * pi.w, 1.0 / vi.w, pi.w, pairs[k], pairs[k + 1u], wall_hist[slot].xyz, mode.dt_hist);
            f = f + out.f;
            t = t + cross(out.ft, wa.xyz) * pi.w;
            xi = out.xi;
            if (rolling) {
                // The wall does not spin: the particle's spin is the relative one.
                var stored = vec3<f32>(0.0);
                if (ROLLING_MODEL == ROLL_EPSD2) {
                    stored = wall_roll[slot].xyz;
                }
                let r = rolling_torque(wa.xyz, wi.xyz, out.kt, out.kn_delta, out.fn_mag, pi.w, pairs[k + 1u].y, stored, mode.dt_hist);
                t = t - r.m;
                roll_new = r.stored;
            }
            wall_touching = wall_touching + 1u;
        }
        if (mode.commit != 0u) {
            wall_hist[slot] = vec4<f32>(xi, 0.0);
            if (ROLLING_MODEL == ROLL_EPSD2) {
                wall_roll[slot] = vec4<f32>(roll_new, 0.0);
            }
        }
    }
    force[i] = vec4<f32>(f, 0.0);
    torque[i] = vec4<f32>(t, 0.0);
    if (wall_touching > 0u) {
        atomicAdd(&counters[C_WALL_CONTACTS], wall_touching);
    }
    if (then == SUM_ONLY || pinfo[i].z != FREE) {
        return;
    }
    // verlet_end, then (SUM_END_BEGIN) verlet_begin and skin_check, with
    // the same arithmetic as those kernels.
    let half = 0.5 * params.dt;
    var v = vec4<f32>(vi.xyz + f * (vi.w * half), vi.w);
    var wv = vec4<f32>(wi.xyz + t * (wi.w * half), wi.w);
    check_finite_at(i, pi, v, wv, clock[0]);
    if (then == SUM_END_BEGIN) {
        v = vec4<f32>(v.xyz + f * (v.w * half), v.w);
        wv = vec4<f32>(wv.xyz + t * (wv.w * half), wv.w);
        let p = vec4<f32>(pi.xyz + v.xyz * params.dt, pi.w);
        pos[i] = p;
        check_finite_at(i, p, v, wv, clock[0] + 1u);
        let d = p.xyz - pos_ref[i].xyz;
        let skin_half = 0.5 * params.skin;
        if (dot(d, d) > skin_half * skin_half) {
            atomicMax(&list_state[LS_REBUILD], 1u);
        }
    }
    vel[i] = v;
    angvel[i] = wv;
}
