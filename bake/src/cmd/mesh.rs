//! `bake mesh`: one glTF mesh into a particle body (and a preview).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;

use pellet_bake::bake_mesh::{MeshBakeSettings, Voxelizer, bake_mesh};
use pellet_bake::output::Outputs;
use pellet_bake::progress::Progress;
use pellet_bake::report;
use pellet_bake::voxel::Resolution;
use pellet_bake::voxel::gpu::GpuVoxelizer;
use pellet_formats::DecodeLimits;
use pellet_formats::assets::FillMode;
use pellet_formats::error::{WriteError, WriteErrorKind};
use pellet_gpu::Gpu;

use crate::args::{Backend, MeshArgs, Mode};

pub fn run(args: MeshArgs) -> anyhow::Result<ExitCode> {
    let settings = settings(&args)?;
    // Every output is checked (not the input, a writable folder, not a
    // folder itself) before any work, and written only when all succeeded.
    let mut targets: Vec<&Path> = vec![&args.output];
    targets.extend(args.preview.as_deref());
    let mut outputs = Outputs::prepare(&targets, &[&args.input])?;
    let started = Instant::now();
    let progress = Progress::new(!args.quiet);
    let gpu_voxelizer = match args.backend {
        Backend::Gpu => {
            progress.stage("opening the GPU");
            Some(GpuVoxelizer::new(Gpu::new(args.gpu_backend)?))
        }
        Backend::Cpu => None,
    };
    let voxelizer = match &gpu_voxelizer {
        Some(v) => Voxelizer::Gpu(v),
        None => Voxelizer::Cpu,
    };
    let baked = match bake_mesh(&args.input, &settings, voxelizer, &progress) {
        Ok(b) => b,
        Err(e) => {
            progress.finish();
            return Err(e.into());
        }
    };
    let written = (|| -> anyhow::Result<()> {
        // A glTF's buffer files are known only now: they are inputs too.
        let inputs: Vec<&Path> = baked.inputs.iter().map(PathBuf::as_path).collect();
        outputs.refuse_inputs(&inputs)?;
        progress.stage(format!("writing {}", args.output.display()));
        let bytes = pellet_formats::container::encode(&baked.body)
            .map_err(|e| WriteError::new(&args.output, WriteErrorKind::Encode(e)))?;
        outputs.write(0, &bytes)?;
        tracing::debug!(bytes = bytes.len(), "written");
        if let Some(png) = &args.preview {
            let image = pellet_bake::preview::encode_png(&baked.body)
                .with_context(|| format!("{}: cannot render the preview", png.display()))?;
            outputs.write(1, &image)?;
        }
        outputs.commit()?;
        Ok(())
    })();
    progress.finish();
    written?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let inspection = pellet_bake::inspect::inspect(&args.output, &DecodeLimits::default())?;
        report::write_json(&mut stdout, &inspection)?;
    } else if !args.quiet {
        let line = report::mesh_summary(&args.input, &args.output, &baked.body, started.elapsed());
        writeln!(stdout, "{line}")?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The bake settings the arguments ask for, each number checked.
fn settings(args: &MeshArgs) -> anyhow::Result<MeshBakeSettings> {
    let resolution = match (args.voxel_size, args.resolution) {
        (Some(v), _) => Resolution::VoxelSize(v),
        (None, Some(n)) => Resolution::Cells(n),
        (None, None) => anyhow::bail!("give --voxel-size or --resolution"),
    };
    anyhow::ensure!(
        args.density.is_finite() && args.density > 0.0,
        "--density must be a positive number of kg/m^3, not {}",
        args.density
    );
    anyhow::ensure!(
        args.scale.is_finite() && args.scale > 0.0,
        "--scale must be a positive number, not {}",
        args.scale
    );
    Ok(MeshBakeSettings {
        resolution,
        fill: match args.mode {
            Mode::Solid => FillMode::Solid,
            Mode::Shell => FillMode::Shell,
        },
        density: args.density,
        scale: args.scale,
    })
}
