//! `player info`: what a scene holds, before any GPU work.

use std::path::Path;

use serde::Serialize;

use pellet_formats::scene::Motion;

use crate::PlayerError;

/// Facts about a scene and the particles it generates.
#[derive(Debug, Clone, Serialize)]
pub struct SceneInfo {
    /// Scene name.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Free particles after expanding blocks and reading files.
    pub free_particles: usize,
    /// Smallest and largest free-particle radius, metres.
    pub radius_range_m: [f32; 2],
    /// Body entries and instances (after arrays), by motion.
    pub bodies: BodyCounts,
    /// Extra walls.
    pub walls: usize,
    /// Domain corners, metres.
    pub domain_m: [[f32; 3]; 2],
    /// Periodic axes.
    pub periodic: [bool; 3],
    /// Named materials (plus the default).
    pub materials: Vec<String>,
    /// Total mass of free particles, kg.
    pub free_mass_kg: f64,
}

/// Body instances by how they move.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BodyCounts {
    /// `[[bodies]]` entries.
    pub entries: usize,
    /// Dynamic instances.
    pub dynamic: u64,
    /// Static instances.
    pub r#static: u64,
    /// Kinematic instances.
    pub kinematic: u64,
}

/// Loads `path` (a scene TOML, a baked folder or its URL) and summarizes it.
pub fn scene_info(path: &Path) -> Result<SceneInfo, PlayerError> {
    let cache = crate::sim::run::default_cache_dir();
    let (scene, dir) = crate::sim::run::read_scene(path, cache.as_deref())?;
    let particles = scene.free_particles(&dir)?;
    let (mut lo, mut hi) = (f32::INFINITY, 0.0f32);
    let mut mass = 0.0f64;
    for p in &particles {
        lo = lo.min(p.radius);
        hi = hi.max(p.radius);
        let density = scene
            .material(&scene.particles[p.source as usize].material)
            .map_or(0.0, |m| m.density);
        mass += f64::from(density) * 4.0 / 3.0 * std::f64::consts::PI * f64::from(p.radius).powi(3);
    }
    if particles.is_empty() {
        lo = 0.0;
    }
    let mut bodies = BodyCounts {
        entries: scene.bodies.len(),
        ..Default::default()
    };
    for b in &scene.bodies {
        let copies = b
            .array
            .map_or(1, |a| a.count.iter().map(|&c| u64::from(c)).product());
        match b.motion {
            Motion::Dynamic => bodies.dynamic += copies,
            Motion::Static => bodies.r#static += copies,
            Motion::Kinematic => bodies.kinematic += copies,
        }
    }
    let mut materials: Vec<String> = scene.materials.keys().cloned().collect();
    if !materials
        .iter()
        .any(|m| m == pellet_formats::scene::DEFAULT_MATERIAL)
    {
        materials.insert(0, pellet_formats::scene::DEFAULT_MATERIAL.to_owned());
    }
    Ok(SceneInfo {
        name: scene.name.clone(),
        description: scene.description.clone(),
        free_particles: particles.len(),
        radius_range_m: [lo, hi],
        bodies,
        walls: scene.walls.len(),
        domain_m: [scene.domain.min, scene.domain.max],
        periodic: scene.domain.periodic,
        materials,
        free_mass_kg: mass,
    })
}
