// Stage `forces`: contact forces and torques between particles and with
// walls (Cundall-Strack spring-dashpot with a tangential history spring,
// LIGGGHTS `hooke/history`). CPU twin: `forces.rs`, same function names.
// Compiled after `common.wgsl`.

struct Acc {
    force: vec3<f32>,
    torque: vec3<f32>,
    new_count: u32,
    touching: u32,
    wall_touching: u32,
    overflow: u32,
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
    let r_eff = pi.w * pj.w / rsum;
    let out = contact_force(n, delta, vr, wsum, m_eff, r_eff, pairs[p], pairs[p + 1u], xi_old, mode.dt_hist);
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
    let out = contact_force(n, delta, vi.xyz, wi.xyz * pi.w, 1.0 / vi.w, pi.w, pairs[p], pairs[p + 1u], xi_old, mode.dt_hist);
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
