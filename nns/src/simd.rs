//! Runtime choice of the instruction set for the CPU search: the one module
//! of this crate that allows `unsafe` (the workspace denies it), because
//! calling a `#[target_feature]` function is unsafe until the feature is
//! known to be there.
//!
//! Audit: each `unsafe` block below calls a function compiled for a feature
//! only after `is_x86_feature_detected!` has reported that feature on this
//! CPU (read once, in [`level`]; `PELLET_SIMD` may only lower it). The
//! functions called contain no unsafe code: they inline the safe
//! [`kernel`] loops, which the compiler vectorises for the feature. Off
//! x86-64, or without the features, the portable build runs. Every build
//! computes the same f64 sums in the same order, so every build finds the
//! same pairs (tested in `tests/nns.rs`).
//!
//! [`DisjointLists`] lets the threads of the CPU search write whole lists
//! into one output at places given by a prefix sum, which Rust's slices
//! cannot split (the places follow the input order, not the threads'
//! ranges); its audit is on the type.
#![allow(unsafe_code)]

use super::cpu::Lists;
use super::grid::CellGrid;
use super::kernel::{self, BoxIndex, HalfShell, LANES, Lanes, Points, Portable};

/// One output array that several threads fill with whole lists, each at
/// its own place `from..to`.
///
/// Audit: [`DisjointLists::write`] checks that the list fills exactly
/// `from..to` and that `from..to` lies in the array, so no write leaves
/// its slot or the array. The callers write each point's list once, at
/// `offsets[id]..offsets[id + 1]` of a prefix sum over the points' list
/// lengths: slots that do not overlap, so no two threads ever write the
/// same element. The array is borrowed mutably for the writer's whole
/// life, so nothing reads it meanwhile.
#[derive(Debug)]
pub struct DisjointLists<'a> {
    base: *mut u32,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [u32]>,
}

// SAFETY: the writer only ever writes disjoint slots (see the type's audit),
// so sharing it between threads creates no data race.
unsafe impl Sync for DisjointLists<'_> {}

impl<'a> DisjointLists<'a> {
    /// A writer over `out`.
    pub fn new(out: &'a mut [u32]) -> Self {
        Self {
            base: out.as_mut_ptr(),
            len: out.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// Asks the CPU to bring slot `at` into cache for writing (a hint: does
    /// nothing off x86-64, and never faults).
    #[inline(always)]
    pub fn prefetch(&self, at: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self
                .base
                .wrapping_add(at.min(self.len))
                .cast::<i8>()
                .cast_const();
            // SAFETY: a prefetch is a hint: it reads nothing the program
            // sees and never faults, whatever the address.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    /// Writes one list at `from`: `back`, then `ids[t]` for each `t` of
    /// `fwd`, then `own`; returns its length.
    ///
    /// # Panics
    /// When the list would not fit in the array, or an entry of `fwd` is
    /// not an index of `ids`.
    #[inline(always)]
    pub fn write_list(
        &self,
        from: usize,
        back: &[u32],
        fwd: &[u32],
        ids: &[u32],
        own: &[u32],
    ) -> usize {
        let len = back.len() + fwd.len() + own.len();
        assert!(from <= self.len && len <= self.len - from);
        // SAFETY: `from..from + len` lies in the array (checked above) and
        // is the slot of one list, written by one thread once (the type's
        // audit); `ids[t]` is checked before each write.
        // Element by element: lists are a few entries long, shorter than a
        // call to `memcpy` costs.
        unsafe {
            let p = self.base.add(from);
            for (k, &v) in back.iter().enumerate() {
                p.add(k).write(v);
            }
            let q = p.add(back.len());
            for (k, &t) in fwd.iter().enumerate() {
                q.add(k).write(ids[t as usize]);
            }
            let r = q.add(fwd.len());
            for (k, &v) in own.iter().enumerate() {
                r.add(k).write(v);
            }
        }
        len
    }
}

/// Asks Linux to back `v` with huge pages where it can (a hint, for large
/// arrays about to be written once: one fault per 2 MiB instead of per
/// 4 KiB). Does nothing elsewhere, or for arrays under 4 MiB.
pub fn advise_huge_pages<T>(v: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = size_of_val(v);
        if bytes < 2 * HUGE {
            return;
        }
        let start = v.as_mut_ptr() as usize;
        let from = start.next_multiple_of(HUGE);
        let to = (start + bytes) / HUGE * HUGE;
        if to > from {
            // SAFETY: `from..to` lies inside `v`'s allocation (aligned
            // inwards); MADV_HUGEPAGE changes how the kernel backs the pages,
            // never their contents, and its result is only a hint.
            unsafe {
                libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// `n` copies of `value` in memory advised to huge pages
/// ([`advise_huge_pages`]) before it is written.
pub fn huge_vec<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_huge_pages(v.spare_capacity_mut());
    v.resize(n, value);
    v
}

/// `n` zeros in memory advised to huge pages: the allocator's zeroed pages
/// are not touched here, so capacity never written costs nothing.
pub fn huge_zeroed<T: Clone + Default + bytemuck::Zeroable>(n: usize) -> Vec<T> {
    let mut v = vec![T::default(); n];
    advise_huge_pages(&mut v);
    v
}

/// The instruction sets the search is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Avx512,
    Avx2,
    Portable,
}

/// The widest instructions this CPU has, lowered by `PELLET_SIMD=avx2` or
/// `PELLET_SIMD=portable` in the environment (to measure or test the
/// narrower builds on a wider CPU).
fn level() -> Level {
    static LEVEL: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let asked = std::env::var("PELLET_SIMD").unwrap_or_default();
            let avx2 = std::arch::is_x86_feature_detected!("avx2") && asked != "portable";
            let avx512 = std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("popcnt")
                && std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2")
                && avx2
                && asked != "avx2";
            if avx512 {
                return Level::Avx512;
            }
            if avx2 {
                return Level::Avx2;
            }
        }
        Level::Portable
    })
}

/// The instruction set the search uses here: `"avx512"`, `"avx2"` or
/// `"portable"`.
pub fn simd_level() -> &'static str {
    match level() {
        Level::Avx512 => "avx512",
        Level::Avx2 => "avx2",
        Level::Portable => "portable",
    }
}

