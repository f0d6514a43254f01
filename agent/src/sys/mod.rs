//! The real world behind the card machine's ports: PCI sysfs, the privileged helper, device nodes.

pub mod helper;
pub mod node;
pub mod pci;
pub mod privileged;
pub mod request;
