//! The contact parameters of each pair of materials, as the kernels read
//! them, and the restitution law that turns a restitution into damping.

use bytemuck::{Pod, Zeroable};

use pellet_formats::scene::{ContactModel, Material};

/// Contact parameters of one pair of materials, as the kernels read them
/// (two `vec4<f32>`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct PairParams {
    /// Normal stiffness `kn`, N/m.
    pub kn: f32,
    /// Tangential stiffness `kt`, N/m.
    pub kt: f32,
    /// Coulomb friction coefficient.
    pub mu: f32,
    /// `2 beta` of the restitution law: normal damping `c = 2 beta sqrt(m_eff kn)`.
    pub damping_ratio2: f32,
    /// Absolute normal damping, N s/m, used instead when positive.
    pub damping_abs: f32,
    /// Coefficient of rolling friction (the mean of the two materials').
    pub mu_roll: f32,
    /// Padding.
    pub pad: [f32; 2],
}

/// Normal damping ratio `beta` giving restitution `e` for a linear spring-dashpot.
pub fn damping_ratio(e: f64) -> f64 {
    if e <= 1e-9 {
        return 1.0;
    }
    let ln = e.ln();
    -ln / (ln * ln + std::f64::consts::PI * std::f64::consts::PI).sqrt()
}

/// What multiplies `beta` in [`PairParams::damping_ratio2`]: 2 for the
/// linear model, `2 sqrt(5/6)` for Hertz-Mindlin (LIGGGHTS' factor).
pub fn damping_factor(hertz: bool) -> f64 {
    if hertz { HERTZ_DAMPING } else { 2.0 }
}

/// The restitution a pair's damping ratio gives (the inverse of
/// [`damping_ratio`]); 1 for an undamped pair. `hertz`: a Hertz-Mindlin
/// pair ([`damping_factor`]).
pub fn restitution_of(pair: &PairParams, hertz: bool) -> f32 {
    let beta = f64::from(pair.damping_ratio2) / damping_factor(hertz);
    if beta <= 0.0 {
        return 1.0;
    }
    (-std::f64::consts::PI * beta / (1.0 - beta * beta).max(1e-9).sqrt()).exp() as f32
}

/// `2 sqrt(5/6)`: LIGGGHTS' Hertz damping factor (`normal_model_hertz.h`).
const HERTZ_DAMPING: f64 = 2.0 * 0.912_870_929_175_276_9;

/// Effective Young's and shear moduli of two Hertz materials, Pa (as
/// LIGGGHTS mixes them): `1/E* = (1 - nu_a^2)/E_a + (1 - nu_b^2)/E_b`,
/// `1/G* = 2 (2 - nu_a)(1 + nu_a)/E_a + 2 (2 - nu_b)(1 + nu_b)/E_b`.
pub fn hertz_moduli(a: &Material, b: &Material) -> (f64, f64) {
    let e = |m: &Material| f64::from(m.youngs_modulus.unwrap_or(1.0e7));
    let nu = |m: &Material| f64::from(m.poisson_ratio.unwrap_or(Material::DEFAULT_POISSON_RATIO));
    let (ea, eb, na, nb) = (e(a), e(b), nu(a), nu(b));
    let y = 1.0 / ((1.0 - na * na) / ea + (1.0 - nb * nb) / eb);
    let g = 1.0 / (2.0 * (2.0 - na) * (1.0 + na) / ea + 2.0 * (2.0 - nb) * (1.0 + nb) / eb);
    (y, g)
}

/// Rayleigh time of a sphere of radius `r` (m) of material `m`, seconds:
/// `pi r sqrt(rho / G) / (0.1631 nu + 0.8766)`, `G = E / (2 (1 + nu))`
/// (LIGGGHTS `fix check/timestep/gran`).
pub fn rayleigh_time(m: &Material, r: f64) -> f64 {
    let e = f64::from(m.youngs_modulus.unwrap_or(1.0e7));
    let nu = f64::from(m.poisson_ratio.unwrap_or(Material::DEFAULT_POISSON_RATIO));
    let g = e / (2.0 * (1.0 + nu));
    std::f64::consts::PI * r * (f64::from(m.density) / g).sqrt() / (0.1631 * nu + 0.8766)
}

pub(super) fn mix_pair(a: &Material, b: &Material) -> PairParams {
    if a.model == ContactModel::Hertz || b.model == ContactModel::Hertz {
        // Hertz-Mindlin: `kn` and `kt` hold 4/3 E* and 8 G* (Pa), and the
        // damping factor 2 sqrt(5/6) beta from the mean restitution; the
        // pair's radius and mass scale them (stages::forces::pair_constants).
        let (y, g) = hertz_moduli(a, b);
        let e = |m: &Material| f64::from(m.restitution.unwrap_or(Material::DEFAULT_RESTITUTION));
        let beta = damping_ratio(0.5 * (e(a) + e(b)));
        return PairParams {
            kn: (4.0 / 3.0 * y) as f32,
            kt: (8.0 * g) as f32,
            mu: 0.5 * (a.friction + b.friction),
            damping_ratio2: (HERTZ_DAMPING * beta) as f32,
            damping_abs: 0.0,
            mu_roll: 0.5 * (a.rolling_friction + b.rolling_friction),
            pad: [0.0; 2],
        };
    }
    let harmonic = |x: f32, y: f32| 2.0 * x * y / (x + y);
    let kn = harmonic(a.stiffness, b.stiffness);
    let kt_ratio = 0.5 * (a.tangential_stiffness_ratio + b.tangential_stiffness_ratio);
    let (ra, da) = (a.restitution, a.damping);
    let (rb, db) = (b.restitution, b.damping);
    let restitution = |r: Option<f32>, d: Option<f32>| match (r, d) {
        (_, Some(_)) => None,
        (Some(r), None) => Some(r),
        (None, None) => Some(Material::DEFAULT_RESTITUTION),
    };
    let (damping_ratio2, damping_abs) = match (restitution(ra, da), restitution(rb, db)) {
        (Some(x), Some(y)) => (
            (2.0 * damping_ratio(0.5 * (f64::from(x) + f64::from(y)))) as f32,
            0.0,
        ),
        _ => (0.0, 0.5 * (da.unwrap_or(0.0) + db.unwrap_or(0.0))),
    };
    PairParams {
        kn,
        kt: kt_ratio * kn,
        mu: 0.5 * (a.friction + b.friction),
        damping_ratio2,
        damping_abs,
        mu_roll: 0.5 * (a.rolling_friction + b.rolling_friction),
        pad: [0.0; 2],
    }
}
