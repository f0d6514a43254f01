//! What the driver asks of a card's XDMA core, once for both kernels. At probe, before anyone uses it: that
//! every XDMA block answers with its identifier (a card that is not the design we know must not be
//! driven), then a known idle state (a previous driver may have left an engine running): both engines
//! stopped (`engine::stop`), every channel and user interrupt off, both channels on vector 0 (the design
//! has one MSI vector). Later, when a read came back all ones: whether the card left the bus.

use crate::channel::Regs32;
use crate::xdma::{self, Dir};

/// The XDMA blocks probe checks, with the names a refusal logs.
pub const BLOCKS: [(usize, &str); 6] = [
    (xdma::TARGET_H2C, "H2C0"),
    (xdma::TARGET_C2H, "C2H0"),
    (xdma::TARGET_IRQ, "IRQ"),
    (xdma::TARGET_CONFIG, "config"),
    (xdma::TARGET_H2C_SGDMA, "H2C0 SGDMA"),
    (xdma::TARGET_C2H_SGDMA, "C2H0 SGDMA"),
];

/// Why probe refuses a card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused<E> {
    /// Block `name` answered `id`, which is not an XDMA's: ENODEV.
    Foreign { name: &'static str, id: u32 },
    /// The registers could not be read.
    Access(E),
    /// An engine could not be shown idle: EIO.
    Busy,
}

/// Checks the identifier of every block of [`BLOCKS`] on the DMA BAR `r`, in order.
pub fn identify<R: Regs32 + ?Sized>(r: &R) -> Result<(), Refused<R::Error>> {
    for (target, name) in BLOCKS {
        let id = r.read32(xdma::block(target, 0)).map_err(Refused::Access)?;
        if !xdma::identifier_matches(id, target) {
            return Err(Refused::Foreign { name, id });
        }
    }
    Ok(())
}

/// Stops both engines with `stop` (the glue's `engine::stop` of that engine, which sleeps), then resets
/// the IRQ block with `reset_irq` (`channel::IrqRegs::reset` on the DMA BAR, taken there: nothing that keeps the
/// BAR, an RCU read side on 6.18, may be held across the engines' sleeps).
pub fn quiesce<E>(
    mut stop: impl FnMut(Dir) -> bool,
    reset_irq: impl FnOnce() -> Result<(), E>,
) -> Result<(), Refused<E>> {
    if !stop(Dir::H2c) || !stop(Dir::C2h) {
        return Err(Refused::Busy);
    }
    reset_irq().map_err(Refused::Access)
}

/// The blocks whose identifiers [`left_bus`] reads.
const PRESENCE: [usize; 3] = [xdma::TARGET_H2C, xdma::TARGET_C2H, xdma::TARGET_CONFIG];

/// Milliseconds [`left_bus`] waits between its two looks.
pub const LEFT_BUS_RECHECK_MS: u32 = 10;

/// Whether every identifier of [`PRESENCE`] on the DMA BAR `r` reads all ones (or cannot be read).
pub fn identifiers_all_ones<R: Regs32 + ?Sized>(r: &R) -> bool {
    PRESENCE
        .iter()
        .all(|&t| r.read32(xdma::block(t, 0)).unwrap_or(u32::MAX) == u32::MAX)
}

/// Whether the card left the bus: `all_ones` ([`identifiers_all_ones`] on the BAR, true where the BAR is
/// gone) holds, and again after `sleep_ms(LEFT_BUS_RECHECK_MS)`: one all-ones read may be a glitch. The
/// glue then marks the card gone, so later requests fail with ENODEV at once. `all_ones` takes the BAR
/// each time: nothing that keeps it (an RCU read side, on 6.18) may be held across the sleep.
pub fn left_bus(mut all_ones: impl FnMut() -> bool, sleep_ms: impl FnOnce(u32)) -> bool {
    all_ones() && {
        sleep_ms(LEFT_BUS_RECHECK_MS);
        all_ones()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::channel::IrqRegs;
    use crate::errno::Errno;
    use crate::regs_fake::Fake;
    use std::vec::Vec;

    fn xdma_card() -> Fake {
        let ids: Vec<_> = BLOCKS
            .iter()
            .map(|&(t, _)| (xdma::block(t, 0), xdma::identifier(t, 0)))
            .collect();
        Fake::with(&ids)
    }

    #[test]
    fn an_xdma_card_passes_and_each_foreign_block_is_named() {
        assert_eq!(identify(&xdma_card()), Ok(()));
        for (target, name) in BLOCKS {
            let mut f = xdma_card();
            f.set(xdma::block(target, 0), 0x1234_5678);
            assert_eq!(
                identify(&f),
                Err(Refused::Foreign {
                    name,
                    id: 0x1234_5678
                })
            );
        }
        // A card that left the bus reads all ones.
        let mut f = Fake::default();
        f.set_all_ones();
        assert!(matches!(
            identify(&f),
            Err(Refused::Foreign {
                name: "H2C0",
                id: u32::MAX
            })
        ));
        assert_eq!(
            identify(&Fake::failing(0)),
            Err(Refused::Access(Errno::EIO))
        );
    }

    #[test]
    fn quiesce_stops_both_engines_before_the_irq_block() {
        let f = Fake::default();
        let mut stopped = Vec::new();
        let reset = || IrqRegs::new(&f).reset();
        assert_eq!(
            quiesce(
                |d| {
                    stopped.push(d);
                    true
                },
                reset
            ),
            Ok(())
        );
        assert_eq!(stopped, [Dir::H2c, Dir::C2h]);
        let irq = |r| xdma::IRQ_BLOCK + r;
        assert_eq!(
            f.log(),
            [
                ('w', irq(xdma::IRQ_CHAN_EN_W1C), u32::MAX),
                ('w', irq(xdma::IRQ_USER_EN_W1C), u32::MAX),
                ('w', irq(xdma::IRQ_CHAN_VEC), 0),
            ]
        );
        // An engine that stays busy: refused, the IRQ block untouched.
        let f = Fake::default();
        assert_eq!(
            quiesce(|d| d == Dir::H2c, || IrqRegs::new(&f).reset()),
            Err(Refused::Busy)
        );
        assert!(f.log().is_empty());
    }

    #[test]
    fn left_bus_needs_all_ones_twice() {
        let mut gone = Fake::default();
        gone.set_all_ones();
        let mut slept = Vec::new();
        assert!(left_bus(
            || identifiers_all_ones(&gone),
            |ms| slept.push(ms)
        ));
        assert_eq!(slept, [LEFT_BUS_RECHECK_MS]);
        assert_eq!(gone.log().len(), 2 * PRESENCE.len());
        // One block still answers: present, and no second look.
        let mut glitch = Fake::with(&[(xdma::block(xdma::TARGET_CONFIG, 0), 0x1fc3_0006)]);
        glitch.set_all_ones();
        let mut slept = 0;
        assert!(!left_bus(|| identifiers_all_ones(&glitch), |_| slept += 1));
        assert_eq!(slept, 0);
        assert!(!left_bus(|| identifiers_all_ones(&xdma_card()), |_| ()));
    }
}
