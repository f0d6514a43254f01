//! The XDMA IRQ block (enables, requests, vectors) and interrupt delivery (xdma.md §6.1).
//!
//! Request bits: channel requests in [15:0] (H2C0 = bit 0, C2H0 = bit 1), user requests in [31:16].
//! * MSI: one message on each 0->1 edge of a request bit, to the vector its vector register names.
//! * INTx: level, asserted while any request bit is set. QEMU auto-masks INTx after each assertion, so the
//!   model sends one event when the level is high and the line unmasked, and again after an UNMASK if the
//!   level is still high.

use picoevb_regs::xdma;

use crate::interrupts::{InterruptSink, IrqLine};
use crate::stats::Stats;

/// Channel interrupt enable bits that exist (1 H2C + 1 C2H channel).
const CHAN_BITS: u32 = (1 << (2 * xdma::CHANNELS)) - 1;
/// User interrupt enable bits.
const USER_BITS: u32 = (1 << xdma::USER_IRQS) - 1;
/// Four 5-bit vector fields per vector register.
const VECTOR_FIELDS: u32 = 0x1f1f_1f1f;
/// First user request bit in the combined request word.
pub const USER_SHIFT: u32 = 16;

/// IRQ block registers (0x2000).
#[derive(Clone, Debug, Default)]
pub struct IrqBlock {
    user_en: u32,
    chan_en: u32,
    user_vec: [u32; 4],
    chan_vec: [u32; 4],
}

impl IrqBlock {
    /// Channel interrupt enables.
    pub fn chan_enable(&self) -> u32 {
        self.chan_en
    }

    /// User interrupt enables.
    pub fn user_enable(&self) -> u32 {
        self.user_en
    }

    /// Reads a register; `chan_sources` / `user_sources` are the raw interrupt sources.
    pub fn read(&self, reg: usize, chan_sources: u32, user_sources: u32) -> u32 {
        match reg {
            0x00 => xdma::identifier(xdma::TARGET_IRQ, 0),
            xdma::IRQ_USER_EN | xdma::IRQ_USER_EN_W1S | xdma::IRQ_USER_EN_W1C => self.user_en,
            xdma::IRQ_CHAN_EN | xdma::IRQ_CHAN_EN_W1S | xdma::IRQ_CHAN_EN_W1C => self.chan_en,
            xdma::IRQ_USER_REQ => user_sources & self.user_en,
            xdma::IRQ_CHAN_REQ => chan_sources & self.chan_en,
            xdma::IRQ_USER_PENDING => user_sources,
            xdma::IRQ_CHAN_PENDING => chan_sources,
            r if (xdma::IRQ_USER_VEC..xdma::IRQ_USER_VEC + 16).contains(&r) => {
                self.user_vec[(r - xdma::IRQ_USER_VEC) / 4]
            }
            r if (xdma::IRQ_CHAN_VEC..xdma::IRQ_CHAN_VEC + 16).contains(&r) => {
                self.chan_vec[(r - xdma::IRQ_CHAN_VEC) / 4]
            }
            _ => 0,
        }
    }

    /// Writes a register.
    pub fn write(&mut self, reg: usize, v: u32) {
        match reg {
            xdma::IRQ_USER_EN => self.user_en = v & USER_BITS,
            xdma::IRQ_USER_EN_W1S => self.user_en |= v & USER_BITS,
            xdma::IRQ_USER_EN_W1C => self.user_en &= !v,
            xdma::IRQ_CHAN_EN => self.chan_en = v & CHAN_BITS,
            xdma::IRQ_CHAN_EN_W1S => self.chan_en |= v & CHAN_BITS,
            xdma::IRQ_CHAN_EN_W1C => self.chan_en &= !v,
            r if (xdma::IRQ_USER_VEC..xdma::IRQ_USER_VEC + 16).contains(&r) => {
                self.user_vec[(r - xdma::IRQ_USER_VEC) / 4] = v & VECTOR_FIELDS
            }
            r if (xdma::IRQ_CHAN_VEC..xdma::IRQ_CHAN_VEC + 16).contains(&r) => {
                self.chan_vec[(r - xdma::IRQ_CHAN_VEC) / 4] = v & VECTOR_FIELDS
            }
            _ => {
                log::debug!("IRQ block: write to read-only or unknown register {reg:#04x} = {v:#x}")
            }
        }
    }

    /// The vector a combined request bit signals.
    pub fn vector(&self, bit: u32) -> u32 {
        let (regs, n) = if bit < USER_SHIFT {
            (&self.chan_vec, bit)
        } else {
            (&self.user_vec, bit - USER_SHIFT)
        };
        let (reg, shift) = xdma::vector_field(n as usize);
        (regs[reg / 4] >> shift) & 0x1f
    }
}

