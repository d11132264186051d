use std::path::Path;

use super::*;

const MINIMAL: &str = "[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n";

fn parse(text: &str) -> Result<Scene, SceneError> {
    Scene::parse(text, Path::new("scenes/test.toml"))
}

#[test]
fn a_minimal_scene_takes_every_default() {
    let scene = parse(MINIMAL).expect("minimal scene");
    assert_eq!(scene.name, "test");
    assert_eq!(scene.simulation, Simulation::default());
    assert_eq!(scene.domain.periodic, [false; 3]);
    assert!(scene.domain.walls);
    assert_eq!(scene.material("default"), Some(Material::default()));
    assert!(scene.particles.is_empty() && scene.bodies.is_empty() && scene.walls.is_empty());
}

#[test]
fn unknown_fields_are_errors_with_line_and_column() {
    let err = parse("[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n\n[[particles]]\nregion = { min = [0, 0, 0], max = [1, 1, 1] }\nsapcing = 0.1\n")
        .expect_err("typo");
    assert_eq!(err.kind, SceneErrorKind::Syntax);
    let text = err.to_string();
    assert!(
        text.starts_with("scenes/test.toml:7:1: unknown field `sapcing`"),
        "{text}"
    );
    assert!(text.contains("sapcing"), "{text}");
}

#[test]
fn wrong_types_point_at_the_value() {
    let err =
        parse("[simulation]\ngravity = \"down\"\n[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n")
            .expect_err("type");
    assert_eq!((err.line, err.column), (Some(2), Some(11)), "{err}");
}

#[test]
fn semantic_errors_point_at_the_field() {
    let err = parse(
        "[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n\n[[particles]]\nregion = { min = [0, 0, 0], max = [1, 1, 1] }\nmaterial = \"steel\"\n",
    )
    .expect_err("unknown material");
    assert_eq!(err.kind, SceneErrorKind::Invalid);
    assert_eq!(
        err.to_string(),
        "scenes/test.toml:7:12: particles[0].material: unknown material \"steel\" (defined: default)"
    );
}

#[test]
fn a_time_step_is_auto_or_seconds() {
    let auto = parse(&format!("[simulation]\ntime_step = \"auto\"\n{MINIMAL}")).expect("auto");
    assert_eq!(auto.simulation.time_step, TimeStep::Auto);
    let fixed = parse(&format!("[simulation]\ntime_step = 1e-4\n{MINIMAL}")).expect("fixed");
    assert_eq!(fixed.simulation.time_step, TimeStep::Fixed(1e-4));
    let err = parse(&format!("[simulation]\ntime_step = \"fast\"\n{MINIMAL}")).expect_err("bad");
    assert!(
        err.to_string()
            .contains("\"auto\" or a time step in seconds"),
        "{err}"
    );
    let err = parse(&format!("[simulation]\ntime_step = -1.0\n{MINIMAL}")).expect_err("negative");
    assert!(
        err.to_string().contains("simulation.time_step: is -1"),
        "{err}"
    );
}

#[test]
fn particle_entries_need_exactly_one_origin() {
    let err = parse(&format!("{MINIMAL}[[particles]]\nvelocity = [0, 0, 0]\n")).expect_err("none");
    assert!(err.to_string().contains("needs `region`"), "{err}");
    let err = parse(&format!(
        "{MINIMAL}[[particles]]\nfile = \"a.csv\"\nspacing = 0.1\n"
    ))
    .expect_err("spacing");
    assert!(
        err.to_string()
            .contains("`spacing` applies to generated blocks"),
        "{err}"
    );
}

#[test]
fn overlapping_lattices_and_exclusive_options_are_refused() {
    let err = parse(&format!(
        "{MINIMAL}[[particles]]\nregion = {{ min = [0, 0, 0], max = [1, 1, 1] }}\nspacing = 0.01\nradius = 0.02\n"
    ))
    .expect_err("overlap");
    assert!(err.to_string().contains("would start overlapping"), "{err}");
    let err = parse(&format!(
        "{MINIMAL}[materials.x]\nrestitution = 0.5\ndamping = 1.0\n"
    ))
    .expect_err("both");
    assert!(err.to_string().contains("not both"), "{err}");
    let err = parse(&format!(
        "{MINIMAL}[[bodies]]\nmesh = \"a.glb\"\nmass = 1\ndensity = 2\n"
    ))
    .expect_err("both");
    assert!(err.to_string().contains("not both"), "{err}");
}

