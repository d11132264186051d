//! Rigid bodies across ranks: each body's particle shares go to the rank
//! that owns the body, which sums them by id in the one-rank order; the
//! sums go to every rank.

use super::comm::{self, CommError};
use super::records::{BodyShare, BodySum};
use super::{Comm, RankedSim};
use crate::SimError;
use crate::setup::FREE;
use crate::stages::bodies::body_reduce;

impl RankedSim {
    /// Every body's force and torque: each rank sends its body particles'
    /// shares to the body's owner (body `b` is rank `b mod ranks`'), which
    /// sums them by id as one rank does; every rank gets every sum.
    pub(super) fn body_reduce(&mut self) -> Result<(), SimError> {
        let size = self.comm.size();
        let me = self.comm.rank();
        let own = self.own();
        let s = &self.sim.state;
        let mut shares: Vec<Vec<BodyShare>> = vec![Vec::new(); size];
        for i in own {
            let m = s.meta[i];
            if m[2] == FREE {
                continue;
            }
            shares[m[2] as usize % size].push(BodyShare {
                id: m[0],
                body: m[2],
                pad: [0; 2],
                pos: s.pos[i],
                force: s.force[i],
                torque: s.torque[i],
            });
        }
        let send: Vec<Vec<u8>> = shares
            .iter()
            .map(|v| bytemuck::cast_slice(v).to_vec())
            .collect();
        let got = self.all_to_all(send, "the body sums")?;
        let bodies = &self.sim.bodies;
        // Per owned body, its particles' records in id order.
        let mut per_body: Vec<Vec<Option<BodyShare>>> = bodies
            .iter()
            .enumerate()
            .map(|(b, body)| {
                if b % size == me {
                    vec![None; body.range[1] as usize]
                } else {
                    Vec::new()
                }
            })
            .collect();
        for (r, bytes) in got.iter().enumerate() {
            for &sh in comm::records::<BodyShare>(r, bytes, "body shares")?.iter() {
                let body = bodies.get(sh.body as usize);
                let slot = body.and_then(|b| {
                    let k = sh.id.checked_sub(b.range[0])? as usize;
                    per_body.get_mut(sh.body as usize)?.get_mut(k)
                });
                match slot {
                    Some(slot) => *slot = Some(sh),
                    None => {
                        return Err(CommError::Malformed {
                            rank: r,
                            problem: format!("a share of particle {} for body {}", sh.id, sh.body),
                        }
                        .into());
                    }
                }
            }
        }
        let mut sums: Vec<BodySum> = Vec::new();
        for (b, parts) in per_body.iter().enumerate() {
            if b % size != me {
                continue;
            }
            let count = parts.len();
            if parts.iter().any(Option::is_none) {
                return Err(CommError::Transport(format!(
                    "body {b} got {} of its {count} particles' shares",
                    parts.iter().filter(|p| p.is_some()).count()
                ))
                .into());
            }
            let pick = |f: fn(&BodyShare) -> [f32; 4]| -> Vec<[f32; 4]> {
                parts.iter().flatten().map(f).collect()
            };
            let (pos, force, torque) = (pick(|p| p.pos), pick(|p| p.force), pick(|p| p.torque));
            let inv: Vec<u32> = (0..count as u32).collect();
            let mut local = bodies[b];
            local.range[0] = 0;
            let (f, t) = body_reduce(&local, &inv, &pos, &force, &torque);
            sums.push(BodySum {
                body: b as u32,
                pad: [0; 3],
                force: f,
                torque: t,
            });
        }
        self.stats.bytes_sent += (sums.len() * size_of::<BodySum>() * (size - 1)) as u64;
        let all = self
            .comm
            .all_gather(bytemuck::cast_slice(&sums).to_vec(), "the body sums")?;
        for (r, bytes) in all.iter().enumerate() {
            for &sum in comm::records::<BodySum>(r, bytes, "body sums")?.iter() {
                let b = sum.body as usize;
                if b >= self.sim.bodies.len() || b % size != r {
                    return Err(CommError::Malformed {
                        rank: r,
                        problem: format!("a sum for body {b}"),
                    }
                    .into());
                }
                self.sim.body_force[b] = sum.force;
                self.sim.body_torque[b] = sum.torque;
            }
        }
        Ok(())
    }
}
