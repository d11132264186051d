//! [`SimState`]: a snapshot of a running simulation.

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};

use super::{Asset, AssetKind, Summary};
use crate::blob::PodVec;
use crate::error::ValidationError;
use crate::validate;

/// `body_of_particle` value of a free particle (one that belongs to no body).
pub const FREE_PARTICLE: u32 = u32::MAX;

/// Largest coordinate a state may hold, metres (10^9 m, beyond the Moon):
/// anything farther is a blown-up or corrupt state, refused on load.
pub const MAX_POSITION_M: f32 = 1e9;
/// Largest speed a state may hold, m/s (the speed of light).
pub const MAX_SPEED_M_S: f32 = 3e8;
/// Largest angular speed a state may hold, rad/s.
pub const MAX_ANGULAR_SPEED: f32 = 1e12;
/// Largest particle radius a state may hold, metres.
pub const MAX_RADIUS_M: f32 = 1e6;

/// The state of one rigid body. 52 bytes, no padding (stored as a blob).
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct BodyState {
    /// World position of the centre of mass, metres.
    pub position: [f32; 3],
    /// Orientation as a unit quaternion `(x, y, z, w)`.
    pub orientation: [f32; 4],
    /// Linear momentum, kg m/s.
    pub linear_momentum: [f32; 3],
    /// Angular momentum about the centre of mass, world axes, kg m^2/s.
    pub angular_momentum: [f32; 3],
}

/// Particle and body state at one instant. Particle arrays are parallel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SimState {
    /// Simulated time, seconds.
    pub time: f64,
    /// Steps taken so far.
    pub step: u64,
    /// World positions, metres.
    pub positions: PodVec<[f32; 3]>,
    /// Velocities, m/s.
    pub velocities: PodVec<[f32; 3]>,
    /// Angular velocities, rad/s.
    pub angular_velocities: PodVec<[f32; 3]>,
    /// Radii, metres.
    pub radii: PodVec<f32>,
    /// Index into `bodies` for body particles, [`FREE_PARTICLE`] for free ones.
    pub body_of_particle: PodVec<u32>,
    /// Rigid body states.
    pub bodies: PodVec<BodyState>,
    /// Per body, the linear velocity of its centre of mass, m/s (empty in
    /// states saved before it existed).
    #[serde(default)]
    pub body_velocities: PodVec<[f32; 3]>,
    /// Per body, the world angular velocity, rad/s (empty in older states).
    #[serde(default)]
    pub body_angular_velocities: PodVec<[f32; 3]>,
}

impl Asset for SimState {
    const KIND: AssetKind = AssetKind::SimState;

    fn validate(&self) -> Result<(), ValidationError> {
        validate::non_negative("time", self.time)?;
        let n = self.positions.len();
        validate::length("velocities", self.velocities.len(), n, "one per particle")?;
        validate::length(
            "angular_velocities",
            self.angular_velocities.len(),
            n,
            "one per particle",
        )?;
        validate::length("radii", self.radii.len(), n, "one per particle")?;
        validate::length(
            "body_of_particle",
            self.body_of_particle.len(),
            n,
            "one per particle",
        )?;
        validate::all_bounded("positions", &self.positions, MAX_POSITION_M, "m")?;
        validate::all_bounded("velocities", &self.velocities, MAX_SPEED_M_S, "m/s")?;
        validate::all_bounded(
            "angular_velocities",
            &self.angular_velocities,
            MAX_ANGULAR_SPEED,
            "rad/s",
        )?;
        if let Some(i) = self
            .radii
            .iter()
            .position(|r| !(r.is_finite() && *r > 0.0 && *r <= MAX_RADIUS_M))
        {
            return Err(ValidationError::new(
                format!("radii[{i}]"),
                format_args!(
                    "is {}, must be finite, greater than zero and at most {MAX_RADIUS_M:e} m",
                    self.radii[i]
                ),
            ));
        }
        let bodies = self.bodies.len();
        if let Some(i) = self
            .body_of_particle
            .iter()
            .position(|&b| b != FREE_PARTICLE && b as usize >= bodies)
        {
            return Err(ValidationError::new(
                format!("body_of_particle[{i}]"),
                format_args!(
                    "is {}, but there are {bodies} bodies",
                    self.body_of_particle[i]
                ),
            ));
        }
        for (name, len) in [
            ("body_velocities", self.body_velocities.len()),
            (
                "body_angular_velocities",
                self.body_angular_velocities.len(),
            ),
        ] {
            if len != 0 {
                validate::length(name, len, bodies, "one per body, or none")?;
            }
        }
        validate::all_bounded(
            "body_velocities",
            &self.body_velocities,
            MAX_SPEED_M_S,
            "m/s",
        )?;
        validate::all_finite("body_angular_velocities", &self.body_angular_velocities)?;
        for (i, b) in self.bodies.iter().enumerate() {
            let field = format!("bodies[{i}]");
            validate::all_bounded(
                &format!("{field}.position"),
                &[b.position],
                MAX_POSITION_M,
                "m",
            )?;
            validate::all_finite(&field, &[b.linear_momentum, b.angular_momentum])?;
            validate::all_finite(&field, &[b.orientation])?;
            let norm = b.orientation.iter().map(|x| x * x).sum::<f32>().sqrt();
            if (norm - 1.0).abs() > 1e-3 {
                return Err(ValidationError::new(
                    format!("{field}.orientation"),
                    format_args!("has length {norm}, must be a unit quaternion"),
                ));
            }
        }
        Ok(())
    }

    fn summary(&self) -> Summary {
        let free = self
            .body_of_particle
            .iter()
            .filter(|&&b| b == FREE_PARTICLE)
            .count();
        Summary::default()
            .float("time_s", self.time)
            .int("step", self.step)
            .int("particles", self.positions.len())
            .int("free_particles", free)
            .int("bodies", self.bodies.len())
    }
}
