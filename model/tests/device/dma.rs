//! XDMA registers and engine semantics.

use std::time::{Duration, Instant};

use picoevb_model::DeviceOptions;
use picoevb_model::config_space::{COMMAND, COMMAND_MASTER, COMMAND_MEMORY};
use picoevb_regs::xdma::{self, Descriptor, Dir};

use crate::common::*;

#[test]
fn identifiers_and_absent_blocks() {
    let r = Rig::new();
    let ids = [
        (0x0000, 0x1fc0_0006),
        (0x1000, 0x1fc1_0006),
        (0x2000, 0x1fc2_0006),
        (0x3000, 0x1fc3_0006),
        (0x4000, 0x1fc4_0006),
        (0x5000, 0x1fc5_0006),
        (0x6000, 0x1fc6_0006),
    ];
    for (offset, id) in ids {
        assert_eq!(r.bar1(offset), id, "identifier at {offset:#06x}");
        assert!(xdma::identifier_matches(id, offset >> 12));
    }
    for absent in [0x0100, 0x1100, 0x4100, 0x5300, 0x7000, 0x8000, 0xf000] {
        assert_eq!(r.bar1(absent), 0, "{absent:#06x} reads 0");
    }
    assert_eq!(r.ch(Dir::H2c, xdma::CH_ALIGNMENTS), xdma::ALIGNMENTS_MM64);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_ALIGNMENTS), xdma::ALIGNMENTS_MM64);
}

#[test]
fn control_w1s_w1c_and_reserved_bits() {
    let r = Rig::new();
    r.set_ch(Dir::C2h, xdma::CH_CONTROL, 0x00ff_fe7e);
    assert_eq!(
        r.ch(Dir::C2h, xdma::CH_CONTROL),
        0x00ff_fe7e & !xdma::CTRL_IE_WRITE_ERROR,
        "no write errors on C2H"
    );
    r.set_ch(
        Dir::H2c,
        xdma::CH_CONTROL_W1S,
        xdma::CTRL_IE_DESC_STOPPED | xdma::CTRL_POLLMODE_WB,
    );
    r.set_ch(Dir::H2c, xdma::CH_CONTROL_W1S, xdma::CTRL_IE_MAGIC_STOPPED);
    r.set_ch(Dir::H2c, xdma::CH_CONTROL_W1C, xdma::CTRL_POLLMODE_WB);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_CONTROL),
        xdma::CTRL_IE_DESC_STOPPED | xdma::CTRL_IE_MAGIC_STOPPED
    );
}

/// H2C of a four-descriptor chain (an adjacent pair, then `next` to another adjacent pair), then one C2H
/// descriptor copying it all back.
#[test]
fn h2c_then_c2h_round_trip_with_a_chain() {
    let r = Rig::new();
    let lens = [100u32, 4096, 3, 5000];
    let total: u32 = lens.iter().sum();
    let data = pattern(total as usize, 0x5a);
    r.poke(SRC, &data);
    let block_b = DESC + 0x800;
    let mut offs = Vec::new();
    let mut o = 0u32;
    for l in lens {
        offs.push(o);
        o += l;
    }
    let desc = |i: usize, control: u32, next: u64| {
        Descriptor::new(
            control,
            lens[i],
            SRC + offs[i] as u64,
            0x100 + offs[i] as u64,
            next,
        )
    };
    // D0's next/Nxt_adj must be ignored: only the last descriptor of a block says where to go.
    r.put_desc(DESC, desc(0, xdma::desc_control(5, 0), 0xdead_0000));
    r.put_desc(DESC + 32, desc(1, xdma::desc_control(1, 0), block_b));
    r.put_desc(block_b, desc(2, xdma::desc_control(0, 0), 0xbad0_0000));
    r.put_desc(
        block_b + 32,
        desc(
            3,
            xdma::desc_control(0, xdma::DESC_STOP | xdma::DESC_COMPLETED),
            0,
        ),
    );
    r.start(Dir::H2c, DESC, 1, CTRL_ALL);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), DONE);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 4);
    assert_eq!(r.dev.peek_bram(0x100, total as usize), data);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_CONTROL) & xdma::CTRL_RUN,
        1,
        "Run stays set until the driver clears it"
    );
    r.stop(Dir::H2c);

    assert_eq!(r.single(Dir::C2h, 0x100, DST, total), DONE);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_COMPLETED_COUNT), 1);
    assert_eq!(r.peek(DST, total as usize), data);
    let s = r.dev.snapshot();
    assert_eq!(
        (
            s.engine(Dir::H2c).runs,
            s.engine(Dir::H2c).descriptors,
            s.engine(Dir::H2c).bytes
        ),
        (1, 4, total as u64)
    );
    assert_eq!(
        (
            s.engine(Dir::C2h).runs,
            s.engine(Dir::C2h).descriptors,
            s.engine(Dir::C2h).bytes
        ),
        (1, 1, total as u64)
    );
    assert_eq!(s.engine(Dir::H2c).errors + s.engine(Dir::C2h).errors, 0);
}

