//! Stage `sort`, CPU twin of `sort.wgsl`: the counting sort of particles by
//! cell key (`cell_keys`, `scan_cells` for `scan_block` + `scan_add`,
//! `scatter`, `sort_cells`) and the gathers into the new order
//! (`reorder_particles`, `reorder_rk2`, `reorder_history`).

use std::sync::atomic::Ordering;

use rayon::prelude::*;

use crate::Counter;
use crate::cpu::{CpuSim, MIN_LEN};

impl CpuSim {
    /// Kernel `cell_keys`: key of every particle, and particles per key.
    pub fn cell_keys(&mut self) {
        for c in &self.cell_count {
            c.store(0, Ordering::Relaxed);
        }
        let grid = self.grid;
        let counts = &self.cell_count;
        self.keys
            .par_iter_mut()
            .zip(self.state.pos.par_iter())
            .with_min_len(MIN_LEN)
            .for_each(|(key, p)| {
                *key = grid.cell_key(grid.cell_coord([p[0], p[1], p[2]]));
                counts[*key as usize].fetch_add(1, Ordering::Relaxed);
            });
    }

    /// Kernels `scan_block` + `scan_add`: exclusive prefix sum of the counts.
    pub fn scan_cells(&mut self) {
        let mut sum = 0u32;
        for (start, count) in self.cell_start.iter_mut().zip(&self.cell_count) {
            *start = sum;
            sum += count.load(Ordering::Relaxed);
        }
    }

    /// Kernel `scatter`: each particle takes a slot in its key's range. (The
    /// GPU takes slots in arbitrary order; `sort_cells` makes the order stable.)
    pub fn scatter(&mut self) {
        self.cursor.iter_mut().for_each(|c| *c = 0);
        for (i, &key) in self.keys.iter().enumerate() {
            let k = key as usize;
            let slot = self.cell_start[k] + self.cursor[k];
            self.cursor[k] += 1;
            self.sorted_index[slot as usize] = i as u32;
        }
    }

    /// Kernel `sort_cells`: orders each key's particles by persistent id, and
    /// records the largest occupancy.
    pub fn sort_cells(&mut self) {
        let meta = &self.state.meta;
        let mut max_occupancy = 0u32;
        for k in 0..self.params.num_keys as usize {
            let (start, end) = (self.cell_start[k] as usize, self.cell_start[k + 1] as usize);
            max_occupancy = max_occupancy.max((end - start) as u32);
            let seg = &mut self.sorted_index[start..end];
            for a in 1..seg.len() {
                let v = seg[a];
                let id = meta[v as usize][0];
                let mut b = a;
                while b > 0 && meta[seg[b - 1] as usize][0] > id {
                    seg[b] = seg[b - 1];
                    b -= 1;
                }
                seg[b] = v;
            }
        }
        self.counters[Counter::MaxOccupancy as usize].fetch_max(max_occupancy, Ordering::Relaxed);
    }

    /// Kernel `reorder_particles`: gathers particle data into sorted order.
    pub fn reorder_particles(&mut self) {
        let idx = &self.sorted_index;
        let s = &mut self.state;
        let f4 = &mut self.scratch_f4;
        gather(&mut s.pos, idx, f4);
        gather(&mut s.vel, idx, f4);
        gather(&mut s.angvel, idx, f4);
        gather(&mut s.meta, idx, &mut self.scratch_u4);
        gather(&mut s.local, idx, f4);
        for (k, m) in s.meta.iter().enumerate() {
            self.inv_index[m[0] as usize] = k as u32;
        }
    }

    /// Kernel `reorder_rk2`: gathers the RK2 start-of-step copies.
    pub fn reorder_rk2(&mut self) {
        let idx = &self.sorted_index;
        let f4 = &mut self.scratch_f4;
        gather(&mut self.pos0, idx, f4);
        gather(&mut self.vel0, idx, f4);
        gather(&mut self.angvel0, idx, f4);
    }

    /// Kernel `reorder_history`: gathers the used history slots into
    /// `hist_old` / `hist_count_old` in sorted order.
    pub fn reorder_history(&mut self) {
        let slots = self.params.slots as usize;
        let idx = &self.sorted_index;
        let src_count = &self.state.hist_count;
        let src = &self.state.hist;
        self.hist_count_old
            .par_iter_mut()
            .zip(self.hist_old.par_chunks_mut(slots))
            .enumerate()
            .with_min_len(MIN_LEN)
            .for_each(|(k, (count, dst))| {
                let from = idx[k] as usize;
                let c = src_count[from];
                *count = c;
                let c = c as usize;
                dst[..c].copy_from_slice(&src[from * slots..from * slots + c]);
            });
    }

    /// The whole counting sort, in kernel order.
    pub fn sort(&mut self, rk2: bool) {
        self.cell_keys();
        self.scan_cells();
        self.scatter();
        self.sort_cells();
        self.reorder_particles();
        if rk2 {
            self.reorder_rk2();
        }
        self.reorder_history();
    }
}

/// `src` permuted by `idx` (`out[k] = src[idx[k]]`), through `scratch`,
/// which keeps its allocation from step to step.
fn gather<T: Copy + Send + Sync>(src: &mut Vec<T>, idx: &[u32], scratch: &mut Vec<T>) {
    scratch.clear();
    scratch.par_extend(
        idx.par_iter()
            .with_min_len(MIN_LEN * 4)
            .map(|&i| src[i as usize]),
    );
    std::mem::swap(src, scratch);
}
