//! Any byte string given to the decoder returns `Ok` or a typed error: never
//! a panic, an abort, or an allocation beyond the header's declared size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pellet_formats::DecodeLimits;
use pellet_formats::assets::decode_any;

fuzz_target!(|data: &[u8]| {
    // A small limit keeps each run fast and makes the size checks bite.
    let limits = DecodeLimits {
        max_payload: 16 << 20,
    };
    if let Ok((header, asset)) = decode_any(data, &limits) {
        assert_eq!(header.kind, asset.kind());
    }
});