#[test]
fn bram_addresses_wrap_modulo_64k() {
    let r = Rig::new();
    let data = pattern(32, 1);
    r.poke(SRC, &data);
    assert_eq!(r.single(Dir::H2c, SRC, 0xfff0, 32), DONE);
    assert_eq!(r.dev.peek_bram(0xfff0, 16), data[..16]);
    assert_eq!(r.dev.peek_bram(0, 16), data[16..], "wrapped to AXI 0");
    r.stop(Dir::H2c);
    // AXI 0x1_0000 aliases 0 (only bits [15:0] are decoded).
    assert_eq!(r.single(Dir::C2h, 0x3_0000, DST, 16), DONE);
    assert_eq!(r.peek(DST, 16), data[16..]);
}

#[test]
fn status_read_clear_and_w1c() {
    let r = Rig::new();
    assert_eq!(r.single(Dir::H2c, SRC, 0, 64), DONE);
    r.set_ch(
        Dir::H2c,
        xdma::CH_STATUS,
        xdma::STAT_DESC_STOPPED | xdma::STAT_BUSY,
    );
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        xdma::STAT_DESC_COMPLETED,
        "RW1C of bit 1; busy is RO"
    );
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS_RC),
        xdma::STAT_DESC_COMPLETED
    );
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS_RC), 0, "read-to-clear");
    r.set_ch(Dir::H2c, xdma::CH_STATUS_RC, 0xffff_ffff);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        0,
        "writes to 0x44 do nothing"
    );

    // Busy survives the read-to-clear.
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S,
        Dir::C2h.sgdma_common_bit(),
    );
    r.put_desc(DESC, last(64, 0, DST));
    r.start(Dir::C2h, DESC, 0, CTRL_ALL);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_STATUS_RC), xdma::STAT_BUSY);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_STATUS_RC), xdma::STAT_BUSY);
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C,
        Dir::C2h.sgdma_common_bit(),
    );
    r.wait(Dir::C2h);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_STATUS_RC), DONE);
}

#[test]
fn run_resets_status_and_completed_count() {
    let r = Rig::new();
    r.put_desc(
        DESC,
        Descriptor::new(xdma::desc_control(0, xdma::DESC_COMPLETED), 8, SRC, 0, 0),
    );
    r.put_desc(
        DESC + 32,
        Descriptor::new(xdma::desc_control(0, xdma::DESC_COMPLETED), 8, SRC, 8, 0),
    );
    r.put_desc(DESC + 64, last(8, SRC, 16));
    r.start(Dir::H2c, DESC, 2, CTRL_ALL);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 3);
    r.stop(Dir::H2c);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        DONE,
        "clearing Run after a STOP logs nothing new"
    );
    // Hold the next run at the fetch so the reset values are observable.
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S,
        Dir::H2c.sgdma_common_bit(),
    );
    r.start(Dir::H2c, DESC + 64, 0, CTRL_ALL);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        xdma::STAT_BUSY,
        "status [23:1] reset by Run"
    );
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT),
        0,
        "count reset by Run"
    );
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C,
        Dir::H2c.sgdma_common_bit(),
    );
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 1);
}

#[test]
fn interrupt_mask_w1s_and_both_w1c_offsets() {
    let r = Rig::new();
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK, 0xffff_ffff);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_INT_MASK),
        0x00ff_fffe,
        "bits [23:1]"
    );
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK_W1C, xdma::STAT_DESC_STOPPED);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_INT_MASK), 0x00ff_fffc);
    r.set_ch(
        Dir::H2c,
        xdma::CH_INT_MASK_W1C_ALIAS,
        xdma::STAT_DESC_COMPLETED,
    );
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_INT_MASK),
        0x00ff_fff8,
        "0x9c alias clears too"
    );
    r.set_ch(Dir::H2c, xdma::CH_INT_MASK_W1S, xdma::STAT_DESC_STOPPED);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_INT_MASK), 0x00ff_fffa);
    assert_eq!(
        r.ch(Dir::C2h, xdma::CH_INT_MASK),
        0,
        "other channel untouched"
    );
}

