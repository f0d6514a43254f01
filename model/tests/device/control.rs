//! The control protocol: parsing, responses, and a real socket session.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use picoevb_model::control::{ControlServer, handle_line};
use picoevb_model::{Device, DeviceOptions, FakeGuestMemory, RecordingSink};
use picoevb_regs::gpio;
use picoevb_regs::xdma::Dir;
use serde_json::{Value, json};

use crate::common::*;

fn ask(r: &Rig, line: &str) -> Value {
    serde_json::from_str(&handle_line(&r.dev, line)).expect("responses are JSON")
}

#[test]
fn state_reports_everything() {
    let r = Rig::new();
    r.dev.set_msi_vectors(1);
    r.set_bar0(gpio::GPIO_DATA, 0x6);
    r.set_bar0(0x81c, 0x42);
    r.single(Dir::H2c, SRC, 0, 100);
    r.dev.inject(picoevb_model::FaultKind::Hang, 0, None);
    let s = ask(&r, r#"{"cmd":"state"}"#);
    assert_eq!(
        s,
        json!({
            "ok": true,
            "leds": 1,
            "gpio_data": 6,
            "scratch": 0x42,
            "msi_enabled": true,
            "irqs_msi": 0,
            "irqs_intx": 0,
            "h2c": { "runs": 1, "descriptors": 1, "bytes": 100, "errors": 0, "writebacks": 0, "host_addr": SRC },
            "c2h": { "runs": 0, "descriptors": 0, "bytes": 0, "errors": 0, "writebacks": 0, "host_addr": null },
            "dma_maps": 1,
            "dropped_writes": 0,
            "stray_dma": 0,
            "bus_waits": [],
            "faults_injected": 0,
            "pending_faults": ["hang"],
            "unplugged": false,
        })
    );
}

#[test]
fn inject_clear_and_reset_counters() {
    let r = Rig::new();
    assert_eq!(
        ask(&r, r#"{"cmd":"inject","fault":"bad_magic"}"#),
        json!({"ok": true})
    );
    assert_eq!(
        ask(
            &r,
            r#"{"cmd":"inject","fault":"slow","count":0,"delay_ms":5}"#
        ),
        json!({"ok": true})
    );
    assert_eq!(
        ask(&r, r#"{"cmd":"state"}"#)["pending_faults"],
        json!(["bad_magic", "slow"])
    );
    r.single(Dir::C2h, 0, DST, 8);
    let s = ask(&r, r#"{"cmd":"state"}"#);
    assert_eq!(
        (s["faults_injected"].as_u64(), s["c2h"]["errors"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(s["pending_faults"], json!(["slow"]));
    assert_eq!(ask(&r, r#"{"cmd":"clear"}"#), json!({"ok": true}));
    assert_eq!(ask(&r, r#"{"cmd":"state"}"#)["pending_faults"], json!([]));
    assert_eq!(ask(&r, r#"{"cmd":"reset_counters"}"#), json!({"ok": true}));
    let s = ask(&r, r#"{"cmd":"state"}"#);
    assert_eq!(
        (s["faults_injected"].as_u64(), s["c2h"]["runs"].as_u64()),
        (Some(0), Some(0))
    );
}

#[test]
fn every_fault_name_is_accepted() {
    let r = Rig::new();
    for name in [
        "corrupt_data",
        "bad_magic",
        "read_error",
        "write_error",
        "desc_error",
        "hang",
        "drop_irq",
        "slow",
    ] {
        let line = format!(r#"{{"cmd":"inject","fault":"{name}","count":1}}"#);
        assert_eq!(ask(&r, &line), json!({"ok": true}), "{name}");
    }
    assert_eq!(
        ask(&r, r#"{"cmd":"state"}"#)["pending_faults"]
            .as_array()
            .map(Vec::len),
        Some(8)
    );
}

#[test]
fn errors_are_reported_not_fatal() {
    let r = Rig::new();
    let err = |line: &str| {
        let v = ask(&r, line);
        assert_eq!(v["ok"], json!(false), "{line}");
        v["error"].as_str().expect("error message").to_string()
    };
    assert!(err("{not json").starts_with("bad request: not JSON"));
    assert!(err("[1,2]").contains("JSON object"));
    assert!(err(r#"{"command":"state"}"#).contains("missing field `cmd`"));
    assert!(err(r#"{"cmd":7}"#).contains("invalid type: integer `7`"));
    assert!(
        err(r#"{"cmd":"reboot"}"#).contains("unknown variant `reboot`, expected one of `state`")
    );
    assert!(err(r#"{"cmd":"inject"}"#).contains("missing field `fault`"));
    assert!(err(r#"{"cmd":"state","verbose":true}"#).contains("unknown field `verbose`"));
    assert!(err(r#"{"cmd":"inject","fault":"gremlins"}"#).contains("unknown fault 'gremlins'"));
    assert!(err(r#"{"cmd":"inject","fault":"hang","count":-1}"#).contains("expected u64"));
    assert!(
        err(r#"{"cmd":"inject","fault":"hang","delay_ms":5}"#)
            .contains("only applies to the slow fault")
    );
    assert_eq!(ask(&r, r#"{"cmd":"unplug"}"#)["ok"], json!(true));
    assert_eq!(ask(&r, r#"{"cmd":"state"}"#)["unplugged"], json!(true));
    assert_eq!(ask(&r, r#"{"cmd":"replug"}"#)["ok"], json!(true));
    assert_eq!(ask(&r, r#"{"cmd":"state"}"#)["unplugged"], json!(false));
    assert_eq!(
        ask(&r, r#"{"cmd":"state"}"#)["pending_faults"],
        json!([]),
        "failed injects armed nothing"
    );
}

#[test]
fn socket_session_one_response_per_line() {
    let dir = std::env::temp_dir().join(format!("picoevb-model-ctl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("control.sock");
    let mem = Arc::new(FakeGuestMemory::new());
    let dev = Arc::new(Device::new(
        DeviceOptions::default(),
        mem,
        Arc::new(RecordingSink::new()),
    ));
    let server = ControlServer::spawn(&path, dev.clone()).unwrap();
    dev.write32(0, 0, 0x3);

    for _ in 0..2 {
        // Several clients over time.
        let stream = UnixStream::connect(&path).unwrap();
        let mut w = stream.try_clone().unwrap();
        let mut lines = BufReader::new(stream).lines();
        w.write_all(b"{\"cmd\":\"state\"}\n garbage \n\n{\"cmd\":\"inject\",\"fault\":\"hang\"}\n{\"cmd\":\"clear\"}\r\n")
            .unwrap();
        let mut next = || serde_json::from_str::<Value>(&lines.next().unwrap().unwrap()).unwrap();
        let state = next();
        assert_eq!(
            (
                state["ok"].clone(),
                state["leds"].clone(),
                state["dma_maps"].clone()
            ),
            (json!(true), json!(4), json!(0))
        );
        assert_eq!(next()["ok"], json!(false), "garbage");
        assert_eq!(next()["error"], json!("empty request"));
        assert_eq!(next(), json!({"ok": true}));
        assert_eq!(next(), json!({"ok": true}));
    }
    drop(server);
    assert!(!path.exists(), "socket removed on drop");
    let _ = std::fs::remove_dir(&dir);
}
