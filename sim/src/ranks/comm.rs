//! [`Comm`]: what the ranks of one run say to each other (MPI in the player,
//! in-process threads in tests), and the typed framing of their messages.

use std::borrow::Cow;

use bytemuck::Pod;
use thiserror::Error;

/// Why a collective did not complete.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CommError {
    /// Another rank stopped taking part (it failed, exited or was killed).
    #[error("rank {rank} stopped answering during {during}")]
    PeerLost {
        /// The rank that stopped, when known.
        rank: usize,
        /// The collective that was waiting, e.g. `the halo exchange`.
        during: &'static str,
    },
    /// No rank answered in time.
    #[error("no answer from every rank within {seconds} s during {during}")]
    Timeout {
        /// How long this rank waited.
        seconds: u64,
        /// The collective that was waiting.
        during: &'static str,
    },
    /// A message that does not decode as the protocol says.
    #[error("a message from rank {rank} is malformed: {problem}")]
    Malformed {
        /// The sender.
        rank: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// The transport itself failed.
    #[error("the transport failed: {0}")]
    Transport(String),
}

/// The collectives the ranked engine needs. Every rank calls the same ones
/// in the same order (the engine's step is the same on every rank).
pub trait Comm: std::fmt::Debug {
    /// This rank, `0..size`.
    fn rank(&self) -> usize;
    /// How many ranks there are.
    fn size(&self) -> usize;
    /// Sends `send[r]` to rank `r` (one buffer per rank, empty for none) and
    /// returns what every rank sent to this one, by sender.
    fn all_to_all(
        &self,
        send: Vec<Vec<u8>>,
        during: &'static str,
    ) -> Result<Vec<Vec<u8>>, CommError>;
    /// Every rank's `send`, by rank.
    fn all_gather(&self, send: Vec<u8>, during: &'static str) -> Result<Vec<Vec<u8>>, CommError>;

    /// Sends each `(rank, bytes)` of `send` to its rank and fills each
    /// `(rank, buffer)` of `recv` with what that rank sends this one here
    /// (the buffer resized to fit): the halo exchange between neighbours.
    /// Every rank calls it at the same point of the step, and each rank
    /// named in `recv` names this rank in its `send`. The default goes
    /// through [`Comm::all_to_all`]; MPI sends point to point, without
    /// a collective.
    fn neighbour_exchange(
        &self,
        send: &[(usize, &[u8])],
        recv: &mut [(usize, Vec<u8>)],
        during: &'static str,
    ) -> Result<(), CommError> {
        let mut out = vec![Vec::new(); self.size()];
        for &(r, bytes) in send {
            out[r] = bytes.to_vec();
        }
        let mut got = self.all_to_all(out, during)?;
        for (r, buffer) in recv.iter_mut() {
            *buffer = std::mem::take(&mut got[*r]);
        }
        Ok(())
    }
}

/// Every rank's `value`, by rank.
pub fn gather_values<T: Pod>(
    comm: &dyn Comm,
    value: T,
    during: &'static str,
) -> Result<Vec<T>, CommError> {
    let all = comm.all_gather(bytemuck::bytes_of(&value).to_vec(), during)?;
    all.iter()
        .enumerate()
        .map(|(rank, b)| {
            (b.len() == size_of::<T>())
                .then(|| bytemuck::pod_read_unaligned(b))
                .ok_or_else(|| CommError::Malformed {
                    rank,
                    problem: format!("{} bytes where {} were expected", b.len(), size_of::<T>()),
                })
        })
        .collect()
}

/// `bytes` from `rank` as records of `T` (`what` names them in the error):
/// borrowed without a copy when the buffer is aligned for `T`, copied once
/// when it is not.
pub fn records<'a, T: Pod>(
    rank: usize,
    bytes: &'a [u8],
    what: &str,
) -> Result<Cow<'a, [T]>, CommError> {
    if !bytes.len().is_multiple_of(size_of::<T>()) {
        return Err(CommError::Malformed {
            rank,
            problem: format!("{what} of {} bytes", bytes.len()),
        });
    }
    Ok(match bytemuck::try_cast_slice(bytes) {
        Ok(borrowed) => Cow::Borrowed(borrowed),
        Err(_) => Cow::Owned(bytemuck::pod_collect_to_vec(bytes)),
    })
}

