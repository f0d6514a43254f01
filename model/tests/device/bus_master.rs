//! Bus mastering (PCI command bit 2): with it off an engine issues no memory request but keeps its state,
//! and goes on when it comes back unless Run was cleared first; an engine a driver that is gone left running
//! (`leave_running`) counts every descriptor it fetches as stray DMA.

use std::time::Duration;

use picoevb_model::DeviceOptions;
use picoevb_model::config_space::{COMMAND, COMMAND_MASTER, COMMAND_MEMORY};
use picoevb_model::control::handle_line;
use picoevb_regs::xdma::{self, Dir};
use serde_json::{Value, json};

use crate::common::*;

fn master(r: &Rig, on: bool) {
    let bits = COMMAND_MEMORY | if on { COMMAND_MASTER } else { 0 };
    r.set_cfg(COMMAND as u64, u32::from(bits), 2);
}

/// Still busy, nothing moved, the engine reported as holding its requests.
fn assert_held(r: &Rig, dir: Dir) {
    assert!(!r.dev.wait_idle(dir, Duration::from_millis(100)));
    assert_eq!(r.ch(dir, xdma::CH_STATUS), xdma::STAT_BUSY);
    assert_eq!(r.ch(dir, xdma::CH_COMPLETED_COUNT), 0);
    assert_eq!(r.dev.snapshot().bus_waits, [dir]);
}

#[test]
fn held_while_bus_mastering_is_off_then_resumes() {
    let r = Rig::new();
    let data = pattern(256, 0x21);
    r.poke(SRC, &data);
    master(&r, false);
    r.put_desc(DESC, last(256, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    assert_held(&r, Dir::H2c);
    assert_eq!(r.dev.peek_bram(0, 4), [0; 4]);
    master(&r, true);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), DONE);
    assert_eq!(r.dev.peek_bram(0, 256), data);
    assert!(r.dev.snapshot().bus_waits.is_empty());
}

#[test]
fn run_cleared_while_held_stops_without_dma() {
    let r = Rig::new();
    r.poke(SRC, &pattern(256, 0x22));
    master(&r, false);
    r.put_desc(DESC, last(256, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    assert_held(&r, Dir::H2c);
    r.stop(Dir::H2c);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), xdma::STAT_IDLE_STOPPED);
    master(&r, true);
    assert_eq!(
        r.dev.peek_bram(0, 4),
        [0; 4],
        "no data after bus mastering came back"
    );
    let s = r.dev.snapshot();
    assert_eq!(
        (s.engine(Dir::H2c).descriptors, s.engine(Dir::H2c).errors),
        (0, 0)
    );
}

#[test]
fn off_mid_descriptor_holds_the_data_phase() {
    // 1 MB/s: each 64 KiB piece of the 256 KiB descriptor takes about 65 ms.
    let r = Rig::with(DeviceOptions {
        bandwidth_mbps: Some(1),
        ..DeviceOptions::default()
    });
    r.put_desc(DESC, last(256 * 1024, SRC, 0));
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    std::thread::sleep(Duration::from_millis(20));
    master(&r, false);
    // Clearing Run does not cut a descriptor short: the engine stays busy, holding its next read.
    r.stop(Dir::H2c);
    assert!(!r.dev.wait_idle(Dir::H2c, Duration::from_millis(300)));
    assert_eq!(r.dev.snapshot().bus_waits, [Dir::H2c]);
    master(&r, true);
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_COMPLETED_COUNT), 1);
    assert_eq!(r.dev.snapshot().engine(Dir::H2c).bytes, 256 * 1024);
}

fn ask(r: &Rig, line: &str) -> Value {
    serde_json::from_str(&handle_line(&r.dev, line)).expect("responses are JSON")
}

