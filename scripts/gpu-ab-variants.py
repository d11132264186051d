#!/usr/bin/env python3
"""Writes the timing variants of sim/src/stages/pairs.wgsl behind the GPU-path
figures of docs/simulation.md ("Performance"), and prints the PELLET_AB value
that loads them into the in-process harness (player/tests/gpu_ab.rs):

  no_pairs     pair_forces_uncounted's body emptied (the pair kernel's share)
  no_particles the particle pass's body emptied (its share)
  neither      both emptied (dispatches and empty invocations)
  fused        no pair kernel; each particle computes its own and its
               partners' pairs itself (a timing sketch: its reads race with
               the writes, so its bits are not the engine's)

  PELLET_TIMING_SCENE=/abs/pack43.toml ROUNDS=16 \\
  PELLET_AB="$(python3 scripts/gpu-ab-variants.py /tmp/variants)" \\
  cargo test --release -p pellet-player --test gpu_ab -- --ignored --nocapture

Variant k of the harness's output is the k-th name above.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

PAIRS_BODY = """    if (p < min(pair_start[params.n], atomicLoad(&list_state[LS_CAPACITY]))) {
        _ = pair_force_of(p);
    }"""
PARTICLES_BODY = """    if (i < params.n && in_force_range(i)) {
        sum_particle(i, SUM_END_BEGIN);
    }"""
SUMS = """    for (var p = pair_start[i]; p < pair_start[i + 1u]; p = p + 1u) {
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
    }"""
FUSED_SUMS = """    for (var p = pair_start[i]; p < pair_start[i + 1u]; p = p + 1u) {
        let r = fused_pair(p, i, pair_j[p], pi, vi, wi, true);
        f = f + r.f;
        t = t + r.t * pi.w;
    }
    for (var q = low_start[i]; q < low_start[i + 1u]; q = q + 1u) {
        let p = low_index[q];
        let o = pair_i[p];
        let r = fused_pair(p, o, i, pos[o], vel[o], angvel[o], false);
        f = f - r.f;
        t = t + r.t * pi.w;
    }"""
FUSED_PAIR = """struct FusedOut { f: vec3<f32>, t: vec3<f32>, }

// The force of pair p (owner o, partner j) from the owner's side.
fn fused_pair(p: u32, o: u32, j: u32, po: vec4<f32>, vo: vec4<f32>, wo: vec4<f32>, write: bool) -> FusedOut {
    var r: FusedOut;
    r.f = vec3<f32>(0.0);
    r.t = vec3<f32>(0.0);
    let pj = pos[j];
    let d = min_image(po.xyz - pj.xyz);
    let dist2 = dot(d, d);
    let rsum = po.w + pj.w;
    let h = pair_hist[p];
    if (dist2 >= rsum * rsum) {
        if (write && mode.commit != 0u && any(bitcast<vec3<u32>>(h.xyz) != vec3<u32>(0u))) {
            pair_hist[p] = vec4<f32>(vec3<f32>(0.0), h.w);
        }
        return r;
    }
    let vj = vel[j];
    let wj = angvel[j];
    let dist = sqrt(dist2);
    var n = vec3<f32>(0.0, 1.0, 0.0);
    if (dist > 0.0) {
        n = d * (1.0 / dist);
    }
    let k = pair_const[p];
    let out = contact_force_k(n, rsum - dist, vo.xyz - vj.xyz, wo.xyz * po.w + wj.xyz * pj.w, k, h.xyz, mode.dt_hist);
    if (write && mode.commit != 0u) {
        pair_hist[p] = vec4<f32>(out.xi, h.w);
    }
    r.f = out.f;
    r.t = cross(out.ft, n);
    return r;
}

fn sum_particle(i: u32, then: u32) {"""


def replace(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        sys.exit(f"gpu-ab-variants: pairs.wgsl changed; no single match for:\n{old}")
    return text.replace(old, new)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: gpu-ab-variants.py OUT_DIR")
    out = pathlib.Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = (ROOT / "sim/src/stages/pairs.wgsl").read_text()
    no_pairs = replace(base, PAIRS_BODY, "    _ = p;")
    variants = {
        "no_pairs": no_pairs,
        "no_particles": replace(base, PARTICLES_BODY, "    _ = i;"),
        "neither": replace(no_pairs, PARTICLES_BODY, "    _ = i;"),
        "fused": replace(
            replace(no_pairs, "fn sum_particle(i: u32, then: u32) {", FUSED_PAIR), SUMS, FUSED_SUMS
        ),
    }
    paths = []
    for name, text in variants.items():
        path = out / f"{name}.wgsl"
        path.write_text(text)
        paths.append(f"pairs.wgsl={path}")
    print(",".join(paths))


if __name__ == "__main__":
    main()