/// A message of typed sections, each a length and its records.
#[derive(Debug, Default)]
pub struct Message {
    bytes: Vec<u8>,
}

impl Message {
    /// Appends a section.
    pub fn push<T: Pod>(&mut self, records: &[T]) -> &mut Self {
        self.bytes
            .extend_from_slice(&(records.len() as u64).to_le_bytes());
        self.bytes.extend_from_slice(bytemuck::cast_slice(records));
        self
    }

    /// The bytes to send.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Reads the sections of a [`Message`] from `rank`, checking every length.
#[derive(Debug)]
pub struct Reader<'a> {
    rank: usize,
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader of `bytes` sent by `rank`.
    pub fn new(rank: usize, bytes: &'a [u8]) -> Self {
        Self { rank, rest: bytes }
    }

    fn malformed(&self, problem: String) -> CommError {
        CommError::Malformed {
            rank: self.rank,
            problem,
        }
    }

    /// The next section, as records of `T`.
    pub fn section<T: Pod>(&mut self) -> Result<Vec<T>, CommError> {
        if self.rest.len() < 8 {
            return Err(self.malformed(format!(
                "{} bytes left where a section length was expected",
                self.rest.len()
            )));
        }
        let (len, rest) = self.rest.split_at(8);
        let count = u64::from_le_bytes(len.try_into().unwrap_or([0; 8]));
        let bytes = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(size_of::<T>()))
            .filter(|&b| b <= rest.len())
            .ok_or_else(|| {
                self.malformed(format!(
                    "a section of {count} records of {} bytes with {} bytes left",
                    size_of::<T>(),
                    rest.len()
                ))
            })?;
        let (body, rest) = rest.split_at(bytes);
        self.rest = rest;
        Ok(bytemuck::pod_collect_to_vec(body))
    }

    /// Checks that nothing follows the last section.
    pub fn finish(self) -> Result<(), CommError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.malformed(format!("{} bytes after the last section", self.rest.len())))
        }
    }
}

/// A [`Comm`] that adds up the wall time its collectives take on this rank
/// (sending, receiving and waiting for the slowest rank): the share of a
/// step a rank spends talking rather than computing, as LIGGGHTS' "Comm"
/// line.
#[derive(Debug)]
pub struct TimedComm {
    inner: Box<dyn Comm>,
    seconds: std::cell::Cell<f64>,
}

impl TimedComm {
    /// `inner`, timed from zero.
    pub fn new(inner: Box<dyn Comm>) -> Self {
        Self {
            inner,
            seconds: std::cell::Cell::new(0.0),
        }
    }

    /// Seconds spent in collectives since the start.
    pub fn seconds(&self) -> f64 {
        self.seconds.get()
    }

    fn timed<T>(&self, f: impl FnOnce(&dyn Comm) -> T) -> T {
        let start = std::time::Instant::now();
        let out = f(&*self.inner);
        self.seconds
            .set(self.seconds.get() + start.elapsed().as_secs_f64());
        out
    }
}

impl Comm for TimedComm {
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    fn size(&self) -> usize {
        self.inner.size()
    }

    fn all_to_all(
        &self,
        send: Vec<Vec<u8>>,
        during: &'static str,
    ) -> Result<Vec<Vec<u8>>, CommError> {
        self.timed(|c| c.all_to_all(send, during))
    }

    fn all_gather(&self, send: Vec<u8>, during: &'static str) -> Result<Vec<Vec<u8>>, CommError> {
        self.timed(|c| c.all_gather(send, during))
    }

    fn neighbour_exchange(
        &self,
        send: &[(usize, &[u8])],
        recv: &mut [(usize, Vec<u8>)],
        during: &'static str,
    ) -> Result<(), CommError> {
        self.timed(|c| c.neighbour_exchange(send, recv, during))
    }
}
