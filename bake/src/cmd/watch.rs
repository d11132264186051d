//! `bake watch`: `bake scene` again after every saved edit of its inputs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use pellet_bake::bake_mesh::Voxelizer;
use pellet_bake::progress::Progress;
use pellet_bake::report;
use pellet_bake::scene_bake::bake_scene;
use pellet_formats::watch::FileWatcher;

use crate::args::WatchArgs;

pub fn run(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let (scene, output) = (args.scene.as_path(), args.output.as_path());
    let mut bakes = 0u64;
    loop {
        let started = Instant::now();
        match bake_scene(scene, output, Voxelizer::Cpu, &Progress::hidden()) {
            Ok(r) => println!(
                "{}",
                report::watch_line(scene, output, &r, started.elapsed())
            ),
            // Keep watching: the last good folder stays as it was.
            Err(e) => eprintln!("bake: {e} (keeping the last good folder)"),
        }
        std::io::stdout().flush()?;
        bakes += 1;
        if args.max_bakes.is_some_and(|m| bakes >= m) {
            return Ok(ExitCode::SUCCESS);
        }
        let mut watcher = FileWatcher::new(&scene_inputs(scene))
            .map_err(|e| anyhow::anyhow!("cannot watch {}: {e}", scene.display()))?;
        while !watcher.wait(Duration::from_secs(3600)) {}
    }
}

/// The files `scene` is made of: itself, its meshes and particle files.
fn scene_inputs(scene: &Path) -> Vec<PathBuf> {
    pellet_formats::Scene::load(scene)
        .map(|s| s.input_files(scene))
        .unwrap_or_else(|_| vec![scene.to_path_buf()])
}
