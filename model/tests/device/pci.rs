//! PCI identity, BAR sizing and the capability list.

use picoevb_model::config_space::{COMMAND, STATUS, STATUS_CAP_LIST, STATUS_INTERRUPT};
use picoevb_regs::xdma::{self, Dir};

use crate::common::*;

#[test]
fn identity_with_dword_and_sub_dword_reads() {
    let r = Rig::new();
    assert_eq!(r.cfg(0x00, 4), 0x0001_10de);
    assert_eq!(r.cfg(0x00, 2), 0x10de);
    assert_eq!(r.cfg(0x01, 1), 0x10, "vendor high byte at an odd offset");
    assert_eq!(
        r.cfg(0x01, 2),
        0x0110,
        "unaligned word spanning vendor and device"
    );
    assert_eq!(r.cfg(0x02, 2), 0x0001);
    assert_eq!(r.cfg(0x08, 4), 0x0580_0000, "class 058000, revision 0");
    assert_eq!(r.cfg(0x0b, 1), 0x05);
    assert_eq!(r.cfg(0x0e, 1), 0x00, "header type 0");
    assert_eq!(r.cfg(0x2c, 4), 0x0001_10de, "subsystem 10de:0001");
    assert_eq!(r.cfg(0x3d, 1), 1, "INTA");
    assert_eq!(r.cfg(STATUS as u64, 2) as u16, STATUS_CAP_LIST);
    assert_eq!(r.cfg(0x100, 4), 0, "no extended capabilities");
    assert_eq!(r.cfg(0xffe, 2), 0, "end of the 4 KiB space");
}

#[test]
fn bar_sizing_masks() {
    let r = Rig::new();
    for (bar, mask) in [
        (0x10u64, 0xffff_f000u32),
        (0x14, 0xffff_0000),
        (0x18, 0),
        (0x1c, 0),
        (0x20, 0),
        (0x24, 0),
    ] {
        r.set_cfg(bar, 0xffff_ffff, 4);
        assert_eq!(
            r.cfg(bar, 4),
            mask,
            "BAR at {bar:#x}: 32-bit non-prefetchable memory, size mask"
        );
    }
    r.set_cfg(0x10, 0xfebf_f000, 4);
    r.set_cfg(0x14, 0xfebe_0000, 4);
    assert_eq!(r.cfg(0x10, 4), 0xfebf_f000);
    assert_eq!(r.cfg(0x14, 4), 0xfebe_0000);
    // Byte-wise BAR write, as some firmware does.
    r.set_cfg(0x13, 0xfd, 1);
    assert_eq!(r.cfg(0x10, 4), 0xfdbf_f000);
    r.set_cfg(0x30, 0xffff_ffff, 4);
    assert_eq!(r.cfg(0x30, 4), 0, "no expansion ROM");
}

#[test]
fn command_register_is_writable_and_ids_are_not() {
    let r = Rig::new();
    r.set_cfg(COMMAND as u64, 0xffff, 2);
    assert_eq!(
        r.cfg(COMMAND as u64, 2),
        0x0546,
        "memory, master, parity, SERR, INTx disable; no I/O space"
    );
    r.set_cfg(COMMAND as u64, 0x0006, 2);
    assert_eq!(r.cfg(COMMAND as u64, 2), 0x0006);
    r.set_cfg(0, 0x1234_5678, 4);
    assert_eq!(r.cfg(0, 4), 0x0001_10de);
}

#[test]
fn capability_list_pm_msi_pcie() {
    let r = Rig::new();
    let mut caps = Vec::new();
    let mut p = r.cfg(0x34, 1) as u64;
    while p != 0 {
        caps.push((p, r.cfg(p, 1)));
        p = r.cfg(p + 1, 1) as u64;
    }
    assert_eq!(caps, [(0x40, 0x01), (0x48, 0x05), (0x60, 0x10)]);
    let msi_ctrl = r.cfg(0x4a, 2);
    assert_eq!(msi_ctrl & 0x80, 0x80, "64-bit MSI");
    assert_eq!(msi_ctrl & 0x0e, 0, "Multiple Message Capable = 1 vector");
    r.set_cfg(0x4c, 0xfee0_1003, 4);
    assert_eq!(r.cfg(0x4c, 4), 0xfee0_1000, "MSI address is DWORD aligned");
    assert_eq!(r.cfg(0x62, 2), 0x0002, "PCIe capability v2, endpoint");
    let linkcap = r.cfg(0x6c, 4);
    assert_eq!(
        (linkcap & 0xf, (linkcap >> 4) & 0x3f),
        (2, 1),
        "Gen2 x1 capable"
    );
    let linksta = r.cfg(0x72, 2);
    assert_eq!(
        (linksta & 0xf, (linksta >> 4) & 0x3f),
        (2, 1),
        "trained at Gen2 x1"
    );
}

#[test]
fn config_block_reflects_pcie_device_control() {
    let r = Rig::new();
    assert_eq!(
        r.bar1(xdma::CONFIG_BLOCK + xdma::CFG_MAX_PAYLOAD),
        0,
        "MPS 128 B at reset"
    );
    assert_eq!(
        r.bar1(xdma::CONFIG_BLOCK + xdma::CFG_MAX_READ),
        2,
        "MRRS 512 B at reset"
    );
    // devctl: MPS 256 (1 << 5), MRRS 1024 (3 << 12)
    r.set_cfg(0x68, 0x3030, 2);
    assert_eq!(r.bar1(xdma::CONFIG_BLOCK + xdma::CFG_MAX_PAYLOAD), 1);
    assert_eq!(r.bar1(xdma::CONFIG_BLOCK + xdma::CFG_MAX_READ), 3);
    assert_eq!(
        r.bar1(xdma::CONFIG_BLOCK + xdma::CFG_SYSTEM_ID),
        xdma::SYSTEM_ID
    );
}

#[test]
fn interrupt_status_bit_follows_intx_level() {
    let r = Rig::new();
    r.dev.set_intx(true);
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S, Dir::H2c.irq_bit());
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK, 0x00ff_fffe);
    r.single(Dir::H2c, SRC, 0, 64);
    assert_ne!(r.cfg(STATUS as u64, 2) as u16 & STATUS_INTERRUPT, 0);
    r.ch(Dir::H2c, xdma::CH_STATUS_RC);
    assert_eq!(r.cfg(STATUS as u64, 2) as u16 & STATUS_INTERRUPT, 0);
}

#[test]
fn reset_restores_config_space() {
    let r = Rig::new();
    r.set_cfg(0x10, 0xfebf_f000, 4);
    r.set_cfg(COMMAND as u64, 0x0006, 2);
    r.dev.reset();
    assert_eq!(r.cfg(0x10, 4), 0);
    assert_eq!(r.cfg(COMMAND as u64, 2), 0);
}