#[test]
fn regions_must_lie_in_the_domain() {
    let err = parse(&format!(
        "{MINIMAL}[[particles]]\nregion = {{ min = [0, 0, 0], max = [2, 1, 1] }}\n"
    ))
    .expect_err("outside");
    assert!(
        err.to_string()
            .contains("reaches outside the domain along x"),
        "{err}"
    );
}

#[test]
fn a_huge_block_is_refused_before_allocating() {
    let err = parse(
        "[domain]\nmin = [0, 0, 0]\nmax = [1000, 1000, 1000]\n[[particles]]\nregion = { min = [0, 0, 0], max = [1000, 1000, 1000] }\nradius = 0.001\n",
    )
    .expect_err("too many");
    assert!(err.to_string().contains("more than the limit"), "{err}");
}

#[test]
fn blocks_generate_a_deterministic_non_overlapping_lattice() {
    let scene = parse(&format!(
        "{MINIMAL}[[particles]]\nregion = {{ min = [0, 0, 0], max = [0.5, 0.5, 0.5] }}\nradius = {{ min = 0.02, max = 0.05 }}\njitter = 1.0\nseed = 9\nvelocity = [1, 0, 0]\n"
    ))
    .expect("scene");
    let a = scene.free_particles(Path::new(".")).expect("expand");
    let b = scene.free_particles(Path::new(".")).expect("expand");
    assert_eq!(a, b, "same seed, same particles");
    assert_eq!(a.len(), 125, "5 x 5 x 5 lattice sites at spacing 0.1");
    for (i, p) in a.iter().enumerate() {
        assert!((0.02..0.05).contains(&p.radius));
        assert_eq!(p.velocity, [1.0, 0.0, 0.0]);
        for q in &a[..i] {
            let d2: f32 = (0..3)
                .map(|k| (p.position[k] - q.position[k]).powi(2))
                .sum();
            assert!(
                d2.sqrt() >= p.radius + q.radius - 1e-6,
                "overlap between {p:?} and {q:?}"
            );
        }
        for k in 0..3 {
            assert!(p.position[k] - p.radius >= -1e-6 && p.position[k] + p.radius <= 0.5 + 1e-6);
        }
    }
}

#[test]
fn count_caps_a_block() {
    let scene = parse(&format!(
        "{MINIMAL}[[particles]]\nregion = {{ min = [0, 0, 0], max = [1, 1, 1] }}\ncount = 7\n"
    ))
    .expect("scene");
    assert_eq!(
        scene.free_particles(Path::new(".")).expect("expand").len(),
        7
    );
}

#[test]
fn csv_particle_files_load_with_header_comments_and_radii() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("grains.csv"),
        "# grains\nx,y,z,radius\n0.1, 0.2, 0.3, 0.01\n0.5,0.5,0.5,0.02 # big one\n\n",
    )
    .expect("write");
    let scene = parse(&format!(
        "{MINIMAL}[[particles]]\nfile = \"grains.csv\"\nvelocity = [0, -1, 0]\n"
    ))
    .expect("scene");
    let particles = scene.free_particles(dir.path()).expect("load");
    assert_eq!(particles.len(), 2);
    assert_eq!(particles[1].position, [0.5, 0.5, 0.5]);
    assert_eq!(particles[1].radius, 0.02);
    assert_eq!(particles[0].velocity, [0.0, -1.0, 0.0]);
}

