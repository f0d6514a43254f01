//! PCI configuration space of the PicoEVB function (vfio-user region 7).
//!
//! QEMU forwards every guest config access, BAR sizing writes included, so the model owns the whole space:
//! identity, command/status, BARs with size masks, and the capability list (PM, MSI, PCIe). Accesses are
//! handled bytewise because guests do 1-, 2- and 4-byte accesses at any alignment.

use picoevb_regs::pci;

/// Bytes of config space: a PCIe function has 4 KiB (extended space reads 0: no extended capabilities).
pub const SIZE: usize = 4096;

/// Command register offset.
pub const COMMAND: usize = 0x04;
/// Command: memory space enable.
pub const COMMAND_MEMORY: u16 = 1 << 1;
/// Command: bus master enable.
pub const COMMAND_MASTER: u16 = 1 << 2;
/// Command: INTx disable.
pub const COMMAND_INTX_DISABLE: u16 = 1 << 10;
/// Status register offset.
pub const STATUS: usize = 0x06;
/// Status: INTx is being asserted (RO, reflects the function's interrupt request).
pub const STATUS_INTERRUPT: u16 = 1 << 3;
/// Status: capability list present.
pub const STATUS_CAP_LIST: u16 = 1 << 4;
/// Offset of BAR0.
pub const BAR0: usize = 0x10;
/// Capabilities pointer.
pub const CAP_PTR: usize = 0x34;
/// Interrupt pin register (1 = INTA).
pub const INTERRUPT_PIN: usize = 0x3d;

/// Power management capability offset (where the 7-series PCIe core puts it).
pub const PM_CAP: usize = 0x40;
/// MSI capability offset.
pub const MSI_CAP: usize = 0x48;
/// PCI Express capability offset.
pub const PCIE_CAP: usize = 0x60;

const CAP_ID_PM: u8 = 0x01;
const CAP_ID_MSI: u8 = 0x05;
const CAP_ID_EXP: u8 = 0x10;

/// MSI message control: 64-bit address capable.
pub const MSI_CTRL_64BIT: u16 = 1 << 7;
/// MSI message control: enable.
pub const MSI_CTRL_ENABLE: u16 = 1 << 0;

/// PCIe device control register (in the PCIe capability).
const PCIE_DEVCTL: usize = PCIE_CAP + 0x08;

/// The config space bytes plus, per byte, which bits software may write and which are write-1-to-clear.
#[derive(Clone)]
pub struct ConfigSpace {
    data: Box<[u8; SIZE]>,
    writable: Box<[u8; SIZE]>,
    w1c: Box<[u8; SIZE]>,
}

impl Default for ConfigSpace {
    fn default() -> Self {
        Self::picoevb()
    }
}

impl ConfigSpace {
    /// The config space of the PicoEVB design at reset.
    pub fn picoevb() -> Self {
        let mut c = ConfigSpace {
            data: Box::new([0; SIZE]),
            writable: Box::new([0; SIZE]),
            w1c: Box::new([0; SIZE]),
        };
        c.set16(0x00, pci::VENDOR_ID);
        c.set16(0x02, pci::DEVICE_ID);
        // No I/O BARs, so I/O enable stays 0. Memory, bus master, parity, SERR, INTx disable are RW.
        c.writable16(
            COMMAND,
            COMMAND_MEMORY | COMMAND_MASTER | 1 << 6 | 1 << 8 | COMMAND_INTX_DISABLE,
        );
        c.set16(STATUS, STATUS_CAP_LIST);
        // Error bits of the status register: master data parity (8), target/master aborts, SERR, parity (11..15).
        c.w1c16(STATUS, 0xf900);
        c.data[0x08] = 0; // revision
        let class = pci::CLASS_CODE.to_le_bytes();
        c.data[0x09..0x0c].copy_from_slice(&class[..3]);
        c.data[0x0c] = 0; // cache line size: RW storage
        c.writable[0x0c] = 0xff;
        c.data[0x0e] = 0; // header type 0, single function
        c.bar(pci::BAR_USER as usize, pci::BAR_USER_SIZE);
        c.bar(pci::BAR_DMA as usize, pci::BAR_DMA_SIZE);
        c.set16(0x2c, pci::SUBSYSTEM_VENDOR_ID);
        c.set16(0x2e, pci::SUBSYSTEM_ID_PICOEVB);
        c.data[CAP_PTR] = PM_CAP as u8;
        c.writable[0x3c] = 0xff; // interrupt line: scratch for the OS
        c.data[INTERRUPT_PIN] = 1; // INTA

        // Power management, version 3, D0/D3hot; PMCSR power state RW, No_Soft_Reset = 1.
        c.data[PM_CAP] = CAP_ID_PM;
        c.data[PM_CAP + 1] = MSI_CAP as u8;
        c.set16(PM_CAP + 2, 0x0003);
        c.set16(PM_CAP + 4, 0x0008);
        c.writable16(PM_CAP + 4, 0x0003);

        // MSI: 64-bit, one vector (the design's "1_vector"), no per-vector masking.
        c.data[MSI_CAP] = CAP_ID_MSI;
        c.data[MSI_CAP + 1] = PCIE_CAP as u8;
        c.set16(MSI_CAP + 2, MSI_CTRL_64BIT);
        c.writable16(MSI_CAP + 2, 0x0070 | MSI_CTRL_ENABLE); // multiple message enable + enable
        c.writable32(MSI_CAP + 4, 0xffff_fffc);
        c.writable32(MSI_CAP + 8, 0xffff_ffff);
        c.writable16(MSI_CAP + 12, 0xffff);

        // PCI Express capability v2, endpoint, Gen2 (5 GT/s) x1.
        c.data[PCIE_CAP] = CAP_ID_EXP;
        c.data[PCIE_CAP + 1] = 0; // end of list
        c.set16(PCIE_CAP + 2, 0x0002); // version 2, device/port type 0 = endpoint
        c.set32(PCIE_CAP + 4, 0x0000_8001); // devcap: MPS 256 B supported, role-based error reporting
        c.set16(PCIE_DEVCTL, 0x2810); // devctl: MPS 128 B, MRRS 512 B, relaxed ordering, no snoop
        c.writable16(PCIE_DEVCTL, 0x78ff);
        c.w1c16(PCIE_CAP + 0x0a, 0x000f); // devsta error bits
        c.set32(PCIE_CAP + 0x0c, 0x0000_0012); // linkcap: max 5 GT/s, x1, port 0
        c.writable16(PCIE_CAP + 0x10, 0x00cb); // linkctl: ASPM, RCB, common clock, extended synch
        c.set16(PCIE_CAP + 0x12, 0x1012); // linksta: 5 GT/s, x1, slot clock configuration
        c.set32(PCIE_CAP + 0x2c, 0x0000_0006); // linkcap2: 2.5 and 5 GT/s supported
        c.set16(PCIE_CAP + 0x30, 0x0002); // linkctl2: target link speed 5 GT/s
        c.writable16(PCIE_CAP + 0x30, 0x000f);
        c
    }

