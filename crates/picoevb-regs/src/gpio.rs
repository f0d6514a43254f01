//! AXI GPIO (Xilinx axi_gpio v2.0) behind BAR0: channel 1 drives the three LEDs, channel 2 the four M.2 GPIOs.
//!
//! In the reference design the GPIO decodes BAR0 address bits [8:0] only, so it repeats every 512 bytes across
//! the whole BAR. The gdr design keeps it at 0x000..0x7ff (still repeating every 512 bytes there) and puts the
//! ID block at 0x800 (see [`crate::idblock`]); the only offset any driver writes, 0x000, is unchanged.

use crate::channel::Regs32;

/// Channel 1 data: bits [2:0] drive LEDs 0..2. LEDs are active-low: a 0 bit lights the LED.
pub const GPIO_DATA: usize = 0x000;
/// Channel 1 tri-state control (1 = input).
pub const GPIO_TRI: usize = 0x004;
/// Channel 2 data (M.2 edge GPIOs).
pub const GPIO2_DATA: usize = 0x008;
/// Channel 2 tri-state control, reset 0xf (all inputs).
pub const GPIO2_TRI: usize = 0x00c;
/// Global interrupt enable.
pub const GIER: usize = 0x11c;
/// IP interrupt status (toggle on write).
pub const IP_ISR: usize = 0x120;
/// IP interrupt enable.
pub const IP_IER: usize = 0x128;

/// Address bits the GPIO decodes: it repeats every `DECODE_MASK + 1` bytes.
pub const DECODE_MASK: usize = 0x1ff;
/// LED bits in [`GPIO_DATA`].
pub const LED_MASK: u32 = 0x7;
/// Number of LEDs.
pub const LED_COUNT: u32 = 3;
/// Reset value of [`GPIO2_TRI`].
pub const GPIO2_TRI_RESET: u32 = 0xf;

/// Which LEDs are lit for a value written to [`GPIO_DATA`] (active-low).
pub const fn leds_lit(data: u32) -> u32 {
    !data & LED_MASK
}

/// The LEDs, over BAR0: the only GPIO register a driver touches.
pub struct Leds<'a, R: ?Sized> {
    regs: &'a R,
}

impl<'a, R: Regs32 + ?Sized> Leds<'a, R> {
    /// The LEDs behind `regs` (BAR0).
    pub fn new(regs: &'a R) -> Self {
        Self { regs }
    }

    /// Writes `data` to channel 1 (active-low: a 0 bit lights its LED) and reads it back: MMIO writes are
    /// posted, and whoever asked may look at the LEDs as soon as this returns.
    pub fn set(&self, data: u32) -> Result<(), R::Error> {
        self.regs.write32(data, GPIO_DATA)?;
        self.regs.read32(GPIO_DATA).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::channel::fake::Fake;

    #[test]
    fn set_writes_the_data_register_then_reads_it_back() {
        let f = Fake::default();
        Leds::new(&f).set(0b101).unwrap();
        assert_eq!(*f.log.borrow(), [('w', 0x000, 0b101), ('r', 0x000, 0)]);
    }

    #[test]
    fn a_failed_write_is_reported_and_not_flushed() {
        let f = Fake {
            fail_at: Some(GPIO_DATA),
            ..Fake::default()
        };
        assert_eq!(Leds::new(&f).set(0), Err(GPIO_DATA));
        assert!(
            f.log.borrow().is_empty(),
            "no read-back after the failed write"
        );
    }
}
