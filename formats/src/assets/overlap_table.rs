//! [`OverlapTable`]: the neighbour-overlap lookup table `E(Cq, Cj)` of the
//! out-of-core proximity paper (Kim et al. 2014), over a range of ratios
//! `eps / l` (search radius over cell length).

use serde::{Deserialize, Serialize};

use super::{Asset, AssetKind, Summary};
use crate::blob::PodVec;
use crate::error::ValidationError;
use crate::validate;

/// How the table's integrals were estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingMethod {
    /// Seeded pseudo-random samples, as in the paper.
    #[default]
    MonteCarlo,
    /// A low-discrepancy (Sobol) sequence.
    Sobol,
}

impl SamplingMethod {
    /// The lower-case name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::MonteCarlo => "montecarlo",
            Self::Sobol => "sobol",
        }
    }
}

/// `E(Cq, Cj)` for every reachable cell offset at each tabulated ratio.
///
/// Values are in units of the cell volume, so one table serves every cell
/// length. Offsets are stored reduced by the cube's symmetry (only
/// `0 <= dx <= dy <= dz`); lookups expand them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverlapTable {
    /// Estimator used.
    pub method: SamplingMethod,
    /// Samples per entry.
    pub samples: u64,
    /// Seed of the estimator (Monte Carlo seed or sequence scramble).
    pub seed: u64,
    /// Tabulated ratios `eps / l`, strictly ascending.
    pub ratios: PodVec<f32>,
    /// Canonical cell offsets `(dx, dy, dz)` with `0 <= dx <= dy <= dz <= 2`.
    pub offsets: PodVec<[i8; 3]>,
    /// Mean overlap volume over the cell volume, ratio-major:
    /// `values[r * offsets.len() + o]`.
    pub values: PodVec<f32>,
    /// Standard error of each value, same layout.
    pub stderr: PodVec<f32>,
}

/// Largest offset a table may hold along one axis (ratios up to 2).
pub const MAX_REACH: i8 = 2;

impl Asset for OverlapTable {
    const KIND: AssetKind = AssetKind::OverlapTable;

    fn validate(&self) -> Result<(), ValidationError> {
        if self.ratios.is_empty() {
            return Err(ValidationError::new("ratios", "is empty"));
        }
        if self.offsets.is_empty() {
            return Err(ValidationError::new("offsets", "is empty"));
        }
        if self.samples == 0 {
            return Err(ValidationError::new("samples", "is 0"));
        }
        validate::all_finite_scalars("ratios", &self.ratios)?;
        for (i, w) in self.ratios.windows(2).enumerate() {
            if w[1] <= w[0] {
                return Err(ValidationError::new(
                    format!("ratios[{}]", i + 1),
                    format_args!(
                        "is {} after {}: ratios must be strictly ascending",
                        w[1], w[0]
                    ),
                ));
            }
        }
        validate::in_range(
            "ratios[0]",
            f64::from(self.ratios[0]),
            f64::MIN_POSITIVE,
            f64::from(MAX_REACH),
        )?;
        let last = self.ratios.len() - 1;
        validate::in_range(
            &format!("ratios[{last}]"),
            f64::from(self.ratios[last]),
            0.0,
            f64::from(MAX_REACH),
        )?;
        for (i, o) in self.offsets.iter().enumerate() {
            if !(0 <= o[0] && o[0] <= o[1] && o[1] <= o[2] && o[2] <= MAX_REACH) {
                return Err(ValidationError::new(
                    format!("offsets[{i}]"),
                    format_args!(
                        "{o:?} is not canonical (need 0 <= dx <= dy <= dz <= {MAX_REACH})"
                    ),
                ));
            }
            if self.offsets[..i].contains(o) {
                return Err(ValidationError::new(
                    format!("offsets[{i}]"),
                    format_args!("{o:?} appears twice"),
                ));
            }
        }
        let entries = self.ratios.len() * self.offsets.len();
        validate::length("values", self.values.len(), entries, "ratios x offsets")?;
        validate::length("stderr", self.stderr.len(), entries, "ratios x offsets")?;
        validate::all_finite_scalars("values", &self.values)?;
        validate::all_finite_scalars("stderr", &self.stderr)?;
        for (r, &ratio) in self.ratios.iter().enumerate() {
            // A value is a fraction of the cell volume and can never exceed
            // the whole sphere's volume (in cell units) nor one cell.
            let sphere = 4.0 / 3.0 * std::f32::consts::PI * ratio.powi(3);
            let cap = sphere.min(1.0) * 1.001 + 1e-6;
            for o in 0..self.offsets.len() {
                let i = r * self.offsets.len() + o;
                let (v, e) = (self.values[i], self.stderr[i]);
                if !(0.0..=cap).contains(&v) {
                    return Err(ValidationError::new(
                        format!("values[{i}]"),
                        format_args!("is {v}, must be between 0 and {cap} at ratio {ratio}"),
                    ));
                }
                if e < 0.0 {
                    return Err(ValidationError::new(
                        format!("stderr[{i}]"),
                        format_args!("is {e}, must not be negative"),
                    ));
                }
            }
        }
        Ok(())
    }

    fn summary(&self) -> Summary {
        Summary::default()
            .text("method", self.method.name())
            .int("samples", self.samples)
            .int("seed", self.seed)
            .int("ratios", self.ratios.len())
            .float("ratio_min", self.ratios.first().copied().unwrap_or(0.0))
            .float("ratio_max", self.ratios.last().copied().unwrap_or(0.0))
            .int("canonical_offsets", self.offsets.len())
            .float(
                "max_stderr",
                self.stderr.iter().copied().fold(0.0f32, f32::max),
            )
    }
}