#[test]
fn poll_mode_write_back() {
    let r = Rig::new();
    r.poke(WB, &[0xff; 8]);
    r.set_ch(Dir::C2h, xdma::CH_POLL_WB_LO, WB as u32);
    r.set_ch(Dir::C2h, xdma::CH_POLL_WB_HI, (WB >> 32) as u32);
    let completed = xdma::desc_control(0, xdma::DESC_COMPLETED);
    r.put_desc(DESC, Descriptor::new(completed, 16, 0, DST, 0));
    r.put_desc(
        DESC + 32,
        Descriptor::new(xdma::desc_control(0, 0), 16, 16, DST + 16, 0),
    );
    r.put_desc(DESC + 64, last(16, 32, DST + 32));
    let poll = xdma::CTRL_RUN
        | xdma::CTRL_POLLMODE_WB
        | xdma::CTRL_IE_DESC_COMPLETED
        | xdma::CTRL_IE_MAGIC_STOPPED;
    r.start(Dir::C2h, DESC, 2, poll);
    r.wait(Dir::C2h);
    assert_eq!(
        r.peek(WB, 8),
        [3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
        "one DWORD: count 3, Sts_err 0"
    );
    r.stop(Dir::C2h);

    // An error stop writes back with Sts_err set.
    r.put_desc(DESC, Descriptor::new(0x1234_0013, 16, 0, DST, 0));
    r.start(Dir::C2h, DESC, 0, poll);
    r.wait(Dir::C2h);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_STATUS), xdma::STAT_MAGIC_STOPPED);
    assert_eq!(r.peek(WB, 4), 0x8000_0000u32.to_le_bytes());

    // Without pollmode_wb nothing is written.
    r.stop(Dir::C2h);
    r.poke(WB, &[0xaa; 4]);
    r.put_desc(DESC, last(16, 0, DST));
    r.start(Dir::C2h, DESC, 0, CTRL_ALL);
    r.wait(Dir::C2h);
    assert_eq!(r.peek(WB, 4), [0xaa; 4]);
}

/// The stopping descriptor's write-back is the engine's last act: whenever the word shows the count, a
/// status read shows the engine stopped and idle (the driver's fast path reads the status right after
/// the word). Each write-back that reached memory is counted.
#[test]
fn stop_write_back_lands_after_the_engine_is_idle() {
    let r = Rig::new();
    // The driver's control word (kmod/logic/src/engine.rs): Run, every status bit logged, poll mode.
    let poll = xdma::CTRL_RUN | xdma::CTRL_IE_ALL | xdma::CTRL_POLLMODE_WB;
    r.set_ch(Dir::C2h, xdma::CH_POLL_WB_LO, WB as u32);
    r.set_ch(Dir::C2h, xdma::CH_POLL_WB_HI, (WB >> 32) as u32);
    for round in 1..=50u64 {
        r.poke(WB, &[0; 4]);
        r.put_desc(DESC, last(4096, 0, DST));
        r.start(Dir::C2h, DESC, 0, poll);
        let t0 = std::time::Instant::now();
        while r.peek(WB, 4) != [1, 0, 0, 0] {
            assert!(t0.elapsed().as_secs() < 5, "no write-back after 5 s");
            std::hint::spin_loop();
        }
        let st = r.ch(Dir::C2h, xdma::CH_STATUS);
        assert_eq!(
            st & (xdma::STAT_BUSY | xdma::STAT_DESC_STOPPED),
            xdma::STAT_DESC_STOPPED,
            "round {round}: status {st:#x} when the word landed"
        );
        assert_eq!(r.dev.snapshot().engine(Dir::C2h).writebacks, round);
        r.stop(Dir::C2h);
    }
}

