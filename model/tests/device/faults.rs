//! Every injectable fault, observed through the registers, memory and counters.

use std::time::{Duration, Instant};

use picoevb_model::config_space::{COMMAND, COMMAND_MEMORY};
use picoevb_model::{FaultKind, IrqLine, corrupt_mask};
use picoevb_regs::xdma::{self, Dir};

use crate::common::*;

fn rig_with_data() -> (Rig, Vec<u8>) {
    let r = Rig::new();
    let data = pattern(256, 0x33);
    r.poke(SRC, &data);
    (r, data)
}

#[test]
fn corrupt_data_flips_one_byte_per_transfer() {
    let (r, data) = rig_with_data();
    r.dev.inject(FaultKind::CorruptData, 1, None);
    assert_eq!(
        r.single(Dir::H2c, SRC, 0, 256),
        DONE,
        "the engine does not notice"
    );
    let got = r.dev.peek_bram(0, 256);
    let diffs: Vec<usize> = (0..256).filter(|&i| got[i] != data[i]).collect();
    assert_eq!(diffs, [0]);
    assert_eq!(got[0], data[0] ^ corrupt_mask(Dir::H2c));
    r.stop(Dir::H2c);
    // Count 1: the next transfer (C2H) is clean, so the corrupted byte comes back as it is in BRAM.
    assert_eq!(r.single(Dir::C2h, 0, DST, 256), DONE);
    assert_eq!(r.peek(DST, 256), got);
    let s = r.dev.snapshot();
    assert_eq!(s.stats.faults_injected, 1);
    assert!(s.pending_faults.is_empty());
}

#[test]
fn corrupt_data_on_c2h() {
    let (r, data) = rig_with_data();
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), DONE);
    r.dev.inject(FaultKind::CorruptData, 1, None);
    assert_eq!(r.single(Dir::C2h, 0, DST, 256), DONE);
    let got = r.peek(DST, 256);
    assert_eq!(got[0], data[0] ^ corrupt_mask(Dir::C2h));
    assert_eq!(got[1..], data[1..]);
}

#[test]
fn corrupt_data_on_every_transfer_survives_a_round_trip() {
    let (r, data) = rig_with_data();
    r.dev.inject(FaultKind::CorruptData, 0, None);
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), DONE);
    r.stop(Dir::H2c);
    assert_eq!(r.single(Dir::C2h, 0, DST, 256), DONE);
    let got = r.peek(DST, 256);
    assert_ne!(got[0], data[0], "the two corruptions cancelled out");
    assert_eq!(got[1..], data[1..]);
}

#[test]
fn bad_magic() {
    let (r, _) = rig_with_data();
    r.dev.inject(FaultKind::BadMagic, 1, None);
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), xdma::STAT_MAGIC_STOPPED);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 0);
    assert_eq!(r.dev.peek_bram(0, 4), [0; 4]);
    let s = r.dev.snapshot();
    assert_eq!((s.engine(Dir::H2c).errors, s.stats.faults_injected), (1, 1));
}

#[test]
fn read_error_on_both_engines() {
    let (r, _) = rig_with_data();
    r.dev.inject(FaultKind::ReadError, 2, None);
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), xdma::STAT_READ_ERROR_UR);
    assert_eq!(r.dev.peek_bram(0, 4), [0; 4], "nothing written to BRAM");
    r.poke(DST, &[0xee; 4]);
    assert_eq!(
        r.single(Dir::C2h, 0, DST, 256),
        xdma::STAT_READ_ERROR_UR,
        "C2H: AXI decode error (bit 9)"
    );
    assert_eq!(r.peek(DST, 4), [0xee; 4]);
    assert_eq!(r.dev.snapshot().stats.faults_injected, 2);
}