/// [`kernel::half_shell`] with the widest instructions this CPU has.
pub fn half_shell(grid: &CellGrid, bx: &BoxIndex, z0: u32, z1: u32, eps2: f64) -> HalfShell {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU reports AVX-512F, the only feature the function is
        // compiled for; the call passes plain references.
        Level::Avx512 => return unsafe { half_shell_avx512(grid, bx, z0, z1, eps2) },
        // SAFETY: the CPU reports AVX2, the only feature the function is
        // compiled for; the call passes plain references.
        Level::Avx2 => return unsafe { half_shell_avx2(grid, bx, z0, z1, eps2) },
        Level::Portable => {}
    }
    kernel::half_shell::<Portable>(grid, bx, z0, z1, eps2)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,popcnt,bmi1,bmi2")]
fn half_shell_avx512(grid: &CellGrid, bx: &BoxIndex, z0: u32, z1: u32, eps2: f64) -> HalfShell {
    kernel::half_shell::<Avx512>(grid, bx, z0, z1, eps2)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn half_shell_avx2(grid: &CellGrid, bx: &BoxIndex, z0: u32, z1: u32, eps2: f64) -> HalfShell {
    kernel::half_shell::<Avx2>(grid, bx, z0, z1, eps2)
}

/// The full lists of every point of `cells` (linear indices, in the order
/// given), testing all 27 cells around each point, with the widest
/// instructions this CPU has.
pub fn search_cells(grid: &CellGrid, cells: &[usize], eps2: f64) -> Lists {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU reports AVX-512F, the only feature the function is
        // compiled for; the call passes plain references.
        Level::Avx512 => return unsafe { cells_avx512(grid, cells, eps2) },
        // SAFETY: the CPU reports AVX2, the only feature the function is
        // compiled for; the call passes plain references.
        Level::Avx2 => return unsafe { cells_avx2(grid, cells, eps2) },
        Level::Portable => {}
    }
    cells_with::<Portable>(grid, cells, eps2)
}

