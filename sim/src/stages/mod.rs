//! The simulation's stages, each a WGSL file beside its CPU twin of the same
//! name (as `vello_shaders/shader/*.wgsl` and `vello_shaders/src/cpu/*.rs`):
//!
//! | stage       | kernels                                                    |
//! |-------------|------------------------------------------------------------|
//! | `sort`      | `cell_keys`, `scan_block`, `scan_add`, `scatter`, `sort_cells`, `reorder_particles`, `reorder_rk2`, `reorder_history` |
//! | `forces`    | `compute_forces`                                           |
//! | `integrate` | `verlet_begin`, `verlet_end`, `rk2_mid`, `rk2_end`, `tick` |
//! | `bodies`    | `body_begin`, `body_end`, `body_particles`, `body_reduce`  |
//! | `stats`     | `stats`                                                    |
//! | `pairs`     | `skin_check`, `list_gate`, `list_gate_on_demand`, `list_halt`, `save_list`, `clear_cells`, `commit_reorder`, `commit_rk2`, `pair_count`, `pair_fill`, `pair_fill_low`, `pair_forces`, `pair_forces_uncounted`, `particle_forces`, `particle_forces_end`, `particle_forces_end_begin` |
//!
//! `common.wgsl` (structs, constants, every binding, shared helpers) is
//! compiled in front of each stage file; its structs' Rust twins are in
//! [`common`]. Every stage binds the same numbers for the same buffers, so
//! a buffer is one binding everywhere. [`STAGES`] registers each stage with
//! its kernels; [`SimShaders`] holds the sources one GPU simulation is built
//! from (the built-in ones, or edited copies for shader hot reload).

use std::collections::BTreeMap;

use pellet_gpu::{GpuError, naga, validate_wgsl};

pub mod bodies;
pub mod common;
pub mod forces;
pub mod integrate;
pub mod packed;
pub mod pairs;
pub mod sort;
pub mod stats;

/// The shared prelude every stage is compiled after.
pub const COMMON_FILE: &str = "common.wgsl";

/// One stage: its WGSL file and the kernels (entry points) it defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// Stage name, also the name of its CPU twin module.
    pub name: &'static str,
    /// WGSL file name, e.g. `forces.wgsl`.
    pub file: &'static str,
    /// Entry points the simulation dispatches, all defined in `file`.
    pub kernels: &'static [&'static str],
    builtin: &'static str,
}

/// Every stage, in step order.
pub const STAGES: [Stage; 6] = [
    Stage {
        name: "sort",
        file: "sort.wgsl",
        kernels: &[
            "cell_keys",
            "scan_block",
            "scan_add",
            "scatter",
            "sort_cells",
            "reorder_particles",
            "reorder_rk2",
            "reorder_history",
        ],
        builtin: include_str!("sort.wgsl"),
    },
    Stage {
        name: "forces",
        file: "forces.wgsl",
        kernels: &["compute_forces"],
        builtin: include_str!("forces.wgsl"),
    },
    Stage {
        name: "integrate",
        file: "integrate.wgsl",
        kernels: &["verlet_begin", "verlet_end", "rk2_mid", "rk2_end", "tick"],
        builtin: include_str!("integrate.wgsl"),
    },
    Stage {
        name: "bodies",
        file: "bodies.wgsl",
        kernels: &["body_begin", "body_end", "body_particles", "body_reduce"],
        builtin: include_str!("bodies.wgsl"),
    },
    Stage {
        name: "stats",
        file: "stats.wgsl",
        kernels: &["stats"],
        builtin: include_str!("stats.wgsl"),
    },
    Stage {
        name: "pairs",
        file: "pairs.wgsl",
        kernels: &[
            "skin_check",
            "list_gate",
            "list_gate_on_demand",
            "list_halt",
            "save_list",
            "clear_cells",
            "commit_reorder",
            "commit_rk2",
            "pair_count",
            "pair_fill",
            "pair_fill_low",
            "pair_forces",
            "pair_forces_uncounted",
            "particle_forces",
            "particle_forces_end",
            "particle_forces_end_begin",
        ],
        builtin: include_str!("pairs.wgsl"),
    },
];

const COMMON: &str = include_str!("common.wgsl");

/// Every simulation shader file name: `common.wgsl`, then each stage's.
pub fn shader_files() -> impl Iterator<Item = &'static str> {
    std::iter::once(COMMON_FILE).chain(STAGES.iter().map(|s| s.file))
}

/// How the kernels' storage arrays are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindingLayout {
    /// One binding per array (up to 21 storage bindings in one kernel).
    #[default]
    Separate,
    /// Arrays gathered into arenas (at most 7 storage bindings per kernel),
    /// for devices with few storage bindings per stage: [`packed`].
    Packed,
}

