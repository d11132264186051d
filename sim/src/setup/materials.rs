//! The contact parameters of each pair of materials, as the kernels read
//! them, and the restitution law that turns a restitution into damping.

use bytemuck::{Pod, Zeroable};

use pellet_formats::scene::Material;

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
    /// Padding.
    pub pad: [f32; 3],
}

/// Normal damping ratio `beta` giving restitution `e` for a linear spring-dashpot.
pub fn damping_ratio(e: f64) -> f64 {
    if e <= 1e-9 {
        return 1.0;
    }
    let ln = e.ln();
    -ln / (ln * ln + std::f64::consts::PI * std::f64::consts::PI).sqrt()
}

/// The restitution a pair's damping ratio gives (the inverse of
/// [`damping_ratio`]); 1 for an undamped pair.
pub fn restitution_of(pair: &PairParams) -> f32 {
    let beta = f64::from(pair.damping_ratio2) / 2.0;
    if beta <= 0.0 {
        return 1.0;
    }
    (-std::f64::consts::PI * beta / (1.0 - beta * beta).max(1e-9).sqrt()).exp() as f32
}

pub(super) fn mix_pair(a: &Material, b: &Material) -> PairParams {
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
        pad: [0.0; 3],
    }
}