    /// Reads `buf.len()` bytes at `offset`; bytes beyond the space read 0.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = offset
                .checked_add(i)
                .and_then(|o| self.data.get(o))
                .copied()
                .unwrap_or(0);
        }
    }

    /// Writes bytes at `offset` honouring the writable and write-1-to-clear masks; bytes beyond the space are
    /// ignored.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let Some(o) = offset.checked_add(i).filter(|&o| o < SIZE) else {
                break;
            };
            let kept = self.data[o] & !self.writable[o];
            self.data[o] = (kept | (b & self.writable[o])) & !(b & self.w1c[o]);
        }
    }

    /// A little-endian 16-bit register.
    pub fn read16(&self, offset: usize) -> u16 {
        u16::from_le_bytes([self.data[offset], self.data[offset + 1]])
    }

    /// A little-endian 32-bit register.
    pub fn read32(&self, offset: usize) -> u32 {
        u32::from_le_bytes(self.data[offset..offset + 4].try_into().expect("4 bytes"))
    }

    /// The command register.
    pub fn command(&self) -> u16 {
        self.read16(COMMAND)
    }

    /// Reflects the function's INTx request in status bit 3, as the PCI spec asks.
    pub fn set_interrupt_status(&mut self, asserted: bool) {
        let status = self.read16(STATUS) & !STATUS_INTERRUPT;
        self.set16(STATUS, status | if asserted { STATUS_INTERRUPT } else { 0 });
    }

    /// PCIe max payload size as programmed by the OS (devctl[7:5]: 0 = 128 B .. 5 = 4096 B).
    pub fn max_payload_code(&self) -> u32 {
        u32::from(self.read16(PCIE_DEVCTL) >> 5) & 0x7
    }

    /// PCIe max read request size as programmed by the OS (devctl[14:12], same encoding).
    pub fn max_read_request_code(&self) -> u32 {
        u32::from(self.read16(PCIE_DEVCTL) >> 12) & 0x7
    }

    fn set16(&mut self, o: usize, v: u16) {
        self.data[o..o + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn set32(&mut self, o: usize, v: u32) {
        self.data[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn writable16(&mut self, o: usize, m: u16) {
        self.writable[o..o + 2].copy_from_slice(&m.to_le_bytes());
    }
    fn writable32(&mut self, o: usize, m: u32) {
        self.writable[o..o + 4].copy_from_slice(&m.to_le_bytes());
    }
    fn w1c16(&mut self, o: usize, m: u16) {
        self.w1c[o..o + 2].copy_from_slice(&m.to_le_bytes());
    }

    /// A 32-bit non-prefetchable memory BAR: the low type bits read 0 and only the address bits above the size
    /// are writable, so a sizing write of all ones reads back `!(size - 1)`.
    fn bar(&mut self, index: usize, size: usize) {
        let mask = !(size as u32 - 1) & 0xffff_fff0;
        self.writable32(BAR0 + 4 * index, mask);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_list_is_linked() {
        let c = ConfigSpace::picoevb();
        let mut ids = Vec::new();
        let mut p = c.data[CAP_PTR] as usize;
        while p != 0 {
            ids.push(c.data[p]);
            p = c.data[p + 1] as usize;
        }
        assert_eq!(ids, [CAP_ID_PM, CAP_ID_MSI, CAP_ID_EXP]);
    }

    #[test]
    fn w1c_and_readonly_bits() {
        let mut c = ConfigSpace::picoevb();
        c.data[STATUS + 1] = 0x80; // detected parity error
        c.write(STATUS, &[0xff, 0x80]);
        assert_eq!(
            c.read16(STATUS),
            STATUS_CAP_LIST,
            "W1C cleared, cap-list bit kept"
        );
        c.write(0x00, &[0, 0, 0, 0]);
        assert_eq!(c.read32(0), 0x0001_10de, "IDs are read-only");
    }
}
