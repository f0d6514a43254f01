//! The AXI GPIO (axi_gpio v2.0) behind BAR0: channel 1 = 3 LED outputs, channel 2 = 4 M.2 edge GPIOs.
//!
//! Offsets are already decoded to the GPIO's 512-byte window by the caller ([`crate::user_bar`]).

use picoevb_regs::gpio;

/// Width of channel 1 (the LEDs).
const CH1_MASK: u32 = gpio::LED_MASK;
/// Width of channel 2 (the M.2 GPIOs).
const CH2_MASK: u32 = 0xf;
/// GIER: global interrupt enable bit.
const GIER_ENABLE: u32 = 1 << 31;
/// ISR/IER: one bit per channel.
const IRQ_BITS: u32 = 0x3;

/// Register state of the GPIO.
#[derive(Clone, Debug)]
pub struct Gpio {
    data: u32,
    tri: u32,
    data2: u32,
    tri2: u32,
    gier: u32,
    isr: u32,
    ier: u32,
}

impl Default for Gpio {
    fn default() -> Self {
        Self {
            // C_DOUT_DEFAULT is 0: with active-low LEDs all three are lit until software writes.
            data: 0,
            tri: 0,
            data2: 0,
            tri2: gpio::GPIO2_TRI_RESET,
            gier: 0,
            isr: 0,
            ier: 0,
        }
    }
}

impl Gpio {
    /// Reads the register at `offset` (0..0x1ff); unknown offsets read 0.
    pub fn read(&self, offset: usize) -> u32 {
        match offset & !3 {
            gpio::GPIO_DATA => self.data,
            gpio::GPIO_TRI => self.tri,
            // Input bits read the pins; nothing drives them in the model, so they read 0.
            gpio::GPIO2_DATA => self.data2 & !self.tri2,
            gpio::GPIO2_TRI => self.tri2,
            gpio::GIER => self.gier,
            gpio::IP_ISR => self.isr,
            gpio::IP_IER => self.ier,
            _ => 0,
        }
    }

    /// Writes the register at `offset` (0..0x1ff); unknown offsets ignore writes.
    pub fn write(&mut self, offset: usize, value: u32) {
        match offset & !3 {
            gpio::GPIO_DATA => self.data = value & CH1_MASK,
            // Channel 1 is built "all outputs": TRI is storage and does not affect the LEDs.
            gpio::GPIO_TRI => self.tri = value & CH1_MASK,
            gpio::GPIO2_DATA => self.data2 = value & CH2_MASK,
            gpio::GPIO2_TRI => self.tri2 = value & CH2_MASK,
            gpio::GIER => self.gier = value & GIER_ENABLE,
            // The ISR is toggle-on-write (Xilinx xgpio), which also lets software raise the interrupt.
            gpio::IP_ISR => self.isr ^= value & IRQ_BITS,
            gpio::IP_IER => self.ier = value & IRQ_BITS,
            _ => {}
        }
    }

    /// Channel 1 data: the LED register (active-low).
    pub fn data(&self) -> u32 {
        self.data
    }

    /// The GPIO interrupt output (`ip2intc_irpt`), wired to XDMA user IRQ 0.
    pub fn irq(&self) -> bool {
        self.gier & GIER_ENABLE != 0 && self.isr & self.ier != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isr_toggles_and_drives_irq_only_when_enabled() {
        let mut g = Gpio::default();
        g.write(gpio::IP_ISR, 1);
        assert_eq!(g.read(gpio::IP_ISR), 1);
        assert!(!g.irq(), "IER and GIER still clear");
        g.write(gpio::IP_IER, 1);
        g.write(gpio::GIER, 0xffff_ffff);
        assert_eq!(g.read(gpio::GIER), GIER_ENABLE);
        assert!(g.irq());
        g.write(gpio::IP_ISR, 1);
        assert_eq!(g.read(gpio::IP_ISR), 0, "toggle on write clears it again");
        assert!(!g.irq());
    }

    #[test]
    fn widths_and_reset_values() {
        let mut g = Gpio::default();
        assert_eq!(g.read(gpio::GPIO2_TRI), gpio::GPIO2_TRI_RESET);
        g.write(gpio::GPIO_DATA, 0xffff_fffd);
        assert_eq!(g.read(gpio::GPIO_DATA), 0x5);
        g.write(gpio::GPIO2_TRI, 0x3);
        g.write(gpio::GPIO2_DATA, 0xff);
        assert_eq!(g.read(gpio::GPIO2_DATA), 0xc, "only output bits read back");
    }
}
