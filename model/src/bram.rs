//! The 64 KiB block RAM at AXI address 0 behind the DMA engines.
//!
//! NVIDIA's bitstream decodes only AXI address bits [15:0], so every AXI address aliases into the RAM
//! (`CAP_RAM_WRAPS`): accesses wrap modulo 64 KiB and never fault.

use picoevb_regs::pci::{FPGA_RAM_ADDR_MASK, FPGA_RAM_SIZE};

/// Bytes per AXI data beat (64-bit AXI).
pub const BEAT_BYTES: u64 = 8;

/// The FPGA RAM.
pub struct Bram {
    bytes: Box<[u8]>,
}

impl Default for Bram {
    fn default() -> Self {
        Self {
            bytes: vec![0; FPGA_RAM_SIZE as usize].into_boxed_slice(),
        }
    }
}

impl Bram {
    /// Reads `buf.len()` bytes from AXI address `addr`. With `fixed` (non-incrementing AXI bursts) every beat
    /// reads the same 8 bytes at `addr`.
    pub fn read(&self, addr: u64, buf: &mut [u8], fixed: bool) {
        if fixed {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = self.bytes[Self::index(addr, i as u64, true)];
            }
            return;
        }
        let mut done = 0;
        while done < buf.len() {
            let start = Self::index(addr, done as u64, false);
            let n = (self.bytes.len() - start).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&self.bytes[start..start + n]);
            done += n;
        }
    }

    /// Writes `data` at AXI address `addr`; see [`Bram::read`] for `fixed`.
    pub fn write(&mut self, addr: u64, data: &[u8], fixed: bool) {
        if fixed {
            for (i, &b) in data.iter().enumerate() {
                self.bytes[Self::index(addr, i as u64, true)] = b;
            }
            return;
        }
        let mut done = 0;
        while done < data.len() {
            let start = Self::index(addr, done as u64, false);
            let n = (self.bytes.len() - start).min(data.len() - done);
            self.bytes[start..start + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    fn index(addr: u64, i: u64, fixed: bool) -> usize {
        let offset = if fixed { i % BEAT_BYTES } else { i };
        (addr.wrapping_add(offset) & FPGA_RAM_ADDR_MASK) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_modulo_ram_size() {
        let mut r = Bram::default();
        r.write(0xfffe, &[1, 2, 3, 4], false);
        let mut b = [0; 2];
        r.read(0, &mut b, false);
        assert_eq!(b, [3, 4]);
        r.read(0x1_0000_fffe, &mut b, false);
        assert_eq!(b, [1, 2], "high address bits are not decoded");
    }

    #[test]
    fn fixed_bursts_hit_one_beat() {
        let mut r = Bram::default();
        r.write(
            0x100,
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
            true,
        );
        let mut b = [0; 16];
        r.read(0x100, &mut b, false);
        assert_eq!(b[..8], [9, 10, 11, 12, 13, 14, 15, 16]);
        assert_eq!(b[8..], [0; 8]);
    }
}
