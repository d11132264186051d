// Stage `sort`: particles into cell order (counting sort by cell key, a
// prefix sum, a scatter, each cell ordered by persistent id), then the
// gathers of particle state and contact history into that order. CPU twin:
// `sort.rs`, same kernel names. Compiled after `common.wgsl`.

var<workgroup> wg_u32: array<u32, 256>;

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
