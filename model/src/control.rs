//! The control channel: a UNIX stream socket where tests observe the model and make it misbehave.
//!
//! Newline-delimited JSON, one request per line, exactly one response line per request; a connection stays
//! usable after a bad request. Requests:
//!
//! * `{"cmd":"state"}` -> LEDs, GPIO data, scratch, MSI, interrupt and engine counters, DMA maps, faults.
//! * `{"cmd":"inject","fault":NAME,"count":N,"delay_ms":MS,"after":K}` -> arm a fault for the next N transfers
//!   (default 1; 0 = until cleared), after K untouched ones (default 0). `delay_ms` only for `slow`.
//! * `{"cmd":"clear"}` -> disarm all faults. `{"cmd":"reset_counters"}` -> zero the counters.
//! * `{"cmd":"unplug"}` / `{"cmd":"replug"}` -> surprise removal of the card and its re-insertion.
//! * `{"cmd":"leave_running","engine":"h2c"|"c2h","desc":ADDR,"adjacent":N}` -> set Run as a driver that
//!   is gone left it (desc/adjacent default to the SGDMA registers); its fetches count as `stray_dma`.
//! * `{"cmd":"program","image":TEXT,"target":"flash"|"sram"}` -> load a model image as JTAG loads a
//!   bitstream (link down meanwhile; a corrupt image falls back to golden); see `program.rs`.
//! * `{"cmd":"program_fault","corrupt":BOOL}` -> the next `program` treats its image as corrupt.
//! * `{"cmd":"program_state"}` -> which design runs (start/update/golden), programs and fallbacks so far.
//! * `{"cmd":"timing"}` -> timing mode's modeled clock, per-engine counters and parameters;
//!   `"enable":true|false` and `"params":{NAME:N}` switch it (see `timing` and docs/perf.md).
//!
//! Errors: `{"ok":false,"error":"..."}`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use log::{debug, info, warn};
use picoevb_regs::xdma::Dir;
use serde_json::{Value, json};

use crate::device::{Device, Snapshot};
use crate::faults::FaultKind;

/// Longest request line accepted; protects the model from a client that never sends a newline.
const MAX_LINE: usize = 64 * 1024;

/// Handles one request line and returns the response line (without the newline).
pub fn handle_line(device: &Device, line: &str) -> String {
    let response = match serde_json::from_str::<Value>(line.trim()) {
        Ok(request) => handle_request(device, &request).unwrap_or_else(|e| error(&e)),
        Err(e) => error(&format!("bad JSON: {e}")),
    };
    response.to_string()
}

fn error(message: &str) -> Value {
    json!({ "ok": false, "error": message })
}

fn handle_request(device: &Device, request: &Value) -> Result<Value, String> {
    let Some(object) = request.as_object() else {
        return Err("request must be a JSON object".into());
    };
    let cmd = match object.get("cmd") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err("\"cmd\" must be a string".into()),
        None => return Err("missing \"cmd\"".into()),
    };
    match cmd {
        "state" => {
            let mut v = state_json(&device.snapshot());
            v["unplugged"] = json!(device.unplugged());
            Ok(v)
        }
        "inject" => {
            let name = object
                .get("fault")
                .and_then(Value::as_str)
                .ok_or("inject needs \"fault\": a fault name")?;
            let kind = FaultKind::from_name(name).ok_or_else(|| {
                let names: Vec<_> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown fault '{name}' (known: {})", names.join(", "))
            })?;
            let count = optional_u64(object.get("count"), "count")?.unwrap_or(1);
            let delay =
                optional_u64(object.get("delay_ms"), "delay_ms")?.map(Duration::from_millis);
            if delay.is_some() && kind != FaultKind::Slow {
                return Err("\"delay_ms\" only applies to the slow fault".into());
            }
            let after = optional_u64(object.get("after"), "after")?.unwrap_or(0);
            device.inject_after(kind, after, count, delay);
            info!(
                "control: armed {name} for {}",
                if count == 0 {
                    "all transfers".to_string()
                } else {
                    format!("{count} transfer(s)")
                }
            );
            Ok(json!({ "ok": true }))
        }
        "clear" => {
            device.clear_faults();
            Ok(json!({ "ok": true }))
        }
        "reset_counters" => {
            device.reset_counters();
            Ok(json!({ "ok": true }))
        }
        "unplug" | "replug" => {
            device.set_unplugged(cmd == "unplug");
            info!(
                "control: card {}",
                if cmd == "unplug" {
                    "unplugged"
                } else {
                    "plugged back in"
                }
            );
            Ok(json!({ "ok": true }))
        }
        "leave_running" => leave_running(device, object),
        "program" => crate::program::handle(device, object),
        "program_fault" => crate::program::handle_fault(device, object),
        "program_state" => Ok(crate::program::state(device)),
        "timing" => timing(device, object),
        other => Err(format!(
            "unknown command '{other}' (known: state, inject, clear, reset_counters, unplug, replug, \
             leave_running, program, program_fault, program_state, timing)"
        )),
    }
}

