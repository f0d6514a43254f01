//! Drives the PicoEVB model through its register interface the way a driver does (no VM).

mod common;

mod bar0;
mod bus_master;
mod control;
mod dma;
mod faults;
mod irq;
mod pci;
mod program;
mod stream;
mod timing;
mod vfio;
