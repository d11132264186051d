//! [`ThreadComm`]: ranks as threads of one process, for tests and for
//! machines without MPI. Each collective is a barrier on a shared board; a
//! rank that stops (returns, fails or panics) before the others marks
//! itself lost, and the others get [`CommError::PeerLost`] instead of
//! waiting forever.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::comm::{Comm, CommError};

/// How long a rank waits for the others in one collective by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug)]
struct Board {
    /// Completed barriers.
    generation: u64,
    /// Ranks at the current barrier.
    arrived: usize,
    /// `slots[src][dst]`: what `src` sends `dst` in the current collective.
    slots: Vec<Vec<Vec<u8>>>,
    /// A rank that stopped taking part.
    lost: Option<usize>,
}

#[derive(Debug)]
struct Shared {
    board: Mutex<Board>,
    changed: Condvar,
    size: usize,
    timeout: Duration,
}

/// One rank of an in-process group (see [`ThreadComm::group`]).
#[derive(Debug)]
pub struct ThreadComm {
    rank: usize,
    shared: Arc<Shared>,
}

impl ThreadComm {
    /// `size` ranks that talk to each other, one per thread that will run them.
    pub fn group(size: usize) -> Vec<ThreadComm> {
        Self::group_with_timeout(size, DEFAULT_TIMEOUT)
    }

    /// [`ThreadComm::group`] waiting at most `timeout` in one collective.
    pub fn group_with_timeout(size: usize, timeout: Duration) -> Vec<ThreadComm> {
        let shared = Arc::new(Shared {
            board: Mutex::new(Board {
                generation: 0,
                arrived: 0,
                slots: vec![vec![Vec::new(); size]; size],
                lost: None,
            }),
            changed: Condvar::new(),
            size,
            timeout,
        });
        (0..size)
            .map(|rank| ThreadComm {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Board> {
        // A rank that panicked while holding the lock has marked itself
        // lost; the board is still consistent for the others to see it.
        self.shared
            .board
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until every rank has arrived at the barrier `board` is at.
    fn barrier<'a>(
        &'a self,
        mut board: MutexGuard<'a, Board>,
        during: &'static str,
    ) -> Result<MutexGuard<'a, Board>, CommError> {
        let generation = board.generation;
        board.arrived += 1;
        if board.arrived == self.shared.size {
            board.arrived = 0;
            board.generation += 1;
            self.shared.changed.notify_all();
            return Ok(board);
        }
        let start = Instant::now();
        while board.generation == generation {
            if let Some(rank) = board.lost {
                return Err(CommError::PeerLost { rank, during });
            }
            let left = self.shared.timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(CommError::Timeout {
                    seconds: self.shared.timeout.as_secs(),
                    during,
                });
            }
            board = self
                .shared
                .changed
                .wait_timeout(board, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        Ok(board)
    }

    /// Deposits `send`, waits for all, takes this rank's column, waits for
    /// all again (so the next collective cannot overwrite unread slots).
    fn exchange(
        &self,
        send: Vec<Vec<u8>>,
        during: &'static str,
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let size = self.shared.size;
        if send.len() != size {
            return Err(CommError::Transport(format!(
                "{} buffers for {size} ranks",
                send.len()
            )));
        }
        let mut board = self.lock();
        for (dst, bytes) in send.into_iter().enumerate() {
            board.slots[self.rank][dst] = bytes;
        }
        let mut board = self.barrier(board, during)?;
        let out: Vec<Vec<u8>> = (0..size)
            .map(|src| std::mem::take(&mut board.slots[src][self.rank]))
            .collect();
        drop(self.barrier(board, during)?);
        Ok(out)
    }
}

impl Drop for ThreadComm {
    fn drop(&mut self) {
        // A rank that is done, or unwinding, takes no further part: ranks
        // still waiting for it are told, not left hanging. (A rank that
        // finished every collective is never waited for.)
        let mut board = self.lock();
        board.lost.get_or_insert(self.rank);
        self.shared.changed.notify_all();
    }
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn all_to_all(
        &self,
        send: Vec<Vec<u8>>,
        during: &'static str,
    ) -> Result<Vec<Vec<u8>>, CommError> {
        self.exchange(send, during)
    }

    fn all_gather(&self, send: Vec<u8>, during: &'static str) -> Result<Vec<Vec<u8>>, CommError> {
        self.exchange(vec![send; self.shared.size], during)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_exchange_and_a_lost_rank_is_reported() {
        let comms = ThreadComm::group(3);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|c| {
                    s.spawn(move || {
                        let r = c.rank() as u8;
                        let got = c
                            .all_to_all((0..3).map(|d| vec![r, d]).collect(), "a test")
                            .expect("exchange");
                        for (src, bytes) in got.iter().enumerate() {
                            assert_eq!(bytes, &vec![src as u8, r]);
                        }
                        if r == 1 {
                            return None; // rank 1 leaves early
                        }
                        Some(c.all_gather(vec![r], "the second round"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("join"))
                .collect()
        });
        for (rank, r) in results.into_iter().enumerate() {
            match r {
                None => assert_eq!(rank, 1),
                Some(Err(CommError::PeerLost { rank: 1, .. })) => {}
                Some(other) => panic!("rank {rank}: {other:?}"),
            }
        }
    }

    #[test]
    fn neighbours_exchange_their_halos_and_the_time_is_counted() {
        use crate::ranks::comm::TimedComm;
        let comms = ThreadComm::group(3);
        std::thread::scope(|s| {
            for c in comms {
                s.spawn(move || {
                    let c = TimedComm::new(Box::new(c));
                    let r = c.rank();
                    // A chain: each rank sends its neighbours r + 10 * to
                    // bytes, so a message shows who sent it to whom.
                    let to: Vec<usize> = [r.checked_sub(1), (r + 1 < 3).then_some(r + 1)]
                        .into_iter()
                        .flatten()
                        .collect();
                    let bytes: Vec<Vec<u8>> = to
                        .iter()
                        .map(|&t| vec![(r + 10 * t) as u8; t + 1])
                        .collect();
                    let send: Vec<(usize, &[u8])> =
                        to.iter().zip(&bytes).map(|(&t, b)| (t, &b[..])).collect();
                    let mut recv: Vec<(usize, Vec<u8>)> =
                        to.iter().map(|&t| (t, vec![9; 7])).collect();
                    c.neighbour_exchange(&send, &mut recv, "a test")
                        .expect("exchange");
                    for (from, got) in &recv {
                        assert_eq!(
                            got,
                            &vec![(from + 10 * r) as u8; r + 1],
                            "rank {r} from {from}"
                        );
                    }
                    assert!(c.seconds() > 0.0);
                });
            }
        });
    }
}
