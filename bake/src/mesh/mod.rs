//! [`TriMesh`]: the triangles a body is baked from, and what can be learned
//! about them before voxelizing (bounds, open edges).

use std::collections::HashMap;

pub mod export;
mod gltf_load;
pub mod shapes;

pub use gltf_load::{
    MAX_FILE_BYTES, MAX_TRIANGLES, MeshError, load_mesh, load_mesh_hashed, load_mesh_with_files,
};

/// A triangle soup in the mesh's own frame (metres), node transforms applied.
///
/// Invariant: every index is below `positions.len()` and every coordinate is
/// finite; [`load_mesh`] checks both, code that builds a mesh by hand keeps them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriMesh {
    /// Vertex positions.
    pub positions: Vec<[f32; 3]>,
    /// Triangles as indices into `positions`.
    pub triangles: Vec<[u32; 3]>,
}

/// An axis-aligned box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Minimum corner.
    pub min: [f32; 3],
    /// Maximum corner.
    pub max: [f32; 3],
}

impl Bounds {
    /// Edge lengths.
    pub fn size(&self) -> [f32; 3] {
        std::array::from_fn(|a| self.max[a] - self.min[a])
    }
}

/// How closed a mesh is: the basis of the watertightness diagnosis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EdgeReport {
    /// Distinct edges (vertices welded by exact position).
    pub edges: u64,
    /// Edges used by one triangle only: holes in the surface.
    pub open_edges: u64,
    /// Edges used by more than two triangles.
    pub non_manifold_edges: u64,
}

impl EdgeReport {
    /// A closed 2-manifold: every edge shared by exactly two triangles.
    pub fn is_watertight(&self) -> bool {
        self.open_edges == 0 && self.non_manifold_edges == 0
    }
}

impl TriMesh {
    /// The box around every vertex that a triangle uses.
    pub fn bounds(&self) -> Option<Bounds> {
        let mut it = self
            .triangles
            .iter()
            .flatten()
            .filter_map(|&i| self.positions.get(i as usize).copied());
        let first = it.next()?;
        let mut b = Bounds {
            min: first,
            max: first,
        };
        for p in it {
            for a in 0..3 {
                b.min[a] = b.min[a].min(p[a]);
                b.max[a] = b.max[a].max(p[a]);
            }
        }
        Some(b)
    }

    /// The three corners of triangle `t`.
    pub fn triangle(&self, t: usize) -> [[f32; 3]; 3] {
        self.triangles[t].map(|i| self.positions[i as usize])
    }

    /// Counts open and non-manifold edges, welding vertices that share a position.
    pub fn edge_report(&self) -> EdgeReport {
        let mut weld: HashMap<[u32; 3], u32> = HashMap::new();
        let ids: Vec<u32> = self
            .positions
            .iter()
            .map(|p| {
                let key = p.map(|c| if c == 0.0 { 0 } else { c.to_bits() });
                let next = weld.len() as u32;
                *weld.entry(key).or_insert(next)
            })
            .collect();
        let mut uses: HashMap<(u32, u32), u32> = HashMap::new();
        for t in &self.triangles {
            let v = t.map(|i| ids[i as usize]);
            for (a, b) in [(v[0], v[1]), (v[1], v[2]), (v[2], v[0])] {
                if a != b {
                    *uses.entry((a.min(b), a.max(b))).or_insert(0) += 1;
                }
            }
        }
        EdgeReport {
            edges: uses.len() as u64,
            open_edges: uses.values().filter(|&&n| n == 1).count() as u64,
            non_manifold_edges: uses.values().filter(|&&n| n > 2).count() as u64,
        }
    }

    /// Applies a uniform scale about the origin.
    pub fn scale(&mut self, s: f32) {
        for p in &mut self.positions {
            *p = p.map(|c| c * s);
        }
    }
}
