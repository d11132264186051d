//! Every asset kind survives encode -> decode unchanged; the container's
//! errors carry the numbers and the file name.

mod common;

use pellet_formats::assets::{ParticleBody, SimState, decode_any};
use pellet_formats::container::{
    self, DecodeLimits, FORMAT_VERSION, HEADER_LEN, Header, decode, encode,
};
use pellet_formats::io::{read_any, read_asset, write_asset};
use pellet_formats::{AssetKind, DecodeError};

#[test]
fn every_kind_round_trips() {
    for (name, asset) in common::all() {
        let bytes = common::encode(&asset);
        let (header, back) = decode_any(&bytes, &DecodeLimits::default()).expect(name);
        assert_eq!(header.kind, asset.kind(), "{name}");
        assert_eq!(header.version, FORMAT_VERSION);
        assert!(header.is_compressed());
        assert_eq!(back, asset, "{name}");
    }
}

#[test]
fn encoding_is_deterministic() {
    for (name, asset) in common::all() {
        assert_eq!(common::encode(&asset), common::encode(&asset), "{name}");
    }
}

#[test]
fn typed_decode_refuses_another_kind() {
    let bytes = encode(&common::sim_state()).expect("valid");
    let err = decode::<ParticleBody>(&bytes, &DecodeLimits::default()).expect_err("wrong kind");
    assert_eq!(
        err.to_string(),
        "expected a particle body asset, found a simulation state asset"
    );
}

#[test]
fn a_newer_version_names_the_file_and_both_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("duck.pellet");
    let mut bytes = encode(&common::sim_state()).expect("valid");
    bytes[8..10].copy_from_slice(&3u16.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write");
    let err = read_asset::<SimState>(&path, &DecodeLimits::default()).expect_err("too new");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: format version 3 is newer than this build reads (1)",
            path.display()
        )
    );
}

#[test]
fn header_problems_are_specific() {
    let good = encode(&common::sim_state()).expect("valid");
    let limits = DecodeLimits::default();
    let check = |mutate: &dyn Fn(&mut Vec<u8>), expected: &str| {
        let mut bytes = good.clone();
        mutate(&mut bytes);
        let err = decode_any(&bytes, &limits).expect_err(expected);
        assert!(
            err.to_string().contains(expected),
            "{err} should contain {expected:?}"
        );
    };
    check(&|b| b.truncate(0), "not a Pellet file (starts with nothing");
    check(
        &|b| b.truncate(40),
        "shorter than the 80-byte Pellet header",
    );
    check(&|b| b[0] = b'{', "not a Pellet file");
    check(
        &|b| b[8..10].copy_from_slice(&[0, 0]),
        "format version 0 is invalid",
    );
    check(
        &|b| b[10..12].copy_from_slice(&[99, 0]),
        "unknown asset kind 99",
    );
    check(&|b| b[12] |= 0x80, "unknown header flags 0x00000080");
    check(&|b| b[70] = 1, "reserved header byte at offset 70 is 0x01");
    check(
        &|b| b[24..32].copy_from_slice(&(8u64 << 30).to_le_bytes()),
        "exceeds the limit of 1073741824 bytes",
    );
    check(
        &|b| {
            b.pop();
        },
        "payload truncated",
    );
    check(&|b| b.push(0), "1 unexpected bytes after the payload");
    check(&|b| b[40] ^= 1, "content hash mismatch");
    check(
        &|b| {
            let last = b.len() - 1;
            b[last] ^= 0x55;
        },
        "",
    );
}

#[test]
fn raw_payloads_are_read_too() {
    let state = common::sim_state();
    let payload = rmp_serde::to_vec_named(&state).expect("serialize");
    let header = Header {
        version: 1,
        kind: AssetKind::SimState,
        flags: 0,
        stored_len: payload.len() as u64,
        payload_len: payload.len() as u64,
        hash: *blake3::hash(&payload).as_bytes(),
    };
    let mut bytes = header.to_bytes().to_vec();
    bytes.extend_from_slice(&payload);
    let back: SimState = decode(&bytes, &DecodeLimits::default()).expect("raw payload");
    assert_eq!(back, state);
}

