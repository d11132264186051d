//! A build over every rank: the plan from the global layer counts, every
//! particle with its contact history to its new owner and readers, then
//! each rank's lists over its particles and halos.

use super::comm::{self, CommError, Message, Reader, gather_values};
use super::records::{
    HistoryRecord, ParticleRecord, ROLL, SPRING, WALL_ROLL, WALL_SPRING, state_of,
};
use super::{Comm, Plan, RankedSim};
use crate::SimError;
use crate::pairlist::{Cuts, History, RankSpan, key, slabs_of};

impl RankedSim {
    /// A build over every rank: a new plan from the global layer counts,
    /// every particle and its history to its new owner and readers, then
    /// each rank's lists over its particles and halos.
    pub(super) fn rebuild(&mut self) -> Result<(), SimError> {
        let size = self.comm.size();
        let own = self.own();
        // History of the rows this rank evaluates: its own and the previous
        // rank's last layer (both ranks hold a pair across the cut).
        let history = self.sim.old_history(0..own.end);
        self.sim.wrap_free_particles(own.clone());
        let s = &self.sim.state;
        let list = &self.sim.list;
        let layer_of: Vec<u64> = own
            .clone()
            .map(|i| key(list.coords(&s.pos[i])) >> 42)
            .collect();

        // The global count of particles per layer, and the plan.
        let mut histogram: Vec<(u64, u64)> = Vec::new();
        let mut sorted = layer_of.clone();
        sorted.sort_unstable();
        for l in sorted {
            match histogram.last_mut() {
                Some((last, c)) if *last == l => *c += 1,
                _ => histogram.push((l, 1)),
            }
        }
        let flat: Vec<[u64; 2]> = histogram.iter().map(|&(l, c)| [l, c]).collect();
        let me = self.comm.rank();
        self.stats.bytes_sent += (flat.len() * 16 * (size - 1)) as u64;
        let all = self
            .comm
            .all_gather(bytemuck::cast_slice(&flat).to_vec(), "the layer count")?;
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (r, bytes) in all.iter().enumerate() {
            let v = comm::records::<[u64; 2]>(r, bytes, "a layer count")?;
            merged.extend(v.iter().map(|&[l, c]| (l, c)));
        }
        let plan = Plan::new(merged, size);

        // Every owned particle to its owner and readers; history to the
        // ranks of each of its particles this rank owns.
        let mut particles: Vec<Vec<ParticleRecord>> = vec![Vec::new(); size];
        let mut dest_of: Vec<[usize; 3]> = Vec::with_capacity(own.len());
        for (k, i) in own.clone().enumerate() {
            let li = plan.layer_index(layer_of[k]).unwrap_or(0);
            let d = plan.destinations(li);
            let rec = ParticleRecord::of(s, i);
            let mut set = [usize::MAX; 3];
            for (slot, r) in d.ranks().enumerate() {
                particles[r].push(rec);
                set[slot] = r;
            }
            dest_of.push(set);
        }
        let local_owned = |id: u32| -> Option<usize> {
            let k = *self.sim.inv_index.get(id as usize)? as usize;
            (own.contains(&k) && s.meta[k][0] == id).then(|| k - own.start)
        };
        let mut hist: Vec<Vec<HistoryRecord>> = vec![Vec::new(); size];
        let mut route = |a: u32, b: u32, kind: u32, v: [f32; 3], both: bool| {
            let mut ranks: Vec<usize> = Vec::with_capacity(6);
            let ends: &[u32] = if both { &[a, b] } else { &[a] };
            for &x in ends {
                if let Some(k) = local_owned(x) {
                    ranks.extend(dest_of[k].iter().copied().filter(|&r| r != usize::MAX));
                }
            }
            if !both {
                ranks.truncate(1); // a wall contact: the particle's owner only
            }
            ranks.sort_unstable();
            ranks.dedup();
            for r in ranks {
                hist[r].push(HistoryRecord {
                    a,
                    b,
                    kind,
                    pad: 0,
                    value: [v[0], v[1], v[2], 0.0],
                });
            }
        };
        for &(a, b, v) in &history.springs {
            route(a, b, SPRING, v, true);
        }
        for &(a, b, v) in &history.rolls {
            route(a, b, ROLL, v, true);
        }
        for &(a, w, v) in &history.wall_springs {
            route(a, w, WALL_SPRING, v, false);
        }
        for &(a, w, v) in &history.wall_rolls {
            route(a, w, WALL_ROLL, v, false);
        }
        let send: Vec<Vec<u8>> = particles
            .iter()
            .zip(&hist)
            .map(|(p, h)| {
                let mut m = Message::default();
                m.push(p).push(h);
                m.into_bytes()
            })
            .collect();
        let got = self.all_to_all(send, "the rebuild's migration")?;
        let mut records: Vec<ParticleRecord> = Vec::new();
        let mut carried = History::default();
        for (r, bytes) in got.iter().enumerate() {
            let mut reader = Reader::new(r, bytes);
            records.extend(reader.section::<ParticleRecord>()?);
            for h in reader.section::<HistoryRecord>()? {
                let entry = (h.a, h.b, [h.value[0], h.value[1], h.value[2]]);
                match h.kind {
                    SPRING => carried.springs.push(entry),
                    ROLL => carried.rolls.push(entry),
                    WALL_SPRING => carried.wall_springs.push(entry),
                    WALL_ROLL => carried.wall_rolls.push(entry),
                    other => {
                        return Err(CommError::Malformed {
                            rank: r,
                            problem: format!("history of kind {other}"),
                        }
                        .into());
                    }
                }
            }
            reader.finish()?;
        }
        for rec in &records {
            if rec.meta[0] as usize >= self.sim.id_count {
                return Err(CommError::Malformed {
                    rank: me,
                    problem: format!("particle id {} of {}", rec.meta[0], self.sim.id_count),
                }
                .into());
            }
        }

        // This rank's particles sorted as one rank sorts them, cut as the
        // plan says: the previous rank's last layer, the owned slabs, the
        // next rank's first layer.
        self.sim.state = state_of(&records);
        let cells = self.sim.sort_by_cell();
        let n = self.sim.state.len();
        let mut layer_index = vec![0usize; n];
        for c in 0..cells.key.len() {
            let li = plan.layer_index(cells.key[c] >> 42).unwrap_or(0);
            for i in cells.start[c] as usize..cells.start[c + 1] as usize {
                layer_index[i] = li;
            }
        }
        let first_at = |li: usize| layer_index.partition_point(|&x| x < li);
        let slabs = plan.rank_slabs[me].clone();
        let mut slab_start = vec![0u32];
        let (own, first_slab) = if slabs.is_empty() {
            (0..0, 0)
        } else {
            let a = first_at(plan.slab_layer[slabs.start]);
            let b = first_at(plan.slab_layer[slabs.end]);
            if a > 0 {
                slab_start.push(a as u32);
            }
            for k in slabs.start + 1..slabs.end {
                slab_start.push(first_at(plan.slab_layer[k]) as u32);
            }
            if b < n && b > a {
                slab_start.push(b as u32);
            }
            let first = if a > 0 { slabs.start - 1 } else { slabs.start };
            (a..b, first)
        };
        slab_start.push(n as u32);
        slab_start.dedup();
        if slab_start.len() == 1 {
            slab_start.push(n as u32);
        }
        let layer_start = slabs_of(&cells, n).layer_start;
        self.previous = plan.previous(me).filter(|_| !slabs.is_empty());
        self.next = plan.next(me).filter(|_| !slabs.is_empty());
        let own_layers = plan.rank_layers(me);
        self.send_previous = if self.previous.is_some() {
            own.start..first_at(own_layers.start + 1).min(own.end)
        } else {
            0..0
        };
        self.send_next = if self.next.is_some() && !own.is_empty() {
            first_at(own_layers.end - 1).max(own.start)..own.end
        } else {
            0..0
        };
        self.sim.span = Some(RankSpan {
            own: own.clone(),
            first_slab,
        });
        self.sim.build_lists(
            &carried,
            &cells,
            Cuts {
                slab_start,
                layer_start,
            },
            own.end,
        );
        self.stats.owned = (0..size).map(|r| plan.rank_particles(r)).collect();
        self.stats.imbalance = plan.imbalance();
        let halo = (n - own.len()) as u64;
        self.stats.halo = gather_values(&self.comm, halo, "the rebuild's statistics")?;
        self.plan = plan;
        Ok(())
    }
}
