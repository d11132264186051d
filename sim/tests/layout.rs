//! Every `#[repr(C)]` struct the kernels read (`stages/common.rs`) has the
//! size and member offsets of its WGSL twin in `common.wgsl` (naga's layouter
//! is the judge), so a field added on one side only fails here, not as
//! garbage on the GPU. Every stage compiles and defines the kernels it is
//! registered with.
#![allow(clippy::unwrap_used)]

use std::mem::{offset_of, size_of};

use pellet_gpu::naga;
use pellet_sim::stages::common::{BodyGpu, ModeGpu, Params, ScanLenGpu};
use pellet_sim::stages::{STAGES, SimShaders};

/// (WGSL member, Rust byte offset) for each member of the WGSL struct.
fn params_members() -> Vec<(&'static str, usize)> {
    let f = 4; // one f32 / u32 / i32
    vec![
        ("n", offset_of!(Params, n)),
        ("slots", offset_of!(Params, slots)),
        ("num_keys", offset_of!(Params, num_keys)),
        ("hashed", offset_of!(Params, hashed)),
        ("dim_x", offset_of!(Params, dims)),
        ("dim_y", offset_of!(Params, dims) + f),
        ("dim_z", offset_of!(Params, dims) + 2 * f),
        ("wall_count", offset_of!(Params, wall_count)),
        ("origin_x", offset_of!(Params, origin)),
        ("origin_y", offset_of!(Params, origin) + f),
        ("origin_z", offset_of!(Params, origin) + 2 * f),
        ("cell_size", offset_of!(Params, cell_size)),
        ("gravity_x", offset_of!(Params, gravity)),
        ("gravity_y", offset_of!(Params, gravity) + f),
        ("gravity_z", offset_of!(Params, gravity) + 2 * f),
        ("material_count", offset_of!(Params, material_count)),
        ("dt", offset_of!(Params, dt)),
        ("inv_cell", offset_of!(Params, inv_cell)),
        ("body_count", offset_of!(Params, body_count)),
        ("skin", offset_of!(Params, skin)),
        ("lo_x", offset_of!(Params, domain_min)),
        ("lo_y", offset_of!(Params, domain_min) + f),
        ("lo_z", offset_of!(Params, domain_min) + 2 * f),
        ("closed", offset_of!(Params, closed_faces)),
        ("hi_x", offset_of!(Params, domain_max)),
        ("hi_y", offset_of!(Params, domain_max) + f),
        ("hi_z", offset_of!(Params, domain_max) + 2 * f),
        ("contact_model", offset_of!(Params, contact_model)),
        ("rolling_model", offset_of!(Params, rolling_model)),
        ("periodic", offset_of!(Params, periodic)),
        ("pad3_1", offset_of!(Params, pad3)),
        ("pad3_2", offset_of!(Params, pad3) + f),
    ]
}

fn body_members() -> Vec<(&'static str, usize)> {
    let row = 16;
    vec![
        ("position", offset_of!(BodyGpu, position)),
        ("orientation", offset_of!(BodyGpu, orientation)),
        ("momentum", offset_of!(BodyGpu, momentum)),
        ("angular_momentum", offset_of!(BodyGpu, angular_momentum)),
        ("omega", offset_of!(BodyGpu, omega)),
        ("velocity", offset_of!(BodyGpu, velocity)),
        ("inv_inertia0", offset_of!(BodyGpu, inv_inertia)),
        ("inv_inertia1", offset_of!(BodyGpu, inv_inertia) + row),
        ("inv_inertia2", offset_of!(BodyGpu, inv_inertia) + 2 * row),
        ("range", offset_of!(BodyGpu, range)),
    ]
}

fn mode_members() -> Vec<(&'static str, usize)> {
    vec![
        ("dt_hist", offset_of!(ModeGpu, dt_hist)),
        ("commit", offset_of!(ModeGpu, commit)),
        ("first", offset_of!(ModeGpu, first)),
        ("end", offset_of!(ModeGpu, end)),
    ]
}

fn scan_len_members() -> Vec<(&'static str, usize)> {
    vec![
        ("len", offset_of!(ScanLenGpu, len)),
        ("pad0", offset_of!(ScanLenGpu, pad)),
        ("pad1", offset_of!(ScanLenGpu, pad) + 4),
        ("pad2", offset_of!(ScanLenGpu, pad) + 8),
    ]
}

#[test]
fn every_stage_compiles_with_its_kernels() {
    let compiled = SimShaders::builtin().compile().unwrap();
    assert_eq!(compiled.len(), STAGES.len());
    for (stage, c) in STAGES.iter().zip(&compiled) {
        assert_eq!(c.bindings.len(), stage.kernels.len(), "{}", stage.file);
        for kernel in stage.kernels {
            assert!(!c.bindings[kernel].is_empty(), "{kernel} binds nothing");
        }
    }
    // A kernel missing from its stage is refused with the stage's file.
    let mut shaders = SimShaders::builtin();
    let renamed = shaders
        .get("stats.wgsl")
        .unwrap()
        .replace("fn stats(", "fn stats_renamed(");
    assert!(shaders.set("stats.wgsl", renamed));
    let e = shaders.compile().unwrap_err().to_string();
    assert!(e.contains("stats.wgsl") && e.contains("`stats`"), "{e}");
    assert!(!shaders.set("sim.wgsl", String::new()));
}

#[test]
fn kernel_structs_match_their_wgsl_twins() {
    let common = SimShaders::builtin()
        .get("common.wgsl")
        .unwrap()
        .to_string();
    let (module, _) = pellet_gpu::validate_wgsl("common.wgsl", &common).unwrap();
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).unwrap();
    for (name, rust_size, members) in [
        ("Params", size_of::<Params>(), params_members()),
        ("Body", size_of::<BodyGpu>(), body_members()),
        ("Mode", size_of::<ModeGpu>(), mode_members()),
        ("ScanLen", size_of::<ScanLenGpu>(), scan_len_members()),
    ] {
        let (handle, ty) = module
            .types
            .iter()
            .find(|(_, t)| t.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no struct {name} in common.wgsl"));
        assert_eq!(layouter[handle].size as usize, rust_size, "size of {name}");
        let naga::TypeInner::Struct { members: wgsl, .. } = &ty.inner else {
            panic!("{name} is not a struct");
        };
        assert_eq!(wgsl.len(), members.len(), "members of {name}");
        for (w, (rust_name, rust_offset)) in wgsl.iter().zip(&members) {
            assert_eq!(w.name.as_deref(), Some(*rust_name), "{name} member order");
            assert_eq!(w.offset as usize, *rust_offset, "{name}.{rust_name} offset");
        }
    }
}