/// `{"cmd":"leave_running","engine":"h2c"|"c2h"}`, optionally `"desc":ADDR` and `"adjacent":N`: an engine
/// left running by a driver that is gone (see [`Device::leave_running`]).
fn leave_running(
    device: &Device,
    object: &serde_json::Map<String, Value>,
) -> Result<Value, String> {
    let name = object.get("engine").and_then(Value::as_str);
    let dir = match Dir::ALL.into_iter().find(|&d| Some(engine_name(d)) == name) {
        Some(d) => d,
        None => return Err("leave_running needs \"engine\": \"h2c\" or \"c2h\"".into()),
    };
    let desc = optional_u64(object.get("desc"), "desc")?;
    let adjacent = optional_u64(object.get("adjacent"), "adjacent")?
        .map(|n| {
            u32::try_from(n)
                .ok()
                .filter(|&n| n <= 0x3f)
                .ok_or("\"adjacent\" must be at most 63")
        })
        .transpose()?;
    device.leave_running(dir, desc, adjacent)?;
    info!("control: {dir:?} engine left running");
    Ok(json!({ "ok": true }))
}

/// `{"cmd":"timing"}` reports the modeled clock and counters; `"enable":true|false` turns timing mode on
/// (clock and counters from 0) or off, `"params":{NAME:N,...}` changes parameters of the current ones.
fn timing(device: &Device, object: &serde_json::Map<String, Value>) -> Result<Value, String> {
    let enable = match object.get("enable") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err("\"enable\" must be true or false".into()),
    };
    if let Some(params) = object.get("params") {
        let map = params
            .as_object()
            .ok_or("\"params\" must be an object of timing parameters")?;
        let mut p = device.timing_params();
        for (name, v) in map {
            let v = optional_u64(Some(v), name)?.ok_or(format!("\"{name}\" needs a value"))?;
            crate::timing::set_param(&mut p, name, v)?;
        }
        p.validate()?;
        if enable == Some(false) {
            return Err("\"params\" with \"enable\":false makes no sense".into());
        }
        device.set_timing(Some(p));
    } else if let Some(on) = enable {
        device.set_timing(on.then(|| device.timing_params()));
    }
    Ok(device.timing_json())
}

fn optional_u64(v: Option<&Value>, name: &str) -> Result<Option<u64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("\"{name}\" must be a non-negative integer")),
    }
}

/// An engine's name on the control channel.
fn engine_name(dir: Dir) -> &'static str {
    match dir {
        Dir::H2c => "h2c",
        Dir::C2h => "c2h",
    }
}

/// The `state` response.
pub fn state_json(s: &Snapshot) -> Value {
    let engine = |d: Dir| {
        let e = s.engine(d);
        let host_addr = s.stats.host_addrs.last(d);
        json!({ "runs": e.runs, "descriptors": e.descriptors, "bytes": e.bytes, "errors": e.errors,
                "host_addr": host_addr })
    };
    json!({
        "ok": true,
        "leds": s.leds(),
        "gpio_data": s.gpio_data,
        "scratch": s.scratch,
        "msi_enabled": s.msi_enabled,
        "irqs_msi": s.stats.irqs_msi,
        "irqs_intx": s.stats.irqs_intx,
        "h2c": engine(Dir::H2c),
        "c2h": engine(Dir::C2h),
        "dma_maps": s.dma_maps,
        "dropped_writes": s.stats.dropped_writes,
        "stray_dma": s.stats.stray_dma,
        "bus_waits": s.bus_waits.iter().map(|&d| engine_name(d)).collect::<Vec<_>>(),
        "faults_injected": s.stats.faults_injected,
        "pending_faults": s.pending_faults,
    })
}

/// Serves one connection until the client closes it.
pub fn serve_connection(device: &Device, stream: UnixStream) -> io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = Read::take(&mut reader, MAX_LINE as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let response = if line.len() > MAX_LINE && !line.ends_with(b"\n") {
            // Discard the rest of the over-long line so the next request starts clean.
            let mut rest = Vec::new();
            reader.read_until(b'\n', &mut rest)?;
            error(&format!("request longer than {MAX_LINE} bytes")).to_string()
        } else {
            match std::str::from_utf8(&line) {
                Ok(text) if text.trim().is_empty() => error("empty request").to_string(),
                Ok(text) => handle_line(device, text),
                Err(_) => error("request is not UTF-8").to_string(),
            }
        };
        debug!(
            "control: {} -> {response}",
            String::from_utf8_lossy(&line).trim()
        );
        writer.write_all(response.as_bytes())?;
        writer.write_all(b"\n")?;
    }
}

/// The listening control socket; dropping it removes the socket file (the accept thread ends with the
/// process).
pub struct ControlServer {
    path: PathBuf,
}

impl ControlServer {
    /// Binds `path` and accepts clients on a background thread, one thread per connection.
    pub fn spawn(path: &Path, device: Arc<Device>) -> Result<Self, String> {
        crate::vfio::remove_stale_socket(path)?;
        let listener = UnixListener::bind(path)
            .map_err(|e| format!("cannot listen on control socket {}: {e}", path.display()))?;
        info!("control socket listening on {}", path.display());
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || accept_loop(listener, device))
            .map_err(|e| format!("cannot start the control thread: {e}"))?;
        Ok(Self {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_loop(listener: UnixListener, device: Arc<Device>) {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                let device = Arc::clone(&device);
                let spawned = std::thread::Builder::new()
                    .name("control-client".into())
                    .spawn(move || {
                        if let Err(e) = serve_connection(&device, stream) {
                            debug!("control connection ended: {e}");
                        }
                    });
                if let Err(e) = spawned {
                    warn!("cannot start a control connection thread: {e}");
                }
            }
            Err(e) => warn!("control socket accept failed: {e}"),
        }
    }
}
