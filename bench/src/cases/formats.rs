//! The asset container: Pellet's blob + zstd + BLAKE3 + validation against
//! the obvious alternative, MessagePack with one value per element (what a
//! plain `#[derive(Serialize)]` of `Vec<[f32; 3]>` gives), and against a bare
//! memory copy of the same bytes (the physical bound).

use pellet_formats::PodVec;
use pellet_formats::assets::{FREE_PARTICLE, SimState};
use pellet_formats::container::{DecodeLimits, decode, encode};
use pellet_formats::scene::Rng;
use serde::{Deserialize, Serialize};

use crate::harness::{Row, time};

/// The same state with plain vectors: serde writes one MessagePack value per float.
#[derive(Serialize, Deserialize)]
struct PlainState {
    time: f64,
    step: u64,
    positions: Vec<[f32; 3]>,
    velocities: Vec<[f32; 3]>,
    angular_velocities: Vec<[f32; 3]>,
    radii: Vec<f32>,
    body_of_particle: Vec<u32>,
}

fn state(n: usize) -> SimState {
    let mut rng = Rng::new(1);
    let mut v3 = |scale: f32| -> Vec<[f32; 3]> {
        (0..n)
            .map(|_| {
                [
                    rng.range(-scale, scale),
                    rng.range(-scale, scale),
                    rng.range(-scale, scale),
                ]
            })
            .collect()
    };
    let positions = v3(1.0);
    let velocities = v3(0.5);
    SimState {
        time: 1.0,
        step: 1000,
        positions: PodVec(positions),
        velocities: PodVec(velocities),
        angular_velocities: PodVec(vec![[0.0; 3]; n]),
        radii: PodVec(vec![0.005; n]),
        body_of_particle: PodVec(vec![FREE_PARTICLE; n]),
        bodies: PodVec(Vec::new()),
        ..Default::default()
    }
}

/// Encode and decode rows for an `n`-particle simulation state.
pub fn run(n: usize, samples: usize) -> Vec<Row> {
    let s = state(n);
    let plain = PlainState {
        time: s.time,
        step: s.step,
        positions: s.positions.0.clone(),
        velocities: s.velocities.0.clone(),
        angular_velocities: s.angular_velocities.0.clone(),
        radii: s.radii.0.clone(),
        body_of_particle: s.body_of_particle.0.clone(),
    };
    let raw_bytes = n * (3 * 12 + 8);
    let workload = format!(
        "{} particles ({:.1} MB of arrays)",
        n,
        raw_bytes as f64 / 1e6
    );
    let pellet_file = encode(&s).expect("benchmark state is valid");
    let plain_file = rmp_serde::to_vec_named(&plain).expect("serialize");
    let limits = DecodeLimits::default();

    let encode_pellet = time(samples, || encode(&s).expect("encode"));
    let encode_plain = time(samples, || {
        rmp_serde::to_vec_named(&plain).expect("serialize")
    });
    let decode_pellet = time(samples, || {
        decode::<SimState>(&pellet_file, &limits).expect("decode")
    });
    let decode_plain = time(samples, || {
        rmp_serde::from_slice::<PlainState>(&plain_file).expect("decode")
    });
    let arrays: Vec<u8> = [
        s.positions.as_bytes(),
        s.velocities.as_bytes(),
        s.angular_velocities.as_bytes(),
        s.radii.as_bytes(),
        s.body_of_particle.as_bytes(),
    ]
    .concat();
    let copy = time(samples, || arrays.clone());
    let gbps = |t: f64| raw_bytes as f64 / t / 1e9;

    vec![
        Row {
            group: "formats",
            name: "encode simulation state".into(),
            workload: workload.clone(),
            pellet: encode_pellet.clone(),
            peer: "rmp-serde, one value per element".into(),
            peer_timing: Some(encode_plain),
            notes: format!(
                "Pellet file {:.1} MB (zstd + BLAKE3 + validation), per-element MessagePack {:.1} MB uncompressed; Pellet {:.2} GB/s",
                pellet_file.len() as f64 / 1e6,
                plain_file.len() as f64 / 1e6,
                gbps(encode_pellet.median_s)
            ),
        },
        Row {
            group: "formats",
            name: "decode simulation state".into(),
            workload: workload.clone(),
            pellet: decode_pellet.clone(),
            peer: "rmp-serde, one value per element".into(),
            peer_timing: Some(decode_plain),
            notes: format!(
                "Pellet includes zstd, BLAKE3 and semantic validation; {:.2} GB/s",
                gbps(decode_pellet.median_s)
            ),
        },
        Row {
            group: "formats",
            name: "decode simulation state vs memory copy".into(),
            workload,
            pellet: decode_pellet,
            peer: "memcpy of the raw arrays (bound)".into(),
            peer_timing: Some(copy.clone()),
            notes: format!("memcpy {:.2} GB/s", gbps(copy.median_s)),
        },
    ]
}
