//! The simulation as the player runs it: the engine of `pellet-sim`
//! (re-exported whole, so `sim::Simulation`, `sim::setup` and the rest read
//! as before), plus what only an application does with it: baking bodies'
//! meshes through a cache ([`bodies`], on `bake`) and headless runs with
//! statistics, snapshots and frames ([`run`]).

pub use pellet_sim::*;

#[cfg(feature = "bake")]
pub mod bodies;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod run;
