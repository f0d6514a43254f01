//! The IRQ block and interrupt delivery: MSI edges, INTx level with QEMU's auto-masking.

use picoevb_model::IrqLine;
use picoevb_regs::gpio;
use picoevb_regs::xdma::{self, Dir};

use crate::common::*;

/// Enables both channels' interrupts with every source unmasked (what NVIDIA's driver does).
fn enable_channels(r: &Rig) {
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S, 0xffff_ffff);
    for d in Dir::ALL {
        r.set_ch(d, xdma::CH_INT_MASK, 0xffff_ffff);
    }
}

#[test]
fn msi_one_message_per_rising_request_edge() {
    let r = Rig::new();
    r.dev.set_msi_vectors(1);
    enable_channels(&r);
    assert_eq!(r.bar1(xdma::CONFIG_BLOCK + xdma::CFG_MSI_ENABLE), 1);
    r.single(Dir::H2c, SRC, 0, 64);
    assert_eq!(r.irq.take(), [IrqLine::Msi(0)]);
    // H2C's request is still high; C2H's edge sends its own message.
    r.single(Dir::C2h, 0, DST, 64);
    assert_eq!(r.irq.take(), [IrqLine::Msi(0)]);
    assert_eq!(r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ), 0b11);
    // Clearing and re-raising a source is a new edge.
    r.ch(Dir::H2c, xdma::CH_STATUS_RC);
    assert_eq!(r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ), 0b10);
    r.stop(Dir::H2c);
    r.single(Dir::H2c, SRC, 0, 64);
    assert_eq!(r.irq.take(), [IrqLine::Msi(0)]);
    assert_eq!(r.dev.snapshot().stats.irqs_msi, 3);
}

#[test]
fn msi_vectors_follow_the_channel_vector_register() {
    let r = Rig::new();
    r.dev.set_msi_vectors(2);
    enable_channels(&r);
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_VEC, 0x0000_0100); // H2C0 -> 0, C2H0 -> 1
    r.single(Dir::C2h, 0, DST, 8);
    r.single(Dir::H2c, SRC, 0, 8);
    assert_eq!(r.irq.take(), [IrqLine::Msi(1), IrqLine::Msi(0)]);
}

#[test]
fn intx_is_level_and_reasserts_on_unmask() {
    let r = Rig::new();
    r.dev.set_intx(true);
    enable_channels(&r);
    r.single(Dir::H2c, SRC, 0, 64);
    assert_eq!(r.irq.take(), [IrqLine::Intx]);
    // QEMU auto-masked the line; a second source while masked sends nothing.
    r.single(Dir::C2h, 0, DST, 64);
    assert!(r.irq.take().is_empty());
    // EOI without servicing: still pending, so UNMASK re-asserts.
    r.dev.intx_unmask();
    assert_eq!(r.irq.take(), [IrqLine::Intx]);
    // The ISR reads both STATUS_RC registers: the level drops; UNMASK sends nothing.
    r.ch(Dir::H2c, xdma::CH_STATUS_RC);
    r.ch(Dir::C2h, xdma::CH_STATUS_RC);
    assert_eq!(r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ), 0);
    r.dev.intx_unmask();
    assert!(r.irq.take().is_empty());
    assert_eq!(r.dev.snapshot().stats.irqs_intx, 2);
}

#[test]
fn intx_disable_and_channel_enable_gate_interrupts() {
    let r = Rig::new();
    r.dev.set_intx(true);
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK, 0x00ff_fffe);
    r.single(Dir::H2c, SRC, 0, 8);
    assert!(r.irq.take().is_empty(), "channel interrupt not enabled");
    assert_eq!(
        r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_PENDING),
        0b01,
        "pending shows the raw source"
    );
    assert_eq!(r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ), 0);
    r.set_cfg(0x04, 0x0406, 2); // INTx disable
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN, 0b01);
    assert!(
        r.irq.take().is_empty(),
        "INTx disabled in the command register"
    );
    r.set_cfg(0x04, 0x0006, 2);
    assert_eq!(r.irq.take(), [IrqLine::Intx]);
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C, 0b01);
    assert_eq!(r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN), 0);
    r.dev.intx_unmask();
    assert!(r.irq.take().is_empty());
}

#[test]
fn interrupt_mask_selects_sources() {
    let r = Rig::new();
    r.dev.set_msi_vectors(1);
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN, 0b11);
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK, xdma::STAT_MAGIC_STOPPED);
    r.single(Dir::H2c, SRC, 0, 8);
    assert!(r.irq.take().is_empty(), "completed/stopped masked");
    r.stop(Dir::H2c);
    r.dev.inject(picoevb_model::FaultKind::BadMagic, 1, None);
    r.single(Dir::H2c, SRC, 0, 8);
    assert_eq!(r.irq.take(), [IrqLine::Msi(0)]);
}

#[test]
fn gpio_interrupt_is_user_irq_0() {
    let r = Rig::new();
    r.dev.set_msi_vectors(1);
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_USER_EN_W1S, 1);
    r.set_bar0(gpio::GIER, 1 << 31);
    r.set_bar0(gpio::IP_IER, 1);
    assert!(r.irq.take().is_empty());
    r.set_bar0(gpio::IP_ISR, 1); // toggle-on-write raises the GPIO interrupt
    assert_eq!(r.irq.take(), [IrqLine::Msi(0)]);
    assert_eq!(r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_USER_REQ), 1);
    r.set_bar0(gpio::IP_ISR, 1);
    assert_eq!(r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_USER_REQ), 0);
}

#[test]
fn msi_disable_falls_back_to_intx_and_config_block_follows() {
    let r = Rig::new();
    r.dev.set_intx(true);
    r.dev.set_msi_vectors(1);
    enable_channels(&r);
    r.dev.set_msi_vectors(0);
    assert_eq!(r.bar1(xdma::CONFIG_BLOCK + xdma::CFG_MSI_ENABLE), 0);
    r.single(Dir::H2c, SRC, 0, 8);
    assert_eq!(r.irq.take(), [IrqLine::Intx]);
    assert!(!r.dev.snapshot().msi_enabled);
}