#[test]
fn descriptor_halt_stops_fetching_until_released() {
    let r = Rig::new();
    let data = pattern(256, 9);
    r.poke(SRC, &data);
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S,
        Dir::H2c.sgdma_common_bit(),
    );
    assert_eq!(r.bar1(xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL), 1);
    r.put_desc(DESC, last(256, SRC, 0x2000));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    assert!(
        !r.dev.wait_idle(Dir::H2c, Duration::from_millis(50)),
        "halted: stays busy"
    );
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 0);
    assert_eq!(
        r.dev.peek_bram(0x2000, 256),
        vec![0; 256],
        "nothing fetched or moved"
    );
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C,
        Dir::H2c.sgdma_common_bit(),
    );
    r.wait(Dir::H2c);
    assert_eq!(r.dev.peek_bram(0x2000, 256), data);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), DONE);
}

#[test]
fn clearing_run_while_busy_logs_idle_stopped() {
    let r = Rig::new();
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S,
        Dir::C2h.sgdma_common_bit(),
    );
    r.put_desc(DESC, last(64, 0, DST));
    r.start(Dir::C2h, DESC, 0, CTRL_ALL);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_STATUS), xdma::STAT_BUSY);
    r.stop(Dir::C2h);
    r.wait(Dir::C2h);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_STATUS), xdma::STAT_IDLE_STOPPED);
    assert_eq!(r.ch(Dir::C2h, xdma::CH_COMPLETED_COUNT), 0);
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C,
        Dir::C2h.sgdma_common_bit(),
    );
}

#[test]
fn adjacent_block_crossing_4k_is_a_descriptor_error() {
    let r = Rig::new();
    let first = DESC + 0xfe0;
    r.put_desc(
        first,
        Descriptor::new(xdma::desc_control(0, 0), 64, SRC, 0, 0),
    );
    r.put_desc(first + 32, last(64, SRC, 64));
    r.start(Dir::H2c, first, 1, CTRL_ALL);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), xdma::STAT_DESC_ERROR_UR);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT),
        0,
        "the block is rejected before any descriptor runs"
    );
    r.stop(Dir::H2c);

    // The same applies to a block reached through `next`.
    r.put_desc(
        DESC,
        Descriptor::new(xdma::desc_control(1, 0), 8, SRC, 0, first),
    );
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), xdma::STAT_DESC_ERROR_UR);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 1);
    assert_eq!(r.dev.snapshot().engine(Dir::H2c).errors, 2);
}

#[test]
fn descriptor_validation_errors() {
    let r = Rig::new();
    let cases = [
        (
            Descriptor::new(xdma::desc_control(0, 3), 0, SRC, 0, 0),
            xdma::STAT_INVALID_LENGTH,
        ),
        (
            Descriptor::new(xdma::desc_control(0, 3), 1 << 28, SRC, 0, 0),
            xdma::STAT_INVALID_LENGTH,
        ),
        (
            Descriptor::new(0xad4c_0003, 8, SRC, 0, 0),
            xdma::STAT_MAGIC_STOPPED,
        ),
        (last(8, 0x9000_0000, 0), xdma::STAT_READ_ERROR_UR),
    ];
    for (d, status) in cases {
        r.put_desc(DESC, d);
        r.start(Dir::H2c, DESC, 0, CTRL_ALL);
        r.wait(Dir::H2c);
        assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), status, "{d:x?}");
        r.stop(Dir::H2c);
    }
    // Descriptor in unmapped memory, and a misaligned descriptor address.
    for first in [0x9000_0000, DESC + 8] {
        r.start(Dir::H2c, first, 0, CTRL_ALL);
        r.wait(Dir::H2c);
        assert_eq!(
            r.ch(Dir::H2c, xdma::CH_STATUS),
            xdma::STAT_DESC_ERROR_UR,
            "first = {first:#x}"
        );
        r.stop(Dir::H2c);
    }
    assert_eq!(r.dev.snapshot().engine(Dir::H2c).errors, 6);
}

#[test]
fn c2h_write_to_unmapped_host_memory_is_dropped_and_counted() {
    let r = Rig::new();
    assert_eq!(
        r.single(Dir::C2h, 0, 0x9000_0000, 64),
        DONE,
        "a posted write cannot fail"
    );
    let s = r.dev.snapshot();
    assert_eq!(s.stats.dropped_writes, 1);
    assert_eq!(s.engine(Dir::C2h).errors, 0);
}

