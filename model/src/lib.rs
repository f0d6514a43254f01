//! Software model of the PicoEVB FPGA design (XDMA + 64 KiB BRAM + LEDs) as gdr's driver sees it, served to
//! QEMU over vfio-user so the real kernel driver can be tested without hardware.
//!
//! The device logic ([`Device`]) is independent of vfio-user: it reaches guest memory through
//! [`GuestMemory`] and raises interrupts through [`InterruptSink`], so tests drive it directly with
//! [`FakeGuestMemory`] and [`RecordingSink`]. [`vfio`] adapts it to the `vfio_user` server; [`control`] is
//! the test harness's side channel.

pub mod bram;
pub mod cli;
pub mod config_space;
pub mod control;
pub mod device;
pub mod faults;
pub mod gpio;
pub mod guest_memory;
pub mod host_addrs;
pub mod idblock;
pub mod image;
pub mod interrupts;
pub mod mapped_memory;
pub mod options;
pub mod program;
pub mod stats;
pub mod stream;
pub mod timing;
pub mod user_bar;
pub mod vfio;
pub mod xdma;

pub use device::{Device, Snapshot};
pub use faults::FaultKind;
pub use guest_memory::{FakeGuestMemory, GuestMemory, Unmapped};
pub use interrupts::{InterruptSink, IrqLine, RecordingSink};
pub use options::{Design, DeviceOptions};
pub use xdma::transfer::corrupt_mask;
