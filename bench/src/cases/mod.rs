//! Benchmark groups. Each returns rows of Pellet against a peer on the same
//! work, measured in the same run.

pub mod bake_mesh;
pub mod bodies;
pub mod column;
pub mod formats;
pub mod neighbour_model;
pub mod nns;
pub mod peers;
pub mod ranks;
pub mod render;
pub mod serving;
pub mod sim;
pub mod web;