#[test]
fn status_bits_need_their_ie_bit_but_errors_always_stop() {
    let r = Rig::new();
    r.put_desc(DESC, last(8, SRC, 0));
    r.start(Dir::H2c, DESC, 0, xdma::CTRL_RUN);
    r.wait(Dir::H2c);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        0,
        "stopped, nothing logged"
    );
    r.stop(Dir::H2c);
    r.put_desc(
        DESC,
        Descriptor::new(xdma::desc_control(0, 0), 8, SRC, 0, 0),
    ); // no STOP: would run on
    r.put_desc(DESC + 32, Descriptor::new(0, 8, SRC, 0, 0)); // bad magic
    r.start(
        Dir::H2c,
        DESC,
        1,
        xdma::CTRL_RUN | xdma::CTRL_IE_DESC_COMPLETED,
    );
    r.wait(Dir::H2c);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        0,
        "magic_stopped not enabled: stopped silently"
    );
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 1);
}

#[test]
fn non_incrementing_axi_address() {
    let r = Rig::new();
    r.poke(SRC, &pattern(32, 3));
    r.put_desc(DESC, last(32, SRC, 0x800));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL | xdma::CTRL_NON_INC_ADDR);
    r.wait(Dir::H2c);
    assert_eq!(
        r.dev.peek_bram(0x800, 8),
        pattern(32, 3)[24..],
        "every beat hit the same 8 bytes"
    );
    assert_eq!(r.dev.peek_bram(0x808, 8), vec![0; 8]);
}

#[test]
fn perf_counters_count_beats_and_cycles() {
    let r = Rig::new();
    r.set_ch(
        Dir::H2c,
        xdma::CH_PERF_CTRL,
        xdma::PERF_RUN | xdma::PERF_AUTO,
    );
    assert_eq!(r.single(Dir::H2c, SRC, 0, 4096), DONE);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_PERF_DAT_LO),
        512,
        "4096 bytes in 8-byte beats"
    );
    assert_eq!(r.ch(Dir::H2c, xdma::CH_PERF_DAT_HI), 0);
    assert!(r.ch(Dir::H2c, xdma::CH_PERF_CYC_LO) >= 512);
    r.set_ch(Dir::H2c, xdma::CH_PERF_CTRL, xdma::PERF_CLEAR);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_PERF_DAT_LO), 0);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_PERF_CTRL), 0, "clear is write-only");
    assert_eq!(r.ch(Dir::C2h, xdma::CH_PERF_DAT_LO), 0);
}

#[test]
fn bandwidth_limit_makes_transfers_take_time() {
    let r = Rig::with(DeviceOptions {
        bandwidth_mbps: Some(20),
        ..DeviceOptions::default()
    });
    let t = Instant::now();
    assert_eq!(r.single(Dir::H2c, SRC, 0, 200_000), DONE);
    assert!(
        t.elapsed() >= Duration::from_millis(9),
        "200 kB at 20 MB/s is 10 ms, took {:?}",
        t.elapsed()
    );
}

#[test]
fn cyclic_list_runs_until_run_is_cleared() {
    let r = Rig::new();
    // One COMPLETED descriptor whose `next` points at itself.
    r.put_desc(
        DESC,
        Descriptor::new(xdma::desc_control(0, xdma::DESC_COMPLETED), 8, SRC, 0, DESC),
    );
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    let t = Instant::now();
    while r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT) < 10 {
        assert!(t.elapsed() < Duration::from_secs(5), "cyclic list stalled");
        std::thread::sleep(Duration::from_millis(1));
    }
    r.stop(Dir::H2c);
    r.wait(Dir::H2c);
    assert_eq!(
        r.ch(Dir::H2c, xdma::CH_STATUS),
        xdma::STAT_DESC_COMPLETED | xdma::STAT_IDLE_STOPPED
    );
}

#[test]
fn reset_abandons_a_transfer_in_flight() {
    let r = Rig::new();
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S,
        Dir::H2c.sgdma_common_bit(),
    );
    r.put_desc(DESC, last(8, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    r.dev.reset();
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), 0);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_CONTROL), 0);
    assert_eq!(
        r.bar1(xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL),
        0,
        "halt cleared by reset"
    );
    // The engine works again after the reset, once the driver enables bus mastering again.
    r.set_cfg(
        COMMAND as u64,
        u32::from(COMMAND_MEMORY | COMMAND_MASTER),
        2,
    );
    assert_eq!(r.single(Dir::H2c, SRC, 0, 8), DONE);
}
