//! Closed test and demo shapes, built in code: boxes, spheres, tori, and
//! shapes within shapes. Every shape is watertight (each edge shared by two
//! triangles) with outward-facing triangles.

use super::TriMesh;

impl TriMesh {
    /// Appends `other`, offsetting its indices.
    pub fn append(&mut self, other: &TriMesh) {
        let base = self.positions.len() as u32;
        self.positions.extend_from_slice(&other.positions);
        self.triangles
            .extend(other.triangles.iter().map(|t| t.map(|i| i + base)));
    }

    /// Reverses every triangle's winding (turns a shape inside out, e.g. the
    /// wall of a cavity).
    pub fn flipped(mut self) -> Self {
        for t in &mut self.triangles {
            t.swap(1, 2);
        }
        self
    }

    /// Moves every vertex by `offset`.
    pub fn translated(mut self, offset: [f32; 3]) -> Self {
        for p in &mut self.positions {
            *p = std::array::from_fn(|a| p[a] + offset[a]);
        }
        self
    }
}

/// An axis-aligned box from `min` to `max`: 8 vertices, 12 triangles.
pub fn cuboid(min: [f32; 3], max: [f32; 3]) -> TriMesh {
    let positions = (0..8)
        .map(|i| {
            [
                if i & 1 == 0 { min[0] } else { max[0] },
                if i & 2 == 0 { min[1] } else { max[1] },
                if i & 4 == 0 { min[2] } else { max[2] },
            ]
        })
        .collect();
    // Two triangles per face, counter-clockwise seen from outside.
    let faces: [[u32; 4]; 6] = [
        [0, 2, 3, 1], // -z
        [4, 5, 7, 6], // +z
        [0, 1, 5, 4], // -y
        [2, 6, 7, 3], // +y
        [0, 4, 6, 2], // -x
        [1, 3, 7, 5], // +x
    ];
    let triangles = faces
        .iter()
        .flat_map(|f| [[f[0], f[1], f[2]], [f[0], f[2], f[3]]])
        .collect();
    TriMesh {
        positions,
        triangles,
    }
}

/// A UV sphere of `radius` around `centre` with `rings` latitude bands and
/// `2 * rings` longitude segments.
pub fn sphere(centre: [f32; 3], radius: f32, rings: u32) -> TriMesh {
    let rings = rings.max(2);
    let segments = 2 * rings;
    let mut positions = vec![[centre[0], centre[1] + radius, centre[2]]];
    for r in 1..rings {
        let theta = std::f32::consts::PI * r as f32 / rings as f32;
        for s in 0..segments {
            let phi = 2.0 * std::f32::consts::PI * s as f32 / segments as f32;
            positions.push([
                centre[0] + radius * theta.sin() * phi.cos(),
                centre[1] + radius * theta.cos(),
                centre[2] + radius * theta.sin() * phi.sin(),
            ]);
        }
    }
    positions.push([centre[0], centre[1] - radius, centre[2]]);
    let south = positions.len() as u32 - 1;
    let ring = |r: u32, s: u32| 1 + (r - 1) * segments + s % segments;
    let mut triangles = Vec::new();
    for s in 0..segments {
        triangles.push([0, ring(1, s + 1), ring(1, s)]);
        triangles.push([south, ring(rings - 1, s), ring(rings - 1, s + 1)]);
    }
    for r in 1..rings - 1 {
        for s in 0..segments {
            let (a, b, c, d) = (
                ring(r, s),
                ring(r, s + 1),
                ring(r + 1, s),
                ring(r + 1, s + 1),
            );
            triangles.push([a, b, d]);
            triangles.push([a, d, c]);
        }
    }
    TriMesh {
        positions,
        triangles,
    }
}

/// A torus around the y axis through `centre`: tube of radius `minor` on a
/// circle of radius `major`.
pub fn torus(centre: [f32; 3], major: f32, minor: f32, segments: u32, sides: u32) -> TriMesh {
    let (segments, sides) = (segments.max(3), sides.max(3));
    let mut positions = Vec::new();
    for i in 0..segments {
        let u = 2.0 * std::f32::consts::PI * i as f32 / segments as f32;
        for j in 0..sides {
            let v = 2.0 * std::f32::consts::PI * j as f32 / sides as f32;
            let r = major + minor * v.cos();
            positions.push([
                centre[0] + r * u.cos(),
                centre[1] + minor * v.sin(),
                centre[2] + r * u.sin(),
            ]);
        }
    }
    let at = |i: u32, j: u32| (i % segments) * sides + j % sides;
    let mut triangles = Vec::new();
    for i in 0..segments {
        for j in 0..sides {
            let (a, b, c, d) = (at(i, j), at(i + 1, j), at(i, j + 1), at(i + 1, j + 1));
            triangles.push([a, c, d]);
            triangles.push([a, d, b]);
        }
    }
    TriMesh {
        positions,
        triangles,
    }
}

/// An open frustum (a funnel's wall) around the y axis: radius `bottom` at
/// `centre.y`, radius `top` at `centre.y + height`, no caps. Not closed: bake
/// it with `fill = "shell"`.
pub fn frustum(centre: [f32; 3], bottom: f32, top: f32, height: f32, segments: u32) -> TriMesh {
    let segments = segments.max(3);
    let mut positions = Vec::new();
    for i in 0..segments {
        let u = 2.0 * std::f32::consts::PI * i as f32 / segments as f32;
        for (r, y) in [(bottom, 0.0), (top, height)] {
            positions.push([
                centre[0] + r * u.cos(),
                centre[1] + y,
                centre[2] + r * u.sin(),
            ]);
        }
    }
    let mut triangles = Vec::new();
    for i in 0..segments {
        let j = (i + 1) % segments;
        let (a, b, c, d) = (2 * i, 2 * i + 1, 2 * j, 2 * j + 1);
        triangles.push([a, b, d]);
        triangles.push([a, d, c]);
    }
    TriMesh {
        positions,
        triangles,
    }
}