#[test]
fn bad_csv_lines_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scene = parse(&format!("{MINIMAL}[[particles]]\nfile = \"grains.csv\"\n")).expect("scene");
    for (text, expected) in [
        ("0,0,0\n1,2\n", "grains.csv:2: has 2 fields"),
        ("0,0,0\n0.5,nan,0.5\n", "grains.csv:2: NaN is not finite"),
        (
            "0.1,0.1,0.1\n0.2,zero,0.2\n",
            "grains.csv:2: \"0.2,zero,0.2\" is not numbers",
        ),
        (
            "0.1,0.1,0.1,-1\n",
            "grains.csv:1: radius -1 must be greater than zero",
        ),
        ("5,5,5\n", "lies outside the domain"),
    ] {
        std::fs::write(dir.path().join("grains.csv"), text).expect("write");
        let err = scene.free_particles(dir.path()).expect_err(text);
        assert!(
            err.to_string().contains(expected),
            "{err} should contain {expected:?}"
        );
    }
    std::fs::remove_file(dir.path().join("grains.csv")).expect("rm");
    let err = scene.free_particles(dir.path()).expect_err("missing");
    assert!(err.to_string().contains("cannot read"), "{err}");
}

#[test]
fn a_scene_survives_toml_round_trip() {
    let text = "name = \"r\"\n[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\nperiodic = [true, false, false]\n\n[[particles]]\nregion = { min = [0, 0, 0], max = [1, 1, 1] }\nradius = { min = 0.01, max = 0.02 }\n\n[[bodies]]\nmesh = \"a.glb\"\nmotion = \"kinematic\"\nvelocity = [1, 0, 0]\n\n[[walls]]\npoint = [0, 0, 0]\nnormal = [0, 1, 0]\nremove_at = 2.0\n";
    let scene = parse(text).expect("scene");
    let again = parse(&scene.to_toml().expect("to toml")).expect("reparse");
    assert_eq!(scene, again);
}

#[test]
fn the_shipped_scenes_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("assets/scenes") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
            scene
                .free_particles(path.parent().expect("dir"))
                .unwrap_or_else(|e| panic!("{e}"));
            seen += 1;
        }
    }
    assert!(seen > 0, "no scenes in {}", dir.display());
}

/// The TOML examples in docs/scene-format.md parse, so the docs cannot drift.
#[test]
fn the_documented_examples_parse() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/scene-format.md"),
    )
    .expect("docs/scene-format.md");
    let mut blocks = 0;
    for block in doc.split("```toml").skip(1) {
        let text = block.split("```").next().expect("closed block");
        Scene::parse(text, Path::new("docs/scene-format.md"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        blocks += 1;
    }
    assert!(blocks > 0, "no ```toml examples in the docs");
}

#[test]
fn a_saved_simulation_state_is_a_particle_file() {
    use crate::PodVec;
    use crate::assets::{FREE_PARTICLE, SimState};
    let dir = tempfile::tempdir().expect("tempdir");
    let state = SimState {
        time: 2.0,
        step: 10,
        positions: PodVec(vec![[0.5, 0.5, 0.5], [0.2, 0.3, 0.4]]),
        velocities: PodVec(vec![[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]]),
        angular_velocities: PodVec(vec![[0.0; 3]; 2]),
        radii: PodVec(vec![0.01, 0.02]),
        body_of_particle: PodVec(vec![FREE_PARTICLE; 2]),
        bodies: PodVec(Vec::new()),
        ..Default::default()
    };
    crate::io::write_asset(&dir.path().join("settled.pellet"), &state).expect("write");
    let scene = parse(&format!(
        "{MINIMAL}[[particles]]\nfile = \"settled.pellet\"\n"
    ))
    .expect("scene");
    let particles = scene.free_particles(dir.path()).expect("load");
    assert_eq!(particles.len(), 2);
    assert_eq!(particles[1].position, [0.2, 0.3, 0.4]);
    assert_eq!(
        particles[1].velocity,
        [1.0, 0.0, 0.0],
        "velocities come from the state"
    );
    assert_eq!(particles[1].radius, 0.02);
    // A corrupt state names the file and the problem.
    std::fs::write(dir.path().join("settled.pellet"), b"junk").expect("write");
    let err = scene.free_particles(dir.path()).expect_err("corrupt");
    assert!(
        err.to_string()
            .contains("settled.pellet: not a Pellet file"),
        "{err}"
    );
}
