//! Golden files: one small file per asset kind under `tests/golden/` that
//! every future build must keep loading. Breaking one needs a format version
//! bump and a migration, not a re-bless.
//!
//! To (re)write them after an intentional change of the samples, run
//! `PELLET_BLESS_GOLDEN=1 cargo test -p pellet-formats --test golden` and
//! commit the files; a missing file is a failure otherwise.

mod common;

use pellet_formats::assets::decode_any;
use pellet_formats::container::DecodeLimits;

#[test]
fn golden_files_keep_loading() {
    let bless = std::env::var_os("PELLET_BLESS_GOLDEN").is_some();
    let dir = common::golden_dir();
    for (name, expected) in common::all() {
        let path = dir.join(name);
        if bless {
            std::fs::create_dir_all(&dir).expect("create golden dir");
            std::fs::write(&path, common::encode(&expected)).expect("write golden file");
        }
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (bless with PELLET_BLESS_GOLDEN=1 if this is a new kind)",
                path.display()
            )
        });
        let (header, asset) = decode_any(&bytes, &DecodeLimits::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(header.kind, expected.kind(), "{name}");
        assert_eq!(
            asset, expected,
            "{name} decodes to something else than the sample"
        );
    }
}

#[test]
fn there_is_a_golden_file_for_every_kind() {
    let kinds: Vec<_> = common::all().iter().map(|(_, a)| a.kind()).collect();
    for kind in pellet_formats::AssetKind::ALL {
        assert!(kinds.contains(&kind), "no golden sample for {kind}");
    }
}
