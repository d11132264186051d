//! The neighbour-overlap table against exact identities and closed forms.

use std::f64::consts::PI;

use pellet_bake::table::{TableSettings, bake_table, self_overlap_exact};
use pellet_formats::assets::SamplingMethod;

fn small(method: SamplingMethod) -> TableSettings {
    TableSettings {
        ratio_min: 0.2,
        ratio_max: 2.0,
        ratios: 10,
        samples: 100_000,
        seed: 3,
        method,
    }
}

#[test]
fn entries_over_all_offsets_sum_to_the_sphere_volume() {
    for method in [SamplingMethod::MonteCarlo, SamplingMethod::Sobol] {
        let table = bake_table(&small(method)).expect("bake");
        for &ratio in table.ratios.iter() {
            let r = f64::from(ratio);
            let at = table.at(r).expect("in range");
            let sum: f64 = at.values.iter().sum();
            // Symmetric copies share one estimate, so their errors add
            // linearly, not in quadrature.
            let err: f64 = at.stderr.iter().sum();
            let sphere = 4.0 / 3.0 * PI * r.powi(3);
            // f32 storage adds ~1e-7 relative per entry.
            let tol = 3.0 * err + 1e-5 * sphere;
            assert!(
                (sum - sphere).abs() <= tol,
                "{method:?} r {r}: sum {sum} vs {sphere} (tol {tol})"
            );
        }
    }
}

#[test]
fn the_self_overlap_matches_its_closed_form() {
    let table = bake_table(&TableSettings {
        ratio_min: 0.1,
        ratio_max: 1.0,
        ratios: 10,
        samples: 200_000,
        seed: 9,
        method: SamplingMethod::MonteCarlo,
    })
    .expect("bake");
    assert_eq!(
        table.reach(),
        1,
        "ratios up to 1 need only the 27 nearest cells"
    );
    for &ratio in table.ratios.iter() {
        let r = f64::from(ratio);
        let at = table.at(r).expect("in range");
        let (got, err) = (at.value([0, 0, 0]), at.stderr[at.index([0, 0, 0])]);
        let exact = self_overlap_exact(r);
        assert!(
            (got - exact).abs() <= 5.0 * err + 1e-6 * exact,
            "r {r}: {got} vs {exact} ± {err}"
        );
    }
}

#[test]
fn symmetric_offsets_expand_to_equal_values() {
    let table = bake_table(&small(SamplingMethod::Sobol)).expect("bake");
    let at = table.at(1.5).expect("in range");
    assert_eq!(at.reach, 2);
    for d in [[1, 0, 0], [0, 1, 2], [1, 1, 2]] {
        let v = at.value(d);
        for p in [
            [-d[0], d[1], d[2]],
            [d[2], -d[0], d[1]],
            [d[1], d[2], -d[0]],
            [-d[2], -d[1], -d[0]],
        ] {
            assert_eq!(at.value(p), v, "{d:?} vs {p:?}");
        }
    }
    assert_eq!(
        at.value([2, 2, 2]),
        0.0,
        "the corner cell at distance 1.73 is beyond r = 1.5"
    );
}

#[test]
fn interpolation_is_exact_at_stored_ratios_and_refuses_to_extrapolate() {
    let table = bake_table(&small(SamplingMethod::MonteCarlo)).expect("bake");
    let m = table.offsets.len();
    for (k, &ratio) in table.ratios.iter().enumerate() {
        let at = table.at(f64::from(ratio)).expect("in range");
        for (o, offset) in table.offsets.iter().enumerate() {
            let d = offset.map(i32::from);
            assert_eq!(
                at.value(d) as f32,
                table.values[k * m + o],
                "ratio {ratio} offset {offset:?}"
            );
        }
    }
    // Between stored ratios (0.05 apart here; 0.03 in the default table) the
    // interpolated self overlap stays on the closed form.
    let fine = bake_table(&TableSettings {
        ratios: 37,
        ..small(SamplingMethod::Sobol)
    })
    .expect("bake");
    for r in [0.225, 0.55, 0.97] {
        let at = fine.at(r).expect("in range");
        let (got, err) = (at.value([0, 0, 0]), at.stderr[at.index([0, 0, 0])]);
        let exact = self_overlap_exact(r);
        assert!(
            (got - exact).abs() <= 5.0 * err + 5e-4 * exact,
            "r {r}: {got} vs {exact} ± {err}"
        );
    }
    for bad in [0.1, 2.01, f64::NAN] {
        let err = table.at(bad).expect_err("out of range");
        assert!(
            err.to_string().contains("outside the table's range"),
            "{err}"
        );
    }
}

#[test]
fn bad_settings_are_refused() {
    for s in [
        TableSettings {
            ratio_min: 0.0,
            ..small(SamplingMethod::MonteCarlo)
        },
        TableSettings {
            ratio_max: 2.5,
            ..small(SamplingMethod::MonteCarlo)
        },
        TableSettings {
            ratios: 0,
            ..small(SamplingMethod::MonteCarlo)
        },
        TableSettings {
            samples: 3,
            ..small(SamplingMethod::MonteCarlo)
        },
    ] {
        assert!(bake_table(&s).is_err(), "{s:?}");
    }
}

