//! GPU tests. They need an adapter and fail loudly without one: on a machine
//! without a GPU, install Mesa's lavapipe (`apt-get install
//! mesa-vulkan-drivers libvulkan1`), which `scripts/setup.sh` does.

use pellet_gpu::{BackendChoice, Gpu, selftest};

fn gpu(choice: BackendChoice) -> Gpu {
    Gpu::new(choice).unwrap_or_else(|e| panic!("GPU tests need an adapter: {e}"))
}

#[test]
fn an_adapter_is_found_and_reports_its_driver() {
    let gpu = gpu(BackendChoice::Auto);
    let r = &gpu.report;
    assert!(!r.name.is_empty());
    assert!(r.max_storage_buffer_binding_size >= 128 << 20, "{r:?}");
    eprintln!("adapter: {}", r.one_line());
}

#[test]
fn the_compute_self_test_matches_its_cpu_twin_on_awkward_sizes() {
    let gpu = gpu(BackendChoice::Auto);
    for len in [1, 63, 64, 65, 100_003] {
        let report = selftest::run(&gpu, len, 0xdead_beef).expect("self-test runs");
        assert_eq!(report.elements, len as usize);
        assert!(report.passed(), "{} of {len} differ", report.mismatches);
    }
}

#[test]
fn vulkan_is_available() {
    let gpu = gpu(BackendChoice::Vulkan);
    assert_eq!(gpu.report.backend, "Vulkan");
    assert!(selftest::run(&gpu, 1000, 1).expect("runs").passed());
}