/// Interrupt delivery state: which mode the OS set up and what was already signalled.
#[derive(Clone, Debug, Default)]
pub struct IrqOutput {
    msi_vectors: u32,
    intx_enabled: bool,
    intx_masked: bool,
    /// Request bits at the last evaluation (for MSI edges).
    prev: u32,
    /// Request bits whose interrupt is swallowed (`drop_irq`) until they fall.
    suppressed: u32,
}

impl IrqOutput {
    /// Number of MSI vectors with an eventfd; 0 = MSI disabled.
    pub fn msi_vectors(&self) -> u32 {
        self.msi_vectors
    }

    /// MSI enabled with `n` vectors (0 disables).
    pub fn set_msi(&mut self, n: u32) {
        self.msi_vectors = n;
    }

    /// INTx eventfd present or not; a new setup starts unmasked.
    pub fn set_intx(&mut self, enabled: bool) {
        self.intx_enabled = enabled;
        self.intx_masked = false;
    }

    /// Function reset: forget edges, suppression and the INTx mask; keep the eventfd setup, which belongs
    /// to QEMU.
    pub fn reset(&mut self) {
        self.prev = 0;
        self.suppressed = 0;
        self.intx_masked = false;
    }

    /// QEMU masked INTx.
    pub fn mask_intx(&mut self) {
        self.intx_masked = true;
    }

    /// QEMU unmasked INTx (after the guest's EOI); the next [`IrqOutput::update`] re-asserts if still pending.
    pub fn unmask_intx(&mut self) {
        self.intx_masked = false;
    }

    /// Swallows the interrupt of request `bits` until they next fall.
    pub fn suppress(&mut self, bits: u32) {
        self.suppressed |= bits;
    }

    /// Evaluates the request bits and sends what they call for. Returns the INTx level (for the PCI status
    /// register's interrupt bit).
    pub fn update(
        &mut self,
        requests: u32,
        vector_of: impl Fn(u32) -> u32,
        intx_disabled: bool,
        sink: &dyn InterruptSink,
        stats: &mut Stats,
    ) -> bool {
        self.suppressed &= requests;
        let rising = requests & !self.prev & !self.suppressed;
        self.prev = requests;
        if self.msi_vectors > 0 {
            for bit in (0..32).filter(|b| rising & (1 << b) != 0) {
                let vector = vector_of(bit) % self.msi_vectors;
                if sink.signal(IrqLine::Msi(vector)) {
                    stats.irqs_msi += 1;
                }
            }
            return false; // with MSI enabled the function does not use INTx
        }
        let level = requests & !self.suppressed != 0 && !intx_disabled;
        if level && self.intx_enabled && !self.intx_masked {
            self.intx_masked = true;
            if sink.signal(IrqLine::Intx) {
                stats.irqs_intx += 1;
            }
        }
        level
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interrupts::RecordingSink;

    #[test]
    fn vectors_unpack_per_bit() {
        let mut b = IrqBlock::default();
        b.write(xdma::IRQ_CHAN_VEC, 0xffff_0302);
        b.write(xdma::IRQ_USER_VEC, 0x0000_0005);
        assert_eq!(b.read(xdma::IRQ_CHAN_VEC, 0, 0), 0x1f1f_0302);
        assert_eq!(b.vector(0), 2);
        assert_eq!(b.vector(1), 3);
        assert_eq!(b.vector(USER_SHIFT), 5);
    }

    #[test]
    fn msi_edges_and_intx_level_with_automask() {
        let sink = RecordingSink::new();
        let mut stats = Stats::default();
        let mut o = IrqOutput::default();
        o.set_msi(1);
        o.update(0b01, |_| 4, false, &sink, &mut stats);
        o.update(0b01, |_| 4, false, &sink, &mut stats);
        o.update(0b11, |_| 4, false, &sink, &mut stats);
        assert_eq!(
            sink.take(),
            [IrqLine::Msi(0), IrqLine::Msi(0)],
            "one message per rising edge"
        );

        o.set_msi(0);
        o.set_intx(true);
        assert!(o.update(0b01, |_| 0, false, &sink, &mut stats));
        assert!(o.update(0b01, |_| 0, false, &sink, &mut stats));
        assert_eq!(sink.take(), [IrqLine::Intx], "masked until UNMASK");
        o.unmask_intx();
        o.update(0b01, |_| 0, false, &sink, &mut stats);
        assert_eq!(sink.take(), [IrqLine::Intx], "re-asserted after unmask");
        o.unmask_intx();
        assert!(!o.update(0, |_| 0, false, &sink, &mut stats));
        assert!(
            !o.update(0b10, |_| 0, true, &sink, &mut stats),
            "INTx disable in the command register"
        );
        assert!(sink.take().is_empty());
        assert_eq!((stats.irqs_msi, stats.irqs_intx), (2, 2));
    }
}
