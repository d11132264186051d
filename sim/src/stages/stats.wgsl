// Stage `stats`: per-workgroup kinetic energy and largest speed, reduced in a
// fixed tree order. CPU twin: `stats.rs`. Compiled after `common.wgsl`.

var<workgroup> wg_f32a: array<f32, 256>;
var<workgroup> wg_f32b: array<f32, 256>;

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
