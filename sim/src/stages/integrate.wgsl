// Stage `integrate`: velocity Verlet (half kick, drift / half kick) and RK2
// (midpoint) updates of free particles, with the non-finite and escape
// checks, and the step counter. CPU twin: `integrate.rs`, same kernel names.
// Compiled after `common.wgsl`.

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
