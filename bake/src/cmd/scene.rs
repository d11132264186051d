//! `bake scene`: every mesh a scene references, baked into a folder.

use std::io::Write;
use std::process::ExitCode;

use pellet_bake::bake_mesh::Voxelizer;
use pellet_bake::progress::Progress;
use pellet_bake::report;
use pellet_bake::scene_bake::bake_scene;

use crate::args::SceneArgs;

pub fn run(args: SceneArgs) -> anyhow::Result<ExitCode> {
    let progress = Progress::new(!args.quiet);
    let baked = bake_scene(&args.scene, &args.output, Voxelizer::Cpu, &progress);
    progress.finish();
    let baked = baked?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        report::write_json(&mut stdout, &baked)?;
    } else {
        report::write_scene_report(&mut stdout, &baked)?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}