#[test]
fn write_error_h2c_decode_c2h_dropped() {
    let (r, _) = rig_with_data();
    r.dev.inject(FaultKind::WriteError, 2, None);
    assert_eq!(
        r.single(Dir::H2c, SRC, 0, 256),
        xdma::STAT_WRITE_ERROR_DECODE
    );
    assert_eq!(r.dev.peek_bram(0, 4), [0; 4]);
    r.poke(DST, &[0xee; 4]);
    assert_eq!(
        r.single(Dir::C2h, 0, DST, 256),
        DONE,
        "C2H has no write-error group"
    );
    assert_eq!(r.peek(DST, 4), [0xee; 4], "the writes went nowhere");
    let s = r.dev.snapshot();
    assert_eq!(s.stats.dropped_writes, 1);
    assert_eq!(s.engine(Dir::H2c).errors, 1);
    assert_eq!(s.engine(Dir::C2h).errors, 0);
}

#[test]
fn desc_error() {
    let (r, _) = rig_with_data();
    r.dev.inject(FaultKind::DescError, 1, None);
    assert_eq!(r.single(Dir::C2h, 0, DST, 256), xdma::STAT_DESC_ERROR_UR);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_COMPLETED_COUNT), 0);
    r.stop(Dir::C2h);
    assert_eq!(
        r.single(Dir::C2h, 0, DST, 256),
        DONE,
        "count 1: only one transfer affected"
    );
}

#[test]
fn hang_until_run_is_cleared() {
    let (r, _) = rig_with_data();
    r.dev.inject(FaultKind::Hang, 1, None);
    r.put_desc(DESC, last(256, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    assert!(!r.dev.wait_idle(Dir::H2c, Duration::from_millis(100)));
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), xdma::STAT_BUSY);
    assert_eq!(r.dev.peek_bram(0, 4), [0; 4]);
    r.stop(Dir::H2c);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), xdma::STAT_IDLE_STOPPED);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 0);
}

#[test]
fn stuck_until_bus_mastering_is_disabled() {
    let (r, _) = rig_with_data();
    r.dev.inject(FaultKind::Stuck, 1, None);
    r.put_desc(DESC, last(256, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    // What a driver's stop does: clear Run, halt the descriptor fetch. The engine stays busy.
    r.set_ch(Dir::H2c, xdma::CH_CONTROL_W1C, xdma::CTRL_RUN);
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S,
        Dir::H2c.sgdma_common_bit(),
    );
    assert!(!r.dev.wait_idle(Dir::H2c, Duration::from_millis(100)));
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS) & xdma::STAT_BUSY,
        xdma::STAT_BUSY
    );
    assert_eq!(r.dev.peek_bram(0, 4), [0; 4]);
    // Bus mastering off ends it without moving data.
    r.set_cfg(COMMAND as u64, u32::from(COMMAND_MEMORY), 2);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS) & xdma::STAT_BUSY, 0);
    assert_eq!(r.dev.peek_bram(0, 4), [0; 4]);
}

#[test]
fn drop_irq_completes_silently() {
    let (r, data) = rig_with_data();
    r.dev.set_msi_vectors(1);
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN, 0b11);
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK, 0x00ff_fffe);
    r.dev.inject(FaultKind::DropIrq, 1, None);
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), DONE);
    assert_eq!(r.dev.peek_bram(0, 256), data);
    assert!(r.irq.take().is_empty(), "interrupt lost");
    assert_eq!(
        r.bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ),
        1,
        "the request is visible to a poller"
    );
    assert_eq!(r.dev.snapshot().stats.irqs_msi, 0);
    r.ch(Dir::H2c, xdma::CH_STATUS_RC);
    r.stop(Dir::H2c);
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), DONE);
    assert_eq!(
        r.irq.take(),
        [IrqLine::Msi(0)],
        "the next transfer interrupts again"
    );
}

#[test]
fn drop_irq_with_intx() {
    let (r, _) = rig_with_data();
    r.dev.set_intx(true);
    r.set_bar1(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN, 0b11);
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK, 0x00ff_fffe);
    r.dev.inject(FaultKind::DropIrq, 1, None);
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), DONE);
    r.dev.intx_unmask();
    assert!(r.irq.take().is_empty());
}

#[test]
fn slow_delays_completion() {
    let (r, _) = rig_with_data();
    r.dev
        .inject(FaultKind::Slow, 1, Some(Duration::from_millis(150)));
    let t = Instant::now();
    r.put_desc(DESC, last(256, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    assert!(
        !r.dev.wait_idle(Dir::H2c, Duration::from_millis(50)),
        "still busy early on"
    );
    r.wait(Dir::H2c);
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), DONE);
}

