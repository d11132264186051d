//! The wide prefilter of the listed pairs (AVX-512, or AVX2 eight at a
//! time): the touching test of sixteen pairs at once, the touching ones
//! compressed in registers into the pending lanes, the others' springs
//! cleared.
//!
//! Part of the one module that allows `unsafe` ([`super`]): its audit
//! covers every `unsafe` block here.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
use super::records::{HALF, compress_perm256, dist2_256, dist2_512, records256, records512};
#[cfg(target_arch = "x86_64")]
use super::{has_avx2, has_avx512};
use crate::pairlist::lanes::{LANES, PENDING_SPAN, Pending};

/// Whether the wide prefilter ([`prefilter_block`]) runs on this CPU
/// (AVX-512F or AVX2).
#[inline]
pub fn has_wide_prefilter() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The listed pairs a block of the wide prefilter reads.
#[derive(Debug, Clone, Copy)]
pub struct ListedBlock<'a> {
    /// The chunk's positions and radii.
    pub pos: &'a [[f32; 4]],
    /// Owner of each listed pair (list indices, particle indices from `base`).
    pub owner: &'a [u32],
    /// Partner of each listed pair.
    pub partner: &'a [u32],
    /// First particle of the chunk.
    pub base: u32,
    /// First pair of the slab (its springs start there).
    pub k0: usize,
    /// The period along each axis (0: not periodic) and its inverse: the
    /// partners' positions move to the minimum image.
    pub period: Option<([f32; 3], [f32; 3])>,
    /// The particle arrays the kernel reads next for each touching pair's
    /// partner (velocities, spins, forces, torques): the AVX2 prefilter asks
    /// the caches for the partners' records while the pairs wait in
    /// `pending` (a hint; arrays shorter than `pos` are left alone).
    pub ahead: [&'a [[f32; 4]]; 4],
}

/// The wide prefilter for the listed pairs `k..end` (at most [`LANES`]):
/// the same touching test as the scalar one (`dist2 < rsum^2`, unfused,
/// false for NaN), the touching pairs appended in order to `pending` with
/// their positions and springs (the first three of `springs`), the springs
/// of the others cleared when `commit`. Needs room for [`LANES`] more pairs
/// in `pending`.
///
/// # Panics
/// Without AVX2 ([`has_wide_prefilter`]), when `pending` has no room,
/// or when an index is out of range (never, for the list's indices).
#[inline]
pub fn prefilter_block(
    src: &ListedBlock<'_>,
    k: usize,
    end: usize,
    springs: &mut [&mut [f32]],
    commit: bool,
    pending: &mut Pending,
) {
    assert!(end > k && end - k <= LANES && pending.used + LANES <= PENDING_SPAN);
    assert!(end <= src.owner.len() && end <= src.partner.len());
    assert!(end - src.k0 <= springs.iter().map(|s| s.len()).min().unwrap_or(0));
    assert!(k >= src.k0 && src.pos.len() < (i32::MAX as usize - 3) / 4);
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F; the asserts above bound the
            // list and spring ranges the block reads and writes, and the
            // room in `pending`; particle indices are checked inside.
            unsafe { prefilter512(src, k, end, springs, commit, pending) };
            return;
        }
        if has_avx2() {
            // SAFETY: the CPU reports AVX2; as above.
            unsafe { prefilter256(src, k, end, springs, commit, pending) };
            return;
        }
    }
    let _ = commit;
    panic!("the wide prefilter needs AVX2");
}

/// How many listed pairs ahead the wide prefilters ask the caches for the
/// list's streams (owners, partners, springs): 512 pairs, 2 KiB of each.
/// The hardware prefetchers did not keep five streams ahead: the first
/// load of each block stalled on memory (a third of the step on Zen 4 at
/// 1 M particles; 36 -> 28 ms per step with the hints).
#[cfg(target_arch = "x86_64")]
const LIST_AHEAD: usize = 512;

