//! A card's life: the stages it goes through ([`stage`]), what the machine needs from the world
//! ([`ports`]), the bring-up itself ([`machine`]) and why a stage failed ([`failure`]).

pub mod failure;
pub mod journal;
pub mod machine;
pub mod ports;
pub mod stage;
#[cfg(test)]
mod tests;

pub use machine::Machine;
pub use stage::{CardStatus, Design, Stage};