#[inline(always)]
fn cells_with<L: Lanes>(grid: &CellGrid, cells: &[usize], eps2: f64) -> Lists {
    kernel::full_cells::<L>(grid, cells.iter().copied(), eps2)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,popcnt,bmi1,bmi2")]
fn cells_avx512(grid: &CellGrid, cells: &[usize], eps2: f64) -> Lists {
    cells_with::<Avx512>(grid, cells, eps2)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn cells_avx2(grid: &CellGrid, cells: &[usize], eps2: f64) -> Lists {
    cells_with::<Avx2>(grid, cells, eps2)
}

/// The AVX-512 test, sixteen candidates at a time: the squared distance in
/// f32 (no fused multiply-add) sorts each candidate into surely in, surely
/// out, or borderline, and only borderline candidates are decided by the
/// exact f64 sum, eight at a time ([`exact_mask_avx512`]). Neighbours are
/// written without a branch each (their indices compressed by the mask in a
/// register and stored whole).
///
/// Why the f32 sum decides the others exactly as the f64 sum would: with
/// `u = 2^-24`, each f32 difference, square and sum of positive terms adds
/// a relative error of at most `u`, so the f32 sum lies within a factor
/// `1 +- 6u` (about `+-0.19 * 2^-19`) of the true squared distance, and the
/// f64 sum within `1 +- 2^-51`. A candidate is surely in when the f32 sum is
/// at most `eps2 (1 - 2^-19)`, surely out when it exceeds `eps2 (1 +
/// 2^-19)` (both bounds rounded to f32, a further `u`), and borderline in
/// between, where the f64 sum decides. This holds while no square
/// overflows or loses precision to underflow near `eps2`, which
/// [`F32_EPS2`] bounds; outside it, every candidate is decided in f64.
#[cfg(target_arch = "x86_64")]
struct Avx512;

/// The range of `eps2` (m^2) over which the f32 test of [`Avx512`] is
/// exact: from far above f32's smallest normal square to far below its
/// largest.
#[cfg(target_arch = "x86_64")]
const F32_EPS2: std::ops::RangeInclusive<f64> = 1e-30..=1e30;

/// The exact f64 test of eight candidates from `at` (the portable test's
/// sums, in the same order).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn exact_mask_avx512(c: Points<'_>, at: usize, p: [f64; 3], eps2: f64) -> u32 {
    use std::arch::x86_64::*;
    let x = &c.xs[at..at + 8];
    let y = &c.ys[at..at + 8];
    let z = &c.zs[at..at + 8];
    // SAFETY: used only by the functions above compiled for AVX-512F/VL,
    // which run after the CPU reported them; each load reads the eight
    // floats of a slice just checked to hold eight.
    unsafe {
        let dx = _mm512_sub_pd(
            _mm512_set1_pd(p[0]),
            _mm512_cvtps_pd(_mm256_loadu_ps(x.as_ptr())),
        );
        let dy = _mm512_sub_pd(
            _mm512_set1_pd(p[1]),
            _mm512_cvtps_pd(_mm256_loadu_ps(y.as_ptr())),
        );
        let dz = _mm512_sub_pd(
            _mm512_set1_pd(p[2]),
            _mm512_cvtps_pd(_mm256_loadu_ps(z.as_ptr())),
        );
        let d2 = _mm512_add_pd(
            _mm512_add_pd(_mm512_mul_pd(dx, dx), _mm512_mul_pd(dy, dy)),
            _mm512_mul_pd(dz, dz),
        );
        u32::from(_mm512_cmp_pd_mask::<_CMP_LE_OQ>(d2, _mm512_set1_pd(eps2)))
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx512 {
    #[inline(always)]
    fn mask(c: Points<'_>, at: usize, p: [f64; 3], eps2: f64) -> u32 {
        use std::arch::x86_64::*;
        if !F32_EPS2.contains(&eps2) {
            return exact_mask_avx512(c, at, p, eps2)
                | (exact_mask_avx512(c, at + 8, p, eps2) << 8);
        }
        let x = &c.xs[at..at + LANES];
        let y = &c.ys[at..at + LANES];
        let z = &c.zs[at..at + LANES];
        const MARGIN: f64 = 1.0 / (1u64 << 19) as f64;
        // SAFETY: `Avx512` is used only by the functions above compiled for
        // AVX-512F/VL, which run after the CPU reported them; each load
        // reads the sixteen floats of a slice just checked to hold sixteen.
        let (inside, unsure) = unsafe {
            // The query's coordinates came from f32: exact.
            let dx = _mm512_sub_ps(_mm512_set1_ps(p[0] as f32), _mm512_loadu_ps(x.as_ptr()));
            let dy = _mm512_sub_ps(_mm512_set1_ps(p[1] as f32), _mm512_loadu_ps(y.as_ptr()));
            let dz = _mm512_sub_ps(_mm512_set1_ps(p[2] as f32), _mm512_loadu_ps(z.as_ptr()));
            let d2 = _mm512_add_ps(
                _mm512_add_ps(_mm512_mul_ps(dx, dx), _mm512_mul_ps(dy, dy)),
                _mm512_mul_ps(dz, dz),
            );
            let lo = _mm512_set1_ps((eps2 * (1.0 - MARGIN)) as f32);
            let hi = _mm512_set1_ps((eps2 * (1.0 + MARGIN)) as f32);
            let inside = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(d2, lo);
            let outside = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(d2, hi);
            (u32::from(inside), u32::from(!(inside | outside)))
        };
        if unsure == 0 {
            return inside;
        }
        let mut exact = 0;
        if unsure & 0xff != 0 {
            exact |= exact_mask_avx512(c, at, p, eps2);
        }
        if unsure >> 8 != 0 {
            exact |= exact_mask_avx512(c, at + 8, p, eps2) << 8;
        }
        (inside & !unsure) | (exact & unsure)
    }

    /// Without a branch per neighbour: the entries are compressed by the
    /// mask in a register and stored whole.
    #[inline(always)]
    fn append(values: &[u32], m: u32, room: &mut [u32]) -> usize {
        compress_into(values, m, room)
    }
}

/// Writes the entries of `v` (sixteen) whose bit is set in `m` to the
/// start of `room` (a whole register's worth) and returns how many they
/// are.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn compress_into(v: &[u32], m: u32, room: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    let v = &v[..LANES];
    let room = &mut room[..LANES];
    // SAFETY: used only inside the AVX-512F/VL builds above, which run after
    // the CPU reported both; the load reads the sixteen entries of `v`, the
    // store writes the sixteen of `room` (both checked just above).
    unsafe {
        let c = _mm512_maskz_compress_epi32(m as u16, _mm512_loadu_si512(v.as_ptr().cast()));
        _mm512_storeu_si512(room.as_mut_ptr().cast(), c);
    }
    m.count_ones() as usize
}

/// The AVX2 test: as [`Avx512`], four candidates per register (neighbours
/// written one by one: AVX2 has no compress).
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    #[inline(always)]
    fn mask(c: Points<'_>, at: usize, p: [f64; 3], eps2: f64) -> u32 {
        use std::arch::x86_64::*;
        let x = &c.xs[at..at + LANES];
        let y = &c.ys[at..at + LANES];
        let z = &c.zs[at..at + LANES];
        let mut m = 0u32;
        for half in 0..LANES / 4 {
            let k = 4 * half;
            // SAFETY: `Avx2` is used only by the functions above compiled for
            // AVX2, which run after the CPU reported it; each load reads four
            // floats of a slice just checked to hold eight, from 0 or 4.
            let bits = unsafe {
                let dx = _mm256_sub_pd(
                    _mm256_set1_pd(p[0]),
                    _mm256_cvtps_pd(_mm_loadu_ps(x[k..k + 4].as_ptr())),
                );
                let dy = _mm256_sub_pd(
                    _mm256_set1_pd(p[1]),
                    _mm256_cvtps_pd(_mm_loadu_ps(y[k..k + 4].as_ptr())),
                );
                let dz = _mm256_sub_pd(
                    _mm256_set1_pd(p[2]),
                    _mm256_cvtps_pd(_mm_loadu_ps(z[k..k + 4].as_ptr())),
                );
                let d2 = _mm256_add_pd(
                    _mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)),
                    _mm256_mul_pd(dz, dz),
                );
                _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(d2, _mm256_set1_pd(eps2)))
            };
            m |= (bits as u32) << k;
        }
        m
    }
}