/// One stage compiled: the naga module, and the bindings each of its kernels uses.
#[derive(Debug)]
pub struct CompiledStage {
    /// The stage.
    pub stage: Stage,
    /// `common.wgsl` followed by the stage's source.
    pub source: String,
    /// The validated module.
    pub module: naga::Module,
    /// Binding numbers each kernel uses (naga's reflection), sorted.
    pub bindings: BTreeMap<&'static str, Vec<u32>>,
}

/// The WGSL sources a GPU simulation is built from: `common.wgsl` and one
/// file per stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimShaders {
    sources: BTreeMap<&'static str, String>,
}

impl Default for SimShaders {
    fn default() -> Self {
        Self::builtin()
    }
}

impl SimShaders {
    /// The shaders built into this program.
    pub fn builtin() -> Self {
        let mut sources = BTreeMap::new();
        sources.insert(COMMON_FILE, COMMON.to_string());
        for s in &STAGES {
            sources.insert(s.file, s.builtin.to_string());
        }
        Self { sources }
    }

    /// The source of `file` (`common.wgsl` or a stage's file), if it is one
    /// of the simulation's.
    pub fn get(&self, file: &str) -> Option<&str> {
        self.sources.get(file).map(String::as_str)
    }

    /// Replaces the source of `file`; returns false (and changes nothing)
    /// when `file` is not one of [`shader_files`].
    pub fn set(&mut self, file: &str, source: String) -> bool {
        match shader_files().find(|f| *f == file) {
            Some(f) => {
                self.sources.insert(f, source);
                true
            }
            None => false,
        }
    }

    /// The module source of `stage`: `common.wgsl` then the stage's file.
    pub fn module_source(&self, stage: &Stage) -> String {
        let common = self.get(COMMON_FILE).unwrap_or(COMMON);
        let own = self.get(stage.file).unwrap_or(stage.builtin);
        format!("{common}\n{own}")
    }

    /// Validates every stage (`common.wgsl` in front) with naga and reads
    /// which bindings each kernel uses. A stage that fails, or lacks one of
    /// its kernels, is a [`GpuError::Shader`] naming its file; line numbers
    /// in the report count `common.wgsl`'s lines first.
    pub fn compile(&self) -> Result<Vec<CompiledStage>, GpuError> {
        self.compile_for(BindingLayout::Separate)
    }

    /// As [`SimShaders::compile`], for `layout`: with
    /// [`BindingLayout::Packed`], each module is rewritten by
    /// [`packed::pack_source`] first.
    pub fn compile_for(&self, layout: BindingLayout) -> Result<Vec<CompiledStage>, GpuError> {
        let common = self.get(COMMON_FILE).unwrap_or(COMMON);
        validate_wgsl(COMMON_FILE, common)?;
        let common_lines = common.lines().count() + 1;
        let packed = packed::packed_bindings(common);
        STAGES
            .iter()
            .map(|stage| {
                let mut source = self.module_source(stage);
                if layout == BindingLayout::Packed {
                    source = packed::pack_source(&source, &packed).map_err(|e| match e {
                        GpuError::Shader { report, .. } => GpuError::Shader {
                            name: stage.file.to_string(),
                            report: format!(
                                "{report} (packed layout; line numbers count the \
                                 {common_lines} lines of {COMMON_FILE} first)"
                            ),
                        },
                        other => other,
                    })?;
                }
                let (module, info) = validate_wgsl(stage.file, &source).map_err(|e| match e {
                    GpuError::Shader { name, report } => GpuError::Shader {
                        name,
                        report: format!(
                            "{report}\n(line numbers count the {common_lines} lines of \
                             {COMMON_FILE} first)"
                        ),
                    },
                    other => other,
                })?;
                let mut bindings = BTreeMap::new();
                for &kernel in stage.kernels {
                    let Some(index) = module.entry_points.iter().position(|e| e.name == kernel)
                    else {
                        return Err(GpuError::Shader {
                            name: stage.file.to_string(),
                            report: format!(
                                "kernel `{kernel}` is missing (the simulation dispatches it)"
                            ),
                        });
                    };
                    let fi = info.get_entry_point(index);
                    let mut used: Vec<u32> = module
                        .global_variables
                        .iter()
                        .filter(|(handle, _)| !fi[*handle].is_empty())
                        .filter_map(|(_, var)| var.binding.as_ref().map(|b| b.binding))
                        .collect();
                    used.sort_unstable();
                    bindings.insert(kernel, used);
                }
                Ok(CompiledStage {
                    stage: *stage,
                    source,
                    module,
                    bindings,
                })
            })
            .collect()
    }
}
