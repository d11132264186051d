//! This crate's own WGSL (the adapter self-test) validates with naga,
//! offline: a broken shader fails here on any machine, GPU or not. Every
//! other crate checks its own shaders the same way (`sim/tests/layout.rs`,
//! `bake/tests/voxelize_gpu.rs`, `nns/src/gpu.rs`, `player/tests/shader_reload.rs`).

#[test]
fn the_self_test_shader_validates() {
    pellet_gpu::validate_wgsl("selftest.wgsl", pellet_gpu::selftest::SHADER)
        .unwrap_or_else(|e| panic!("{e}"));
}
