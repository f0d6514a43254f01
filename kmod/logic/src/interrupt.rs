//! One interrupt of the card, once for both kernels: which engines raised it, the status each run ended
//! with (read-to-clear, which also drops a level INTx), and each raising engine's request turned off until
//! its next run arms it again, so a stuck source cannot storm. The glue hands each status to its engine's
//! waiter. The one MSI vector serves both engines, and an INTx line may be shared.

use crate::channel::{Channel, IrqRegs, Regs32};
use crate::xdma::Dir;

/// Per engine (H2C, C2H): the status its run ended with, if it raised the interrupt.
pub type Raised = [Option<u32>; 2];

/// Services one interrupt on the DMA BAR `r`: None if it was not this card's (no engine's request pending,
/// the card gone: all ones, or the BAR unreachable), else what each engine raised.
pub fn service<R: Regs32 + ?Sized>(r: &R) -> Option<Raised> {
    let req = IrqRegs::new(r)
        .channel_requests()
        .ok()
        .filter(|&q| q != u32::MAX)?;
    let mut raised = [None, None];
    for (slot, dir) in raised.iter_mut().zip([Dir::H2c, Dir::C2h]) {
        if req & dir.irq_bit() == 0 {
            continue;
        }
        let ch = Channel::new(r, dir);
        // A failed read leaves no stop bit: the waiter reports the run as not ended cleanly.
        *slot = Some(ch.take_status().map_or(0, |s| s.0));
        // Should this write fail, the device is unmapped and raises nothing more.
        let _ = ch.irq_enable(false);
    }
    raised.iter().any(Option::is_some).then_some(raised)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::regs_fake::Fake;
    use crate::xdma;

    const REQ: usize = xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ;
    const EN_W1C: usize = xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C;

    fn status_rc(dir: Dir) -> usize {
        dir.channel_base() + xdma::CH_STATUS_RC
    }

    #[test]
    fn each_raising_engine_gives_its_status_and_is_turned_off() {
        let f = Fake::with(&[(REQ, Dir::C2h.irq_bit()), (status_rc(Dir::C2h), 0x6)]);
        assert_eq!(service(&f), Some([None, Some(0x6)]));
        assert_eq!(
            f.log(),
            [
                ('r', REQ, Dir::C2h.irq_bit()),
                ('r', status_rc(Dir::C2h), 0x6),
                ('w', EN_W1C, Dir::C2h.irq_bit()),
            ]
        );
        let both = Dir::H2c.irq_bit() | Dir::C2h.irq_bit();
        let f = Fake::with(&[(REQ, both), (status_rc(Dir::H2c), 0x1)]);
        assert_eq!(service(&f), Some([Some(0x1), Some(0)]));
    }

    #[test]
    fn not_ours_touches_nothing() {
        // Nothing pending (a shared line), the card gone, the BAR unreachable.
        for f in [
            Fake::with(&[]),
            Fake::with(&[(REQ, u32::MAX)]),
            Fake::failing(REQ),
        ] {
            assert_eq!(service(&f), None);
            assert!(f.log().iter().all(|a| a.0 == 'r'));
        }
    }

    #[test]
    fn a_failed_status_read_still_turns_the_engine_off() {
        let mut f = Fake::failing(status_rc(Dir::H2c));
        f.set(REQ, Dir::H2c.irq_bit());
        assert_eq!(service(&f), Some([Some(0), None]));
        assert_eq!(f.log().last(), Some(&('w', EN_W1C, Dir::H2c.irq_bit())));
    }
}
