//! One module per `bake` subcommand: each turns its parsed arguments into a
//! call of the library and prints through `pellet_bake::report`.

pub mod inspect;
pub mod mesh;
pub mod scene;
pub mod table;
pub mod validate_table;
pub mod watch;