#[test]
fn left_running_engine_stopped_before_bus_mastering_does_no_dma() {
    let r = Rig::new();
    // The last chain a driver programmed, then it let go of the card (bus mastering off).
    r.poke(SRC, &pattern(256, 0x23));
    assert_eq!(r.single(Dir::H2c, SRC, 0, 256), DONE);
    r.stop(Dir::H2c);
    r.dev.reset_counters();
    master(&r, false);
    assert_eq!(
        ask(&r, r#"{"cmd":"leave_running","engine":"h2c"}"#),
        json!({"ok": true})
    );
    assert_held(&r, Dir::H2c);
    assert_eq!(ask(&r, r#"{"cmd":"state"}"#)["bus_waits"], json!(["h2c"]));
    // What probe must do: stop it, then enable bus mastering.
    r.stop(Dir::H2c);
    r.wait(Dir::H2c);
    master(&r, true);
    let s = r.dev.snapshot();
    assert_eq!(s.stats.stray_dma, 0);
    assert_eq!(s.engine(Dir::H2c).runs, 1);
    assert_eq!(s.engine(Dir::H2c).descriptors, 0);
}

#[test]
fn left_running_engine_fetches_as_soon_as_bus_mastering_is_on() {
    let r = Rig::new();
    r.put_desc(DESC + 0x100, last(64, SRC, 0));
    master(&r, false);
    assert_eq!(
        ask(
            &r,
            r#"{"cmd":"leave_running","engine":"c2h","desc":268435712,"adjacent":0}"#
        ),
        json!({"ok": true})
    );
    assert_held(&r, Dir::C2h);
    master(&r, true);
    // The config write returns only after the held engine went on: no later MMIO write can overtake it.
    assert_eq!(r.dev.snapshot().stats.stray_dma, 1);
    r.stop(Dir::C2h);
    r.wait(Dir::C2h);
    assert_eq!(ask(&r, r#"{"cmd":"state"}"#)["stray_dma"], 1);
}

#[test]
fn leave_running_refuses_bad_requests() {
    let r = Rig::new();
    let err = |line: &str| {
        ask(&r, line)["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(err(r#"{"cmd":"leave_running"}"#).contains("missing field `engine`"));
    assert!(err(r#"{"cmd":"leave_running","engine":"x"}"#).contains("expected `h2c` or `c2h`"));
    assert!(err(r#"{"cmd":"leave_running","engine":"h2c","adjacent":64}"#).contains("at most 63"));
    assert!(err(r#"{"cmd":"leave_running","engine":"h2c","desc":-1}"#).contains("expected u64"));
    master(&r, false);
    assert_eq!(
        ask(&r, r#"{"cmd":"leave_running","engine":"h2c"}"#)["ok"],
        true
    );
    assert!(err(r#"{"cmd":"leave_running","engine":"h2c"}"#).contains("already running"));
    r.dev.set_unplugged(true);
    assert!(err(r#"{"cmd":"leave_running","engine":"c2h"}"#).contains("unplugged"));
}

#[test]
fn an_engine_that_waits_for_more_than_the_bus_lets_the_config_write_go() {
    let r = Rig::new();
    r.put_desc(DESC, last(64, SRC, 0));
    // Fetch halted and bus mastering off: held for both.
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S,
        Dir::H2c.sgdma_common_bit(),
    );
    master(&r, false);
    r.start(Dir::H2c, DESC, 0, CTRL_ALL);
    assert_held(&r, Dir::H2c);
    let t = std::time::Instant::now();
    master(&r, true);
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "the config write waited {:?} for an engine that is still halted",
        t.elapsed()
    );
    assert!(r.dev.snapshot().bus_waits.is_empty());
    assert!(
        !r.dev.wait_idle(Dir::H2c, Duration::from_millis(50)),
        "still halted"
    );
    r.set_bar1(
        xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C,
        Dir::H2c.sgdma_common_bit(),
    );
    r.wait(Dir::H2c);
    assert_eq!(r.ch(Dir::H2c, xdma::CH_STATUS), DONE);
}