#[test]
fn count_zero_lasts_until_cleared() {
    let (r, _) = rig_with_data();
    r.dev.inject(FaultKind::BadMagic, 0, None);
    for _ in 0..3 {
        assert_eq!(r.single(Dir::H2c, SRC, 0, 8), xdma::STAT_MAGIC_STOPPED);
        r.stop(Dir::H2c);
    }
    assert_eq!(r.dev.snapshot().pending_faults, ["bad_magic"]);
    r.dev.clear_faults();
    assert_eq!(r.single(Dir::H2c, SRC, 0, 8), DONE);
    let s = r.dev.snapshot();
    assert_eq!(
        (
            s.stats.faults_injected,
            s.engine(Dir::H2c).runs,
            s.engine(Dir::H2c).errors
        ),
        (3, 4, 3)
    );
    r.dev.reset_counters();
    assert_eq!(r.dev.snapshot().stats, Default::default());
}

#[test]
fn unplug_answers_all_ones_and_drops_the_transfer_in_flight() {
    let (r, data) = rig_with_data();
    r.dev
        .inject(FaultKind::Slow, 1, Some(Duration::from_millis(200)));
    r.put_desc(DESC, last(256, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    r.dev.set_unplugged(true);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_IDENTIFIER), u32::MAX);
    assert_eq!(r.bar0(0), u32::MAX);
    // Writes are lost while unplugged.
    r.set_bar0(0, 5);
    thread_sleep(Duration::from_millis(400));
    assert_eq!(
        r.dev.peek_bram(0, 256),
        vec![0; 256],
        "the transfer in flight still moved data"
    );
    r.dev.set_unplugged(false);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_IDENTIFIER),
        xdma::identifier(xdma::TARGET_H2C, 0)
    );
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        0,
        "engine not idle after re-insertion"
    );
    assert_ne!(r.bar0(0) & 7, 5, "a write while unplugged reached the GPIO");
    // Working again.
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), DONE);
    assert_eq!(r.dev.peek_bram(0, 256), data);
}

fn thread_sleep(d: Duration) {
    std::thread::sleep(d);
}

/// An IOVA the driver mapped for one transfer, outside the rig's RAM region.
const IOVA: u64 = 0xffff_e000;

/// `stale_addr` behind an IOMMU: the previous transfer's buffer was unmapped, so the replayed address
/// reaches nothing and the H2C fails with read_error (what the guest test relies on).
#[test]
fn stale_addr_after_unmap_is_a_read_error() {
    let r = Rig::new();
    r.mem.add_region(IOVA, 4096);
    r.poke(IOVA, &pattern(256, 0x11));
    assert_eq!(r.single(Dir::H2c, IOVA, 0, 256), DONE);
    r.stop(Dir::H2c);
    r.mem.remove_region(IOVA);
    let fresh = pattern(256, 0x77);
    r.poke(SRC, &fresh);
    r.dev.inject(FaultKind::StaleAddr, 1, None);
    assert_eq!(
        r.single(Dir::H2c, SRC, 0x100, 256),
        xdma::STAT_READ_ERROR_UR
    );
    let s = r.dev.snapshot();
    assert_eq!((s.engine(Dir::H2c).errors, s.stats.faults_injected), (1, 1));
    assert_eq!(s.stats.host_addrs.last(Dir::H2c), Some(SRC));
    assert_eq!(r.dev.peek_bram(0x100, 256), vec![0; 256], "nothing written");
}

/// Without an IOMMU the same stale address is still RAM: the transfer "succeeds" with the old bytes.
#[test]
fn stale_addr_without_unmap_moves_the_old_bytes() {
    let r = Rig::new();
    r.poke(DST, &pattern(256, 0x11));
    assert_eq!(r.single(Dir::H2c, DST, 0, 256), DONE);
    r.stop(Dir::H2c);
    r.poke(SRC, &pattern(256, 0x77));
    r.dev.inject(FaultKind::StaleAddr, 1, None);
    assert_eq!(r.single(Dir::H2c, SRC, 0x100, 256), DONE);
    assert_eq!(r.dev.peek_bram(0x100, 256), pattern(256, 0x11));
}
