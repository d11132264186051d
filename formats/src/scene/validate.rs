//! [`Scene::validate`]: the semantic checks of a parsed scene that need no
//! file access (sizes, materials, regions, exclusive options), each error
//! naming the field.

use super::{
    BodySpec, ContactModel, DEFAULT_MATERIAL, MAX_PARTICLES, MAX_STEPS, ParticleInit,
    ParticleOrigin, ParticleSource, Radius, Scene, TimeStep, expand,
};
use crate::error::ValidationError;
use crate::validate;

const AXES: [&str; 3] = ["x", "y", "z"];

impl Scene {
    /// Semantic checks that need no file access: positive sizes, known
    /// materials, regions inside the domain, exclusive options.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let sim = &self.simulation;
        validate::positive("simulation.particle_radius", sim.particle_radius.into())?;
        validate::all_finite("simulation.gravity", &[sim.gravity])?;
        if let TimeStep::Fixed(dt) = sim.time_step {
            validate::positive("simulation.time_step", dt)?;
        }
        if let Some(slots) = sim.contact_slots
            && !(1..=64).contains(&slots)
        {
            return Err(ValidationError::new(
                "simulation.contact_slots",
                format_args!("is {slots}, must be between 1 and 64"),
            ));
        }
        if let Some(skin) = sim.skin
            && !(skin.is_finite() && skin >= 0.0)
        {
            return Err(ValidationError::new(
                "simulation.skin",
                format_args!("is {skin}, must be a distance of 0 m or more"),
            ));
        }
        validate::positive("simulation.duration", sim.duration)?;
        if let TimeStep::Fixed(dt) = sim.time_step {
            let steps = sim.duration / dt;
            if steps > MAX_STEPS as f64 {
                return Err(ValidationError::new(
                    "simulation.time_step",
                    format_args!(
                        "{dt:e} s makes a run of {steps:.3e} steps over the {} s duration, more than the limit of {:.0e}",
                        sim.duration, MAX_STEPS as f64
                    ),
                ));
            }
        }
        validate::all_finite("domain.min", &[self.domain.min])?;
        validate::all_finite("domain.max", &[self.domain.max])?;
        for axis in 0..3 {
            if self.domain.min[axis] >= self.domain.max[axis] {
                return Err(ValidationError::new(
                    "domain.max",
                    format_args!(
                        "{} is not above domain.min {} along {}",
                        self.domain.max[axis], self.domain.min[axis], AXES[axis]
                    ),
                ));
            }
        }
        let mut models = self.materials.iter().map(|(name, m)| (name, m.model));
        if let Some((first, model)) = models.next()
            && let Some((other, _)) = models.find(|(_, m)| *m != model)
        {
            return Err(ValidationError::new(
                format!("materials.{other}.model"),
                format_args!(
                    "differs from materials.{first}.model: every material of a scene uses the same contact model"
                ),
            ));
        }
        let mut rolling = self
            .materials
            .iter()
            .map(|(name, m)| (name, m.rolling_model));
        if let Some((first, model)) = rolling.next()
            && let Some((other, _)) = rolling.find(|(_, m)| *m != model)
        {
            return Err(ValidationError::new(
                format!("materials.{other}.rolling_model"),
                format_args!(
                    "differs from materials.{first}.rolling_model: every material of a scene uses the same rolling model"
                ),
            ));
        }
        for (name, m) in &self.materials {
            let f = |field: &str| format!("materials.{name}.{field}");
            validate::non_negative(&f("rolling_friction"), m.rolling_friction.into())?;
            validate::positive(&f("density"), m.density.into())?;
            validate::positive(&f("stiffness"), m.stiffness.into())?;
            match m.model {
                ContactModel::Hooke => {
                    for (field, set) in [
                        ("youngs_modulus", m.youngs_modulus.is_some()),
                        ("poisson_ratio", m.poisson_ratio.is_some()),
                    ] {
                        if set {
                            return Err(ValidationError::new(
                                f(field),
                                "is a Hertz-Mindlin constant: set model = \"hertz\" (hooke materials take `stiffness`, N/m)",
                            ));
                        }
                    }
                }
                ContactModel::Hertz => {
                    let Some(e) = m.youngs_modulus else {
                        return Err(ValidationError::new(
                            f("youngs_modulus"),
                            "is required with model = \"hertz\" (Pa, e.g. 5e6 for a soft grain, 7e10 for glass)",
                        ));
                    };
                    validate::positive(&f("youngs_modulus"), e.into())?;
                    if let Some(nu) = m.poisson_ratio {
                        validate::in_range(&f("poisson_ratio"), nu.into(), 0.0, 0.499)?;
                    }
                    if m.damping.is_some() {
                        return Err(ValidationError::new(
                            f("damping"),
                            "is for hooke materials; a hertz material's damping follows from `restitution`",
                        ));
                    }
                }
            }
            validate::non_negative(&f("friction"), m.friction.into())?;
            validate::positive(
                &f("tangential_stiffness_ratio"),
                m.tangential_stiffness_ratio.into(),
            )?;
            match (m.restitution, m.damping) {
                (Some(_), Some(_)) => {
                    return Err(ValidationError::new(
                        f("damping"),
                        "give `restitution` or `damping`, not both",
                    ));
                }
                (Some(e), None) => validate::in_range(&f("restitution"), e.into(), 0.0, 1.0)?,
                (None, Some(d)) => validate::non_negative(&f("damping"), d.into())?,
                (None, None) => {}
            }
        }
        let mut generated = 0u64;
        for (i, p) in self.particles.iter().enumerate() {
            self.validate_particles(&format!("particles[{i}]"), p)?;
            if let ParticleOrigin::Block(b) = &p.origin {
                let radius = p
                    .radius
                    .unwrap_or(Radius::Fixed(self.simulation.particle_radius));
                generated = generated.saturating_add(expand::lattice_count(b, &radius));
                if generated > MAX_PARTICLES {
                    return Err(ValidationError::new(
                        format!("particles[{i}]"),
                        format_args!(
                            "brings the particle blocks to {generated} particles ({:.1} GB for their initial state alone), more than the limit of {MAX_PARTICLES} in all",
                            generated as f64 * size_of::<ParticleInit>() as f64 / 1e9
                        ),
                    ));
                }
            }
        }
        for (i, b) in self.bodies.iter().enumerate() {
            self.validate_body(&format!("bodies[{i}]"), b)?;
        }
        for (i, w) in self.walls.iter().enumerate() {
            let field = format!("walls[{i}]");
            validate::all_finite(&format!("{field}.point"), &[w.point])?;
            validate::all_finite(&format!("{field}.normal"), &[w.normal])?;
            if w.normal.iter().map(|x| x * x).sum::<f32>() < 1e-12 {
                return Err(ValidationError::new(
                    format!("{field}.normal"),
                    "is zero; a wall needs a direction",
                ));
            }
            self.check_material(&format!("{field}.material"), &w.material)?;
            if let Some(t) = w.remove_at {
                validate::non_negative(&format!("{field}.remove_at"), t)?;
            }
        }
        Ok(())
    }

    fn check_material(&self, field: &str, name: &str) -> Result<(), ValidationError> {
        if self.material(name).is_some() {
            return Ok(());
        }
        let mut known: Vec<&str> = self.materials.keys().map(String::as_str).collect();
        if !known.contains(&DEFAULT_MATERIAL) {
            known.insert(0, DEFAULT_MATERIAL);
        }
        Err(ValidationError::new(
            field,
            format_args!("unknown material {name:?} (defined: {})", known.join(", ")),
        ))
    }

    fn validate_particles(&self, field: &str, p: &ParticleSource) -> Result<(), ValidationError> {
        validate::all_finite(&format!("{field}.velocity"), &[p.velocity])?;
        self.check_material(&format!("{field}.material"), &p.material)?;
        let radius = p
            .radius
            .unwrap_or(Radius::Fixed(self.simulation.particle_radius));
        radius.validate(&format!("{field}.radius"))?;
        match &p.origin {
            ParticleOrigin::File(f) => {
                if f.trim().is_empty() {
                    return Err(ValidationError::new(format!("{field}.file"), "is empty"));
                }
            }
            ParticleOrigin::Block(b) => {
                let region = format!("{field}.region");
                validate::all_finite(&format!("{region}.min"), &[b.region.min])?;
                validate::all_finite(&format!("{region}.max"), &[b.region.max])?;
                for axis in 0..3 {
                    if b.region.min[axis] > b.region.max[axis] {
                        return Err(ValidationError::new(
                            format!("{region}.max"),
                            format_args!("is below {region}.min along {}", AXES[axis]),
                        ));
                    }
                    if b.region.min[axis] < self.domain.min[axis]
                        || b.region.max[axis] > self.domain.max[axis]
                    {
                        return Err(ValidationError::new(
                            region.clone(),
                            format_args!("reaches outside the domain along {}", AXES[axis]),
                        ));
                    }
                }
                if let Some(s) = b.spacing {
                    validate::positive(&format!("{field}.spacing"), s.into())?;
                    let diameter = 2.0 * radius.max();
                    if s < diameter * 0.999 {
                        return Err(ValidationError::new(
                            format!("{field}.spacing"),
                            format_args!(
                                "{s} m is less than the largest particle diameter {diameter} m: particles would start overlapping"
                            ),
                        ));
                    }
                }
                validate::in_range(&format!("{field}.jitter"), b.jitter.into(), 0.0, 1.0)?;
                let n = expand::lattice_count(b, &radius);
                if n > MAX_PARTICLES {
                    return Err(ValidationError::new(
                        field,
                        format_args!(
                            "would generate {n} particles, more than the limit of {MAX_PARTICLES}"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn validate_body(&self, field: &str, b: &BodySpec) -> Result<(), ValidationError> {
        if b.mesh.trim().is_empty() {
            return Err(ValidationError::new(format!("{field}.mesh"), "is empty"));
        }
        for (name, v) in [
            ("position", b.position),
            ("rotation", b.rotation),
            ("velocity", b.velocity),
            ("angular_velocity", b.angular_velocity),
        ] {
            validate::all_finite(&format!("{field}.{name}"), &[v])?;
        }
        validate::positive(&format!("{field}.scale"), b.scale.into())?;
        self.check_material(&format!("{field}.material"), &b.material)?;
        match (b.density, b.mass) {
            (Some(_), Some(_)) => {
                return Err(ValidationError::new(
                    format!("{field}.mass"),
                    "give `density` or `mass`, not both",
                ));
            }
            (Some(d), None) => validate::positive(&format!("{field}.density"), d.into())?,
            (None, Some(m)) => validate::positive(&format!("{field}.mass"), m.into())?,
            (None, None) => {}
        }
        if let Some(r) = b.particle_radius {
            validate::positive(&format!("{field}.particle_radius"), r.into())?;
        }
        if let Some(a) = b.array {
            let copies = a.count.iter().map(|&c| u64::from(c)).product::<u64>();
            if copies == 0 || copies > 1_000_000 {
                return Err(ValidationError::new(
                    format!("{field}.array.count"),
                    format_args!("makes {copies} copies, must be between 1 and 1000000"),
                ));
            }
            validate::all_finite(&format!("{field}.array.spacing"), &[a.spacing])?;
        }
        Ok(())
    }
}
