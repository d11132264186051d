//! Test distributions for `player nns --generate`: the same generators as
//! `bake validate-table` (uniform, a packed pile, a tall column, Gaussian
//! clusters), about 10 points per unit cube where packed.

use pellet_formats::distribution::Distribution;

use super::NnsError;

/// The names `--generate` accepts.
pub const NAMES: [&str; 4] = ["uniform", "pile", "column", "clusters"];

/// `n` points of distribution `name`, deterministic in `seed`.
pub fn generate(name: &str, n: usize, seed: u64) -> Result<Vec<[f32; 3]>, NnsError> {
    let d = Distribution::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| NnsError::UnknownDistribution {
            name: name.to_owned(),
            known: NAMES.join(", "),
        })?;
    Ok(d.generate(n, seed)
        .into_iter()
        .map(|p| p.map(|x| x as f32))
        .collect())
}
