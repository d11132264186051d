//! [`MpiComm`]: the ranked engine's collectives on MPI (the `mpi` crate on
//! the system's Open MPI), for `mpirun -np N player run SCENE --headless`.

use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use pellet_sim::ranks::{Comm, CommError};

/// The tag of the halo exchange's point-to-point messages (collectives
/// travel apart from them, on the communicator's own context).
const HALO_TAG: i32 = 17;

/// MPI's world communicator as a [`Comm`].
pub struct MpiComm {
    world: SimpleCommunicator,
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MpiComm(rank {} of {})",
            self.world.rank(),
            self.world.size()
        )
    }
}

impl MpiComm {
    /// The world of an initialised MPI universe.
    pub fn new(world: SimpleCommunicator) -> Self {
        Self { world }
    }
}

fn counts(lens: impl Iterator<Item = usize>) -> Result<(Vec<i32>, Vec<i32>), CommError> {
    let counts: Vec<i32> = lens
        .map(|l| {
            i32::try_from(l).map_err(|_| {
                CommError::Transport(format!("a message of {l} bytes is over MPI's 2 GiB count"))
            })
        })
        .collect::<Result<_, _>>()?;
    let mut displs = Vec::with_capacity(counts.len());
    let mut at = 0i64;
    for &c in &counts {
        displs.push(
            i32::try_from(at)
                .map_err(|_| CommError::Transport("messages over 2 GiB in all".into()))?,
        );
        at += i64::from(c);
    }
    Ok((counts, displs))
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn all_to_all(
        &self,
        send: Vec<Vec<u8>>,
        _during: &'static str,
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let size = self.size();
        let lens: Vec<i32> = send.iter().map(|b| b.len() as i32).collect();
        let mut recv_lens = vec![0i32; size];
        self.world.all_to_all_into(&lens[..], &mut recv_lens[..]);
        let (sc, sd) = counts(send.iter().map(Vec::len))?;
        // One spare byte in every buffer: an empty Vec's dangling pointer
        // is 0x1, which Open MPI reads as MPI_IN_PLACE.
        let mut flat: Vec<u8> = send.concat();
        flat.push(0);
        let (rc, rd) = counts(recv_lens.iter().map(|&l| l.max(0) as usize))?;
        let mut recv = vec![0u8; rc.iter().map(|&c| c as usize).sum::<usize>() + 1];
        self.world.all_to_all_varcount_into(
            &Partition::new(&flat[..], &sc[..], &sd[..]),
            &mut PartitionMut::new(&mut recv[..], &rc[..], &rd[..]),
        );
        Ok((0..size)
            .map(|r| recv[rd[r] as usize..(rd[r] + rc[r]) as usize].to_vec())
            .collect())
    }

    fn neighbour_exchange(
        &self,
        send: &[(usize, &[u8])],
        recv: &mut [(usize, Vec<u8>)],
        _during: &'static str,
    ) -> Result<(), CommError> {
        let size = self.size();
        let mut ranks = send
            .iter()
            .map(|&(r, _)| r)
            .chain(recv.iter().map(|&(r, _)| r));
        if let Some(r) = ranks.find(|&r| r >= size) {
            return Err(CommError::Transport(format!("no rank {r} of {size}")));
        }
        mpi::request::scope(|scope| {
            // Every send posted first, then each message probed (its size
            // checked by the caller) and received into its buffer.
            let sends: Vec<_> = send
                .iter()
                .map(|&(r, bytes)| {
                    self.world
                        .process_at_rank(r as i32)
                        .immediate_send_with_tag(scope, bytes, HALO_TAG)
                })
                .collect();
            for (r, buffer) in recv.iter_mut() {
                let (message, status) = self
                    .world
                    .process_at_rank(*r as i32)
                    .matched_probe_with_tag(HALO_TAG);
                let count = status.count(u8::equivalent_datatype()).max(0) as usize;
                buffer.clear();
                buffer.resize(count, 0);
                message.matched_receive_into(&mut buffer[..]);
            }
            for request in sends {
                request.wait();
            }
        });
        Ok(())
    }

    fn all_gather(&self, send: Vec<u8>, _during: &'static str) -> Result<Vec<Vec<u8>>, CommError> {
        let size = self.size();
        let len = send.len() as i32;
        let mut lens = vec![0i32; size];
        self.world.all_gather_into(&len, &mut lens[..]);
        let (rc, rd) = counts(lens.iter().map(|&l| l.max(0) as usize))?;
        let mut recv = vec![0u8; rc.iter().map(|&c| c as usize).sum::<usize>() + 1];
        let mut send = send;
        send.push(0);
        self.world.all_gather_varcount_into(
            &send[..send.len() - 1],
            &mut PartitionMut::new(&mut recv[..], &rc[..], &rd[..]),
        );
        Ok((0..size)
            .map(|r| recv[rd[r] as usize..(rd[r] + rc[r]) as usize].to_vec())
            .collect())
    }
}
