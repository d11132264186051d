// Stage `bodies`: rigid bodies made of particles. Body poses and momenta
// (`body_begin`, `body_end`), their particles placed from the pose
// (`body_particles`), and the force and torque on each body summed over its
// particles (`body_reduce`). CPU twin: `bodies.rs`, same kernel names.
// Compiled after `common.wgsl`.

var<workgroup> wg_v4a: array<vec4<f32>, 256>;
var<workgroup> wg_v4b: array<vec4<f32>, 256>;

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
