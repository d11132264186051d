//! Writes the simple meshes the seed scenes use into `assets/meshes/`:
//! `cargo run -p pellet-bake --example make_meshes`.

use std::path::Path;

use pellet_bake::mesh::export::to_glb;
use pellet_bake::mesh::shapes::{cuboid, frustum};

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes");
    std::fs::create_dir_all(&dir)?;
    let meshes = [
        // 3 x 3 x 1 voxels of 20 mm: the seed's 9-particle bodies.
        (
            "tile.glb",
            cuboid([-0.03, -0.01, -0.03], [0.03, 0.01, 0.03]),
        ),
        // A 2 x 20 x 40 cm plate: the seed's pusher.
        ("pusher.glb", cuboid([-0.01, -0.1, -0.2], [0.01, 0.1, 0.2])),
        // A funnel: 15 cm top radius, 3 cm spout, 15 cm tall (bake as a shell).
        ("funnel.glb", frustum([0.0, 0.0, 0.0], 0.03, 0.15, 0.15, 48)),
    ];
    for (name, mesh) in meshes {
        std::fs::write(dir.join(name), to_glb(&mesh))?;
        println!("wrote assets/meshes/{name}");
    }
    Ok(())
}
