//! Timing mode seen from outside: a driver's register sequence advances the modeled clock by exactly what
//! the link arithmetic says, and the control socket turns it on, reports it and refuses bad parameters.

use picoevb_model::DeviceOptions;
use picoevb_model::control::handle_line;
use picoevb_model::timing::Params;
use picoevb_regs::xdma::{self, Dir};
use serde_json::Value;

use crate::common::*;

fn ask(r: &Rig, line: &str) -> Value {
    serde_json::from_str(&handle_line(&r.dev, line)).unwrap()
}

/// Timing on with the PCIe reset profile (MPS from the device control register, which resets to 128).
fn timed() -> Rig {
    timed_with(Params::pcie_reset())
}

fn timed_with(p: Params) -> Rig {
    Rig::with(DeviceOptions {
        timing: Some(p),
        ..DeviceOptions::default()
    })
}

#[test]
fn c2h_64k_advances_the_clock_by_the_formula() {
    let r = timed();
    r.dev.write32(picoevb_regs::pci::BAR_DMA, 0, 0); // one posted write: 60 ns
    let status = r.single(Dir::C2h, 0, DST, 65536); // 4 writes to start, then 1 status read
    assert_eq!(status & xdma::STAT_DESC_STOPPED, xdma::STAT_DESC_STOPPED);
    let t = ask(&r, r#"{"cmd":"timing"}"#);
    // 5 writes, the run (one descriptor fetch 1104 ns, 512 TLPs of 128 + 24 bytes at 2 ns), the read.
    assert_eq!(t["clock_ns"], 5 * 60 + 1104 + (65536 + 512 * 24) * 2 + 1000);
    assert_eq!(t["c2h"]["runs"], 1);
    assert_eq!(t["c2h"]["descriptors"], 1);
    assert_eq!(t["c2h"]["data_tlps"], 512);
    assert_eq!(t["c2h"]["busy_ns"], 1104 + 155_648);
    assert_eq!(t["h2c"]["runs"], 0);
    let ceiling = t["ceiling_mbps"]["c2h"].as_f64().unwrap();
    assert!((ceiling - 421.05).abs() < 0.01, "{ceiling}");
}

#[test]
fn mps_comes_from_the_device_control_register() {
    let r = timed();
    // devctl MPS field [7:5] = 1: 256 bytes.
    let at = picoevb_model::config_space::PCIE_CAP as u64 + 8;
    let devctl = r.cfg(at, 2) & !0xe0 | 0x20;
    r.set_cfg(at, devctl, 2);
    r.single(Dir::C2h, 0, DST, 65536);
    let t = ask(&r, r#"{"cmd":"timing"}"#);
    assert_eq!(t["c2h"]["data_tlps"], 256);
}

#[test]
fn the_jetson_profile_runs_at_mps_256_whatever_the_guest_programmed() {
    let r = timed_with(Params::default());
    // The device control register keeps its reset MPS, 128 bytes.
    r.single(Dir::C2h, 0, DST, 65536);
    let t = ask(&r, r#"{"cmd":"timing"}"#);
    assert_eq!(t["c2h"]["data_tlps"], 256);
    assert_eq!(t["params"]["mps"], 256);
    assert_eq!(t["params"]["os_payload"], 0);
}

#[test]
fn off_by_default_and_switched_by_the_control_socket() {
    let r = Rig::new();
    r.single(Dir::H2c, SRC, 0, 4096);
    r.stop(Dir::H2c);
    let t = ask(&r, r#"{"cmd":"timing"}"#);
    assert_eq!(
        (t["enabled"].clone(), t["clock_ns"].clone()),
        (false.into(), 0.into())
    );
    assert_eq!(t["h2c"]["runs"], 0);
    let t = ask(&r, r#"{"cmd":"timing","params":{"irq_latency_ns":2000}}"#);
    assert_eq!(t["enabled"], true);
    assert_eq!(t["params"]["irq_latency_ns"], 2000);
    r.single(Dir::H2c, SRC, 0, 4096);
    let t = ask(&r, r#"{"cmd":"timing"}"#);
    assert_eq!(t["h2c"]["runs"], 1);
    assert_eq!(t["h2c"]["request_tlps"], 8, "MRRS 512");
    assert_eq!(t["h2c"]["data_tlps"], 64, "64-byte completions");
    assert_eq!(ask(&r, r#"{"cmd":"reset_counters"}"#)["ok"], true);
    assert_eq!(ask(&r, r#"{"cmd":"timing"}"#)["h2c"]["runs"], 0);
    assert_eq!(
        ask(&r, r#"{"cmd":"timing","enable":false}"#)["enabled"],
        false
    );
    let err = |line: &str| ask(&r, line)["error"].as_str().unwrap().to_string();
    assert!(err(r#"{"cmd":"timing","enable":1}"#).contains("expected a boolean"));
    assert!(err(r#"{"cmd":"timing","params":{"mps":100}}"#).contains("power of two"));
    assert!(err(r#"{"cmd":"timing","params":{"warp":1}}"#).contains("unknown timing parameter"));
    assert!(err(r#"{"cmd":"timing","params":{"mps":-1}}"#).contains("expected u64"));
    assert!(err(r#"{"cmd":"timing","params":[]}"#).contains("expected a map"));
    // A refused request changed nothing.
    assert_eq!(ask(&r, r#"{"cmd":"timing"}"#)["enabled"], false);
}

/// In timing mode the performance monitor counts the modeled clock: after a run, its cycles at the AXI
/// clock are the run's modeled busy time (the `timing` counters'), to the cycle, so a driver timing with
/// the card's clock measures what the model says the link took. Seen failing before the monitor followed
/// the modeled clock (it counted the model's wall time: 9193 cycles, not 19594).
#[test]
fn the_perf_monitor_counts_modeled_time() {
    let r = timed();
    for dir in Dir::ALL {
        r.set_ch(dir, xdma::CH_PERF_CTRL, xdma::PERF_RUN | xdma::PERF_AUTO);
    }
    r.single(Dir::C2h, 0, DST, 65536);
    r.single(Dir::H2c, SRC, 0, 4096);
    let t = ask(&r, r#"{"cmd":"timing"}"#);
    for (dir, name) in [(Dir::C2h, "c2h"), (Dir::H2c, "h2c")] {
        let cycles = u64::from(r.ch(dir, xdma::CH_PERF_CYC_LO));
        let busy = t[name]["busy_ns"].as_u64().unwrap();
        assert!(
            busy > 0 && busy - cycles * xdma::AXI_CLOCK_NS < xdma::AXI_CLOCK_NS,
            "{name}: {cycles} cycles, {busy} ns"
        );
    }
    assert_eq!(
        u64::from(r.ch(Dir::C2h, xdma::CH_PERF_CYC_LO)),
        (1104 + 155_648) / 8
    );
}
