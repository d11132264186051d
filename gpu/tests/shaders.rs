//! Every WGSL file in the workspace (bake and player) parses and validates
//! with naga, offline: a broken shader fails here on any machine, GPU or not.

use std::path::{Path, PathBuf};

use wgpu::naga;

fn wgsl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir()
            && path
                .file_name()
                .is_some_and(|n| n != "target" && n != "fuzz")
        {
            wgsl_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "wgsl") {
            out.push(path);
        }
    }
}

#[test]
fn every_shader_validates() {
    let mut files = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in ["bake/src", "nns/src", "sim/src", "player"] {
        wgsl_files(&root.join(dir), &mut files);
    }
    assert!(!files.is_empty(), "no WGSL found");
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read shader");
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{}:\n{}", file.display(), e.emit_to_string(&source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}:\n{}", file.display(), e.emit_to_string(&source)));
    }
}