#[test]
fn invalid_assets_are_never_written_nor_accepted() {
    let mut state = common::sim_state();
    state.radii[1] = -1.0;
    let err = encode(&state).expect_err("negative radius");
    assert_eq!(
        err.to_string(),
        "refusing to write an invalid simulation state: radii[1]: is -1, must be finite, greater than zero and at most 1e6 m"
    );
    // The same asset smuggled past the encoder is refused by the decoder.
    let payload = rmp_serde::to_vec_named(&state).expect("serialize");
    let bytes = container::encode_payload(AssetKind::SimState, &payload).expect("wrap");
    let err = decode::<SimState>(&bytes, &DecodeLimits::default()).expect_err("invalid");
    assert!(matches!(err, DecodeError::Invalid { .. }), "{err}");
}

#[test]
fn semantic_validation_catches_inconsistent_bodies() {
    let mut body = common::particle_body();
    body.positions.pop();
    assert!(
        encode(&body)
            .expect_err("count")
            .to_string()
            .contains("one per occupied voxel")
    );
    let mut body = common::particle_body();
    body.inertia[0][1] = 1.0;
    assert!(
        encode(&body)
            .expect_err("asymmetric")
            .to_string()
            .contains("symmetric")
    );
    let mut body = common::particle_body();
    body.occupancy[1] |= 0x80; // bit 15 of a 12-voxel grid
    assert!(
        encode(&body)
            .expect_err("spare bits")
            .to_string()
            .contains("past the last voxel")
    );
    let mut body = common::particle_body();
    body.positions[2][1] = f32::NAN;
    assert!(
        encode(&body)
            .expect_err("nan")
            .to_string()
            .contains("positions[2]")
    );
    let mut table = common::overlap_table();
    table.ratios[1] = 0.1;
    assert!(
        encode(&table)
            .expect_err("order")
            .to_string()
            .contains("strictly ascending")
    );
    let mut manifest = common::manifest();
    manifest.objects[1].hash = "../../etc/passwd".into();
    assert!(
        encode(&manifest)
            .expect_err("hash")
            .to_string()
            .contains("hex digits")
    );
}

/// A file written before a field existed still loads: fields added later are
/// `#[serde(default)]`. Here, a particle body without its `source` field.
#[test]
fn files_without_later_optional_fields_still_load() {
    use pellet_formats::PodVec;
    use pellet_formats::assets::FillMode;
    /// The particle body as an earlier writer laid it out: no `source`.
    #[derive(serde::Serialize)]
    struct EarlierParticleBody<'a> {
        name: &'a str,
        fill: FillMode,
        voxel_size: f32,
        grid_origin: [f32; 3],
        grid_dims: [u32; 3],
        occupancy: &'a PodVec<u8>,
        positions: &'a PodVec<[f32; 3]>,
        density: f32,
        mass: f32,
        centre_of_mass: [f32; 3],
        inertia: [[f32; 3]; 3],
    }
    let body = common::particle_body();
    let value = rmp_serde::to_vec_named(&EarlierParticleBody {
        name: &body.name,
        fill: body.fill,
        voxel_size: body.voxel_size,
        grid_origin: body.grid_origin,
        grid_dims: body.grid_dims,
        occupancy: &body.occupancy,
        positions: &body.positions,
        density: body.density,
        mass: body.mass,
        centre_of_mass: body.centre_of_mass,
        inertia: body.inertia,
    })
    .expect("serialize");
    let bytes = container::encode_payload(AssetKind::ParticleBody, &value).expect("wrap");
    let back: ParticleBody = decode(&bytes, &DecodeLimits::default()).expect("old file");
    assert_eq!(back.source, Default::default());
    assert_eq!(back.positions, body.positions);
}

#[test]
fn files_are_written_atomically_and_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.pellet");
    let bytes = write_asset(&path, &common::sim_state()).expect("write");
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("ls").count(),
        1,
        "no temporary file left"
    );
    let (header, any) = read_any(&path, &DecodeLimits::default()).expect("read back");
    assert_eq!(header.kind, AssetKind::SimState);
    assert_eq!(any.kind(), AssetKind::SimState);
    assert_eq!(bytes.len(), HEADER_LEN + header.stored_len as usize);
}

#[test]
fn a_missing_file_names_itself() {
    let err = read_asset::<SimState>(
        std::path::Path::new("nope/missing.pellet"),
        &DecodeLimits::default(),
    )
    .expect_err("missing");
    assert!(
        err.to_string()
            .starts_with("nope/missing.pellet: cannot read:"),
        "{err}"
    );
}
