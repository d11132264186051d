//! [`Sink`]: the output of a scan, which grows in steps while a vector
//! build stores whole registers past its end.

use crate::simd::advise_huge_pages;

/// Output that grows in steps of up to [`SINK_ROOM`] entries: a vector
/// build may store a whole register and keep only the entries it counts.
#[derive(Debug, Default)]
pub struct Sink {
    buf: Vec<u32>,
    len: usize,
}

/// Entries a vector build may write past the end of a [`Sink`] at once.
pub const SINK_ROOM: usize = 16;

/// Entries a [`Sink`] clears at a time within its reserved room (64 KiB).
const SINK_STEP: usize = 16 * 1024;

impl Sink {
    /// An empty sink with room for about `n` entries: reserved, not
    /// written (the buffer is cleared [`SINK_STEP`] entries at a time as it
    /// fills, while those are about to be written anyway).
    pub fn with_capacity(n: usize) -> Self {
        let mut buf = Vec::with_capacity(n + SINK_ROOM);
        advise_huge_pages(buf.spare_capacity_mut());
        Self { buf, len: 0 }
    }

    /// Entries kept.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for `n` more entries and the [`SINK_ROOM`] slots of a
    /// store after them (called before a loop, so the loop calls nothing).
    #[inline(always)]
    pub fn reserve(&mut self, n: usize) {
        if self.buf.len() < self.len + n + SINK_ROOM {
            self.grow(n);
        }
    }

    /// The whole buffer and the count of entries kept: a loop appends
    /// through [`Lanes::append`](super::Lanes::append) with the count in a local (a register, not
    /// a store and a reload per step) and hands it back with
    /// [`Sink::set_len`].
    #[inline(always)]
    pub fn parts(&mut self) -> (&mut [u32], usize) {
        (&mut self.buf, self.len)
    }

    /// Keeps the first `len` entries of the buffer [`Sink::parts`] gave
    /// (panics past the buffer).
    #[inline(always)]
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.buf.len());
        self.len = len;
    }

    /// Appends one entry (reserved before: panics otherwise).
    #[inline(always)]
    pub fn push(&mut self, v: u32) {
        self.buf[self.len] = v;
        self.len += 1;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let need = self.len + n + SINK_ROOM;
        let size = if need <= self.buf.capacity() {
            // Within the reserved room: clear one more step of it.
            (self.buf.len() + SINK_STEP)
                .max(need)
                .min(self.buf.capacity())
        } else {
            (self.buf.len() * 2).max(need)
        };
        self.buf.resize(size, 0);
    }

    /// The kept entries.
    pub fn into_vec(mut self) -> Vec<u32> {
        self.buf.truncate(self.len);
        self.buf
    }
}
