//! The player's text output: what `player gpu`, `player info`, `player run`
//! and `player nns` print for people (scripts take `--json`). Each function
//! writes aligned `name   value` lines to `out`.

use std::io::{self, Write};

use pellet_gpu::AdapterReport;
use pellet_gpu::selftest::SelfTestReport;
use pellet_nns::NnsReport;

use crate::scene_info::SceneInfo;
use crate::sim::run::RunSummary;

/// The adapter and its self-test (`player gpu`).
pub fn gpu_report(
    out: &mut impl Write,
    r: &AdapterReport,
    test: &SelfTestReport,
) -> io::Result<()> {
    writeln!(out, "adapter      {}", r.name)?;
    writeln!(out, "backend      {} ({})", r.backend, r.device_type)?;
    writeln!(out, "driver       {} {}", r.driver, r.driver_info)?;
    writeln!(
        out,
        "limits       {} MiB storage binding, {} MiB buffer, {} KiB workgroup memory, {} invocations",
        r.max_storage_buffer_binding_size >> 20,
        r.max_buffer_size >> 20,
        r.max_compute_workgroup_storage_size >> 10,
        r.max_compute_invocations_per_workgroup
    )?;
    writeln!(
        out,
        "timestamps   {}",
        if r.timestamps { "yes" } else { "no" }
    )?;
    writeln!(
        out,
        "self-test    {} of {} elements match the CPU twin",
        test.elements - test.mismatches,
        test.elements
    )?;
    Ok(())
}

/// What a scene holds (`player info`).
pub fn scene_info(out: &mut impl Write, info: &SceneInfo) -> io::Result<()> {
    writeln!(out, "scene           {}", info.name)?;
    if !info.description.is_empty() {
        writeln!(out, "description     {}", info.description)?;
    }
    writeln!(
        out,
        "free particles  {} (radius {} to {} m, {:.3} kg)",
        info.free_particles, info.radius_range_m[0], info.radius_range_m[1], info.free_mass_kg
    )?;
    let b = &info.bodies;
    writeln!(
        out,
        "bodies          {} entries: {} dynamic, {} static, {} kinematic",
        b.entries, b.dynamic, b.r#static, b.kinematic
    )?;
    writeln!(out, "walls           {} extra", info.walls)?;
    writeln!(
        out,
        "domain          {:?} to {:?} m, periodic {:?}",
        info.domain_m[0], info.domain_m[1], info.periodic
    )?;
    writeln!(out, "materials       {}", info.materials.join(", "))?;
    Ok(())
}

/// What a headless run did (`player run`).
pub fn run_summary(out: &mut impl Write, summary: &RunSummary) -> io::Result<()> {
    let l = &summary.last;
    writeln!(out, "scene        {}", summary.scene)?;
    writeln!(out, "backend      {}", summary.backend)?;
    writeln!(
        out,
        "particles    {} in all, {} bodies, dt {:.3e} s, {} steps ({:.4} s simulated)",
        summary.particles, summary.bodies, summary.dt, summary.steps, l.time
    )?;
    writeln!(
        out,
        "speed        {:.2} s, {:.3} ms/step, {:.3} M particle-steps/s",
        summary.seconds,
        summary.seconds * 1e3 / summary.steps.max(1) as f64,
        summary.particle_steps_per_s / 1e6
    )?;
    writeln!(
        out,
        "last step    {:.4e} J kinetic, max speed {:.3} m/s, {} contacts + {} on walls, max {} per cell, {} slot overflows, {} neighbour-list builds",
        l.kinetic_energy,
        l.max_speed,
        l.contacts,
        l.wall_contacts,
        l.max_cell_occupancy,
        l.slot_overflows,
        l.rebuilds
    )?;
    if let Some(r) = &l.ranks {
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" / ");
        let shares = r
            .comm_share
            .iter()
            .map(|s| format!("{:.0} %", s * 100.0))
            .collect::<Vec<_>>()
            .join(" / ");
        writeln!(
            out,
            "ranks        {} (MPI): {} particles owned, {} in halos; imbalance {:.3}; {:.1} MB sent in all, {:.1} kB per step; time in collectives {} (last stats window)",
            r.ranks,
            list(&r.owned),
            list(&r.halo),
            r.imbalance,
            r.bytes_sent as f64 / 1e6,
            r.bytes_sent as f64 / 1e3 / summary.steps.max(1) as f64,
            shares
        )?;
    }
    if let Some(b) = &summary.blocks {
        let budget = if b.budget == u64::MAX {
            "the device's buffer limits".to_string()
        } else {
            format!("budget {:.1} MiB", b.budget as f64 / 1048576.0)
        };
        let per_step = b.evaluations.max(1) as f64;
        writeln!(
            out,
            "blocks       {} per force evaluation, {:.1} MiB on the device for {:.1} MiB in core ({budget}); {:.1} % halo, {:.1} MB up and {:.1} MB down per evaluation; {:.2} s on blocks, {:.2} s on the host",
            b.blocks,
            b.device_bytes as f64 / 1048576.0,
            b.in_core_bytes as f64 / 1048576.0,
            100.0 * b.halo_particles as f64 / (per_step * summary.particles.max(1) as f64),
            b.bytes_up as f64 / 1e6 / per_step,
            b.bytes_down as f64 / 1e6 / per_step,
            b.device_s,
            b.host_s
        )?;
    }
    for p in &summary.saved {
        writeln!(out, "saved        {}", p.display())?;
    }
    if summary.frames > 0 {
        writeln!(out, "frames       {} PNG files", summary.frames)?;
    }
    Ok(())
}

/// What a neighbour search did (`player nns`).
pub fn nns_report(out: &mut impl Write, report: &NnsReport) -> io::Result<()> {
    writeln!(
        out,
        "points       {} ({} neighbours, {:.2} per point{})",
        report.points,
        report.neighbours,
        report.neighbours as f64 / report.points as f64,
        match report.expected_mean {
            Some(mean) => format!(
                "; the {} model expected {mean:.2}{}",
                report.estimate,
                report
                    .measured_rmse
                    .map(|r| format!(", RMSE {r:.2} on the sample"))
                    .unwrap_or_default()
            ),
            None => String::new(),
        }
    )?;
    writeln!(
        out,
        "grid         {:?} cells of {:.4} (eps / cell {:.3})",
        report.grid_dims, report.cell, report.ratio
    )?;
    writeln!(
        out,
        "blocks       {} ({}; {} split after overflowing), budget {} MiB",
        report.blocks,
        report.block_mode,
        report.splits,
        report.device_budget >> 20
    )?;
    if report.backend == "gpu" {
        writeln!(
            out,
            "split        {}; schedule {}",
            report.split(),
            report.schedule
        )?;
        if !report.decision.is_empty() {
            writeln!(out, "decision     {}", report.decision)?;
        }
    } else {
        writeln!(out, "split        every point on CPU threads")?;
    }
    writeln!(
        out,
        "time         {:.3} s ({:.2} M queries/s): grid {:.3} s, plan {:.3} s, search {:.3} s, assemble {:.3} s",
        report.total_s,
        report.queries_per_s / 1e6,
        report.phases.grid_s,
        report.phases.plan_s,
        report.phases.search_s,
        report.phases.assemble_s
    )?;
    if let Some(bytes) = report.peak_memory_bytes {
        writeln!(
            out,
            "memory       {:.2} GiB peak resident",
            bytes as f64 / f64::from(1u32 << 30)
        )?;
    }
    Ok(())
}
