// GPU self-test: out[i] = hash(in[i] ^ seed) with the PCG output permutation.
// CPU twin: `selftest::hash_cpu` in selftest.rs (keep in sync).

struct SelfTestParams {
    len: u32,
    seed: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: SelfTestParams;
@group(0) @binding(1) var<storage, read> input: array<u32>;
@group(0) @binding(2) var<storage, read_write> output: array<u32>;

fn pcg_hash(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

@compute @workgroup_size(64)
fn hash_fill(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.len) {
        return;
    }
    output[i] = pcg_hash(input[i] ^ params.seed);
}