#[test]
fn monte_carlo_and_sobol_agree() {
    let mc = bake_table(&small(SamplingMethod::MonteCarlo)).expect("bake");
    let qmc = bake_table(&small(SamplingMethod::Sobol)).expect("bake");
    for i in 0..mc.values.len() {
        let tol = 5.0 * f64::from(mc.stderr[i].hypot(qmc.stderr[i])) + 1e-7;
        assert!(
            (f64::from(mc.values[i]) - f64::from(qmc.values[i])).abs() <= tol,
            "entry {i}"
        );
    }
    assert!(
        qmc.stderr.iter().sum::<f32>() < mc.stderr.iter().sum::<f32>(),
        "Sobol converges faster"
    );
}

#[test]
fn the_model_tracks_exact_counts_on_clustered_particles() {
    use pellet_bake::table_validation::{Distribution, validate};
    let table = bake_table(&TableSettings {
        ratios: 20,
        ..small(SamplingMethod::Sobol)
    })
    .expect("bake");
    let rows = validate(&table, Distribution::Clusters, 200_000, &[1.0], 4).expect("validate");
    for r in &rows {
        assert!(r.correlation > 0.95, "{r:?}");
        assert!(
            r.refined_correlation >= r.correlation - 1e-3,
            "refinement should not hurt: {r:?}"
        );
    }
    let uniform = validate(&table, Distribution::Uniform, 30_000, &[1.0], 4).expect("validate");
    // On uniform particles the model is unbiased: mean estimate close to the mean count.
    let r = &uniform[0];
    assert!(r.rmse < 0.2 * r.mean_neighbours, "{r:?}");
}

#[test]
fn totals_and_the_packing_correction() {
    use pellet_bake::table_validation::{Distribution, validate, validate_points};
    let table = bake_table(&TableSettings {
        ratios: 20,
        ..small(SamplingMethod::Sobol)
    })
    .expect("bake");
    // Uniform points: cell counts vary (Poisson), and totals follow them.
    let uniform = &validate(&table, Distribution::Uniform, 50_000, &[1.0], 2).expect("validate")[0];
    assert!(uniform.total_correlation > 0.9, "{uniform:?}");
    assert!((uniform.calibration - 1.0).abs() < 0.05, "{uniform:?}");
    // A packed lattice: the model overestimates (grains exclude each other),
    // and the correction lowers the error.
    let pile = &validate(&table, Distribution::Pile, 50_000, &[1.0], 2).expect("validate")[0];
    assert!(pile.calibration < 0.995, "{pile:?}");
    assert!(pile.calibrated_rmse < pile.rmse, "{pile:?}");
    // The fitted estimate (smoothed counts, occupancy, sub-cells), judged on
    // cells it was not fitted on, beats the table model on both.
    for row in [uniform, pile] {
        let fit = row.fit.as_ref().expect("enough cells to fit");
        assert_eq!(fit.weights.len(), 5, "{fit:?}");
        assert!(row.fitted_correlation > row.correlation, "{row:?}");
        assert!(row.fitted_rmse < row.rmse, "{row:?}");
    }
    assert!(pile.fitted_rmse < 0.5 * pile.rmse, "{pile:?}");
    // Point sets anywhere in space: shifting by whole cells changes nothing.
    let points = Distribution::Clusters.generate(20_000, 3);
    let a = &validate_points(&table, "a", &points, &[1.0]).expect("validate")[0];
    let moved: Vec<[f64; 3]> = points
        .iter()
        .map(|p| [p[0] - 100.0, p[1] + 7.0, p[2] - 3.0])
        .collect();
    let b = &validate_points(&table, "b", &moved, &[1.0]).expect("validate")[0];
    assert_eq!(a.cells, b.cells);
    assert!((a.correlation - b.correlation).abs() < 1e-9, "{a:?} {b:?}");
    assert!((a.mean_neighbours - b.mean_neighbours).abs() < 1e-9);
}

#[test]
fn more_samples_than_memory_allows_are_refused_before_allocating() {
    use pellet_bake::table::{MAX_SAMPLES, TableError};
    let err = bake_table(&TableSettings {
        samples: 1_000_000_000_000,
        ..TableSettings::default()
    })
    .expect_err("too many");
    assert_eq!(
        err,
        TableError::TooManySamples {
            samples: 1_000_000_000_000
        }
    );
    assert!(err.to_string().contains("14.6 TiB"), "{err}");
    let err = bake_table(&TableSettings {
        samples: u64::MAX,
        ..TableSettings::default()
    })
    .expect_err("too many");
    assert!(matches!(err, TableError::TooManySamples { .. }), "{err}");
    assert_eq!(MAX_SAMPLES, 1 << 28);
}

#[test]
fn validation_reports_each_ratio_and_step() {
    use pellet_bake::progress::Progress;
    use pellet_bake::table_validation::{Distribution, validate_points_with_progress};
    let table = bake_table(&small(SamplingMethod::Sobol)).expect("bake");
    let points = Distribution::Uniform.generate(5_000, 1);
    let progress = Progress::recording();
    let rows = validate_points_with_progress(&table, "uniform", &points, &[0.5, 1.0], &progress)
        .expect("validate");
    assert_eq!(rows.len(), 2);
    let stages = progress.stages();
    for want in [
        "uniform: 5000 particles, eps/l 0.5 (1 of 2): exact counts",
        "uniform: 5000 particles, eps/l 1 (2 of 2): exact counts",
        "uniform: 5000 particles, eps/l 1 (2 of 2): fitting",
    ] {
        assert!(
            stages.iter().any(|s| s == want),
            "{want:?} not in {stages:?}"
        );
    }
}