/// Prefetch hints for the list's streams [`LIST_AHEAD`] pairs past `k`
/// (clamped to the slices; a hint never faults).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_list(src: &ListedBlock<'_>, k: usize, springs: &[&mut [f32]]) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    let ahead = |len: usize, at: usize| at.min(len.saturating_sub(1));
    let kk = k + LIST_AHEAD;
    // SAFETY: every address is clamped inside its slice (or is the start
    // of an empty one); prefetching reads nothing and cannot fault.
    unsafe {
        _mm_prefetch::<_MM_HINT_T0>(src.owner.as_ptr().add(ahead(src.owner.len(), kk)).cast());
        _mm_prefetch::<_MM_HINT_T0>(
            src.partner
                .as_ptr()
                .add(ahead(src.partner.len(), kk))
                .cast(),
        );
        for s in springs.iter().take(3) {
            _mm_prefetch::<_MM_HINT_T0>(s.as_ptr().add(ahead(s.len(), kk - src.k0)).cast());
        }
    }
}

/// # Safety
/// AVX-512F must be available; `k..end` must be at most 16 pairs inside
/// `owner`, `partner` and (from `k0`) every spring slice; `pending` must
/// have room for 16 more pairs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn prefilter512(
    src: &ListedBlock<'_>,
    k: usize,
    end: usize,
    springs: &mut [&mut [f32]],
    commit: bool,
    pending: &mut Pending,
) {
    use std::arch::x86_64::*;
    // SAFETY: loads and stores are masked to the block's `end - k` lanes,
    // which lie inside the list and spring slices (caller's contract); the
    // gathers read records of particles checked below to be in the chunk;
    // the stores write 16 elements from `used` (at most `PENDING_SPAN - 16`),
    // inside the pending arrays.
    unsafe {
        let valid: __mmask16 = ((1u32 << (end - k)) - 1) as __mmask16;
        prefetch_list(src, k, springs);
        let base = _mm512_set1_epi32(src.base as i32);
        let vo = _mm512_sub_epi32(
            _mm512_maskz_loadu_epi32(valid, src.owner.as_ptr().add(k).cast()),
            base,
        );
        let vp = _mm512_sub_epi32(
            _mm512_maskz_loadu_epi32(valid, src.partner.as_ptr().add(k).cast()),
            base,
        );
        let n = _mm512_set1_epi32(src.pos.len() as i32);
        let bad =
            _mm512_mask_cmpge_epu32_mask(valid, vo, n) | _mm512_mask_cmpge_epu32_mask(valid, vp, n);
        assert!(bad == 0, "pair lane index out of range");
        let zero = _mm512_setzero_ps();
        // Plain loads and a transpose; lanes past the block read record 0
        // (the chunk has particles: it lists this block) and are ignored.
        let lanes = |v: __m512i| {
            let mut out = [0u32; LANES];
            _mm512_storeu_si512(out.as_mut_ptr().cast(), _mm512_maskz_mov_epi32(valid, v));
            out
        };
        let [ix, iy, iz, iw] = records512(src.pos.as_ptr(), &lanes(vo));
        let [jx, jy, jz, jw] = records512(src.pos.as_ptr(), &lanes(vp));
        let (jx, jy, jz) = match src.period {
            // Minimum image: pj + L round((pi - pj) / L), as `image_of`.
            Some((period, inv)) => {
                let image = |i: __m512, j: __m512, a: usize| {
                    if period[a] > 0.0 {
                        let d = _mm512_sub_ps(i, j);
                        let k = _mm512_roundscale_ps::<
                            { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
                        >(_mm512_mul_ps(d, _mm512_set1_ps(inv[a])));
                        _mm512_add_ps(j, _mm512_mul_ps(k, _mm512_set1_ps(period[a])))
                    } else {
                        j
                    }
                };
                (image(ix, jx, 0), image(iy, jy, 1), image(iz, jz, 2))
            }
            None => (jx, jy, jz),
        };
        let (pi, pj) = ([ix, iy, iz, iw], [jx, jy, jz, jw]);
        let dist2 = dist2_512([ix, iy, iz], [jx, jy, jz]);
        let rsum = _mm512_add_ps(pi[3], pj[3]);
        let touch = _mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(valid, dist2, _mm512_mul_ps(rsum, rsum));
        // The touching pairs' springs go to the lanes with them (read
        // before any is written: a pair's spring is written only when its
        // lane is evaluated, after this).
        let at = pending.used;
        for (a, s) in springs.iter().take(3).enumerate() {
            let xi = _mm512_maskz_loadu_ps(valid, s.as_ptr().add(k - src.k0));
            _mm512_storeu_ps(
                pending.xi[a].as_mut_ptr().add(at),
                _mm512_maskz_compress_ps(touch, xi),
            );
        }
        if commit {
            let apart = valid & !touch;
            for s in springs.iter_mut() {
                _mm512_mask_storeu_ps(s.as_mut_ptr().add(k - src.k0), apart, zero);
            }
        }
        let lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let local = _mm512_add_epi32(_mm512_set1_epi32((k - src.k0) as i32), lane);
        let pair = _mm512_add_epi32(_mm512_set1_epi32(k as i32), lane);
        // Compress in registers, then store all sixteen lanes: the lanes
        // past the touching ones land beyond `used` and are never read.
        // (The memory form of the compress store is microcoded on AMD Zen 4,
        // about a hundred cycles each: it took half the step there.)
        let ints = |v: __m512i| _mm512_maskz_compress_epi32(touch, v);
        _mm512_storeu_si512(pending.i.as_mut_ptr().add(at).cast(), ints(vo));
        _mm512_storeu_si512(pending.j.as_mut_ptr().add(at).cast(), ints(vp));
        _mm512_storeu_si512(pending.local.as_mut_ptr().add(at).cast(), ints(local));
        _mm512_storeu_si512(pending.pair.as_mut_ptr().add(at).cast(), ints(pair));
        for a in 0..4 {
            let (ci, cj) = (
                _mm512_maskz_compress_ps(touch, pi[a]),
                _mm512_maskz_compress_ps(touch, pj[a]),
            );
            _mm512_storeu_ps(pending.pi[a].as_mut_ptr().add(at), ci);
            _mm512_storeu_ps(pending.pj[a].as_mut_ptr().add(at), cj);
        }
        pending.used = at + touch.count_ones() as usize;
    }
}

/// [`prefilter512`] in two halves of eight lanes (AVX2): the same tests on
/// the same values, the touching pairs compressed by a lane permutation
/// ([`compress_perm256`]) and appended in order.
///
/// # Safety
/// AVX2 must be available; the ranges as for [`prefilter512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn prefilter256(
    src: &ListedBlock<'_>,
    k: usize,
    end: usize,
    springs: &mut [&mut [f32]],
    commit: bool,
    pending: &mut Pending,
) {
    use std::arch::x86_64::*;
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    // SAFETY: loads and stores are masked to the block's lanes, which lie
    // inside the list and spring slices (caller's contract); the record
    // loads read particles checked below to be in the chunk; each half
    // stores eight elements from `used` (at most `PENDING_SPAN - 16`, then
    // 8 more), inside the pending arrays.
    unsafe {
        prefetch_list(src, k, springs);
        for h in (k..end).step_by(HALF) {
            let count = (end - h).min(HALF) as i32;
            let valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lane);
            let base = _mm256_set1_epi32(src.base as i32);
            // Lanes past the block read particle 0 (the chunk has
            // particles: it lists this block) and are ignored.
            // Whole halves (all but a slab's last) load and store plainly:
            // AMD's masked moves cost many times more.
            let full = count == HALF as i32;
            let list = |v: &[u32]| {
                let at = v.as_ptr().add(h).cast();
                if full {
                    _mm256_sub_epi32(_mm256_loadu_si256(at), base)
                } else {
                    let raw = _mm256_maskload_epi32(at.cast(), valid);
                    _mm256_and_si256(_mm256_sub_epi32(raw, base), valid)
                }
            };
            let (vo, vp) = (list(src.owner), list(src.partner));
            let n = _mm256_set1_epi32(src.pos.len() as i32);
            let under = |v: __m256i| {
                let neg = _mm256_cmpgt_epi32(_mm256_setzero_si256(), v);
                let ok = _mm256_andnot_si256(neg, _mm256_cmpgt_epi32(n, v));
                _mm256_movemask_epi8(ok) == -1
            };
            assert!(under(vo) && under(vp), "pair lane index out of range");
            let lanes = |v: __m256i| {
                let mut out = [0u32; HALF];
                _mm256_storeu_si256(out.as_mut_ptr().cast(), v);
                out
            };
            let [ix, iy, iz, iw] = records256(src.pos.as_ptr(), &lanes(vo));
            let partners = lanes(vp);
            let [jx, jy, jz, jw] = records256(src.pos.as_ptr(), &partners);
            // The partners lie up to a cell layer ahead of their owners, past
            // the L2 cache: the kernel's loads and the scatter stalled on
            // them. (Indices checked above: inside `pos`, and so inside every
            // array of `ahead` as long.)
            for a in src.ahead {
                if a.len() >= src.pos.len() {
                    for &j in &partners {
                        _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().add(j as usize).cast());
                    }
                }
            }
            let (jx, jy, jz) = match src.period {
                // Minimum image: pj + L round((pi - pj) / L), as `image_of`.
                Some((period, inv)) => {
                    let image = |i: __m256, j: __m256, a: usize| {
                        if period[a] > 0.0 {
                            let d = _mm256_sub_ps(i, j);
                            let k = _mm256_round_ps::<
                                { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
                            >(_mm256_mul_ps(
                                d,
                                _mm256_set1_ps(inv[a]),
                            ));
                            _mm256_add_ps(j, _mm256_mul_ps(k, _mm256_set1_ps(period[a])))
                        } else {
                            j
                        }
                    };
                    (image(ix, jx, 0), image(iy, jy, 1), image(iz, jz, 2))
                }
                None => (jx, jy, jz),
            };
            let (pi, pj) = ([ix, iy, iz, iw], [jx, jy, jz, jw]);
            let dist2 = dist2_256([ix, iy, iz], [jx, jy, jz]);
            let rsum = _mm256_add_ps(pi[3], pj[3]);
            let touch_v = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_LT_OQ>(dist2, _mm256_mul_ps(rsum, rsum)),
                _mm256_castsi256_ps(valid),
            );
            let touch = _mm256_movemask_ps(touch_v) as u32;
            let perm = compress_perm256(touch);
            let at = pending.used;
            // The touching pairs' springs go to the lanes with them (read
            // before any is written, as in `prefilter512`).
            let local0 = h - src.k0;
            for (a, s) in springs.iter().take(3).enumerate() {
                let at_s = s.as_ptr().add(local0);
                let xi = if full {
                    _mm256_loadu_ps(at_s)
                } else {
                    _mm256_maskload_ps(at_s, valid)
                };
                _mm256_storeu_ps(
                    pending.xi[a].as_mut_ptr().add(at),
                    _mm256_permutevar8x32_ps(xi, perm),
                );
            }
            if commit && touch != 0xFF {
                let apart = _mm256_andnot_si256(_mm256_castps_si256(touch_v), valid);
                for s in springs.iter_mut() {
                    let at_s = s.as_mut_ptr().add(local0);
                    if full {
                        // Keep the touching lanes, clear the others.
                        let kept = _mm256_and_ps(_mm256_loadu_ps(at_s), touch_v);
                        _mm256_storeu_ps(at_s, kept);
                    } else {
                        _mm256_maskstore_ps(at_s, apart, _mm256_setzero_ps());
                    }
                }
            }
            let local = _mm256_add_epi32(_mm256_set1_epi32(local0 as i32), lane);
            let pair = _mm256_add_epi32(_mm256_set1_epi32(h as i32), lane);
            let ints = |v: __m256i| _mm256_permutevar8x32_epi32(v, perm);
            _mm256_storeu_si256(pending.i.as_mut_ptr().add(at).cast(), ints(vo));
            _mm256_storeu_si256(pending.j.as_mut_ptr().add(at).cast(), ints(vp));
            _mm256_storeu_si256(pending.local.as_mut_ptr().add(at).cast(), ints(local));
            _mm256_storeu_si256(pending.pair.as_mut_ptr().add(at).cast(), ints(pair));
            for a in 0..4 {
                let (ci, cj) = (
                    _mm256_permutevar8x32_ps(pi[a], perm),
                    _mm256_permutevar8x32_ps(pj[a], perm),
                );
                _mm256_storeu_ps(pending.pi[a].as_mut_ptr().add(at), ci);
                _mm256_storeu_ps(pending.pj[a].as_mut_ptr().add(at), cj);
            }
            pending.used = at + touch.count_ones() as usize;
        }
    }
}
