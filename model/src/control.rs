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
//! Errors: `{"ok":false,"error":"..."}`. The requests and replies are the types of `crates/model-control`,
//! which every client uses too.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gdr_model_control::{
    Done, Engine, EngineCounters, MAX_LINE, Request, StateReply, error_line, ok_line,
};
use log::{debug, info, warn};
use picoevb_regs::xdma::Dir;

use crate::device::{Device, Snapshot};
use crate::faults::FaultKind;

/// Handles one request line and returns the response line (without the newline).
pub fn handle_line(device: &Device, line: &str) -> String {
    Request::from_line(line)
        .and_then(|request| handle_request(device, request))
        .unwrap_or_else(|e| error_line(&e))
}

fn handle_request(device: &Device, request: Request) -> Result<String, String> {
    match request {
        Request::State {} => {
            let mut reply = state_reply(&device.snapshot());
            reply.unplugged = device.unplugged();
            Ok(ok_line(&reply))
        }
        Request::Inject {
            fault,
            count,
            delay_ms,
            after,
        } => {
            let kind = FaultKind::from_name(&fault).ok_or_else(|| {
                let names: Vec<_> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown fault '{fault}' (known: {})", names.join(", "))
            })?;
            if delay_ms.is_some() && kind != FaultKind::Slow {
                return Err("\"delay_ms\" only applies to the slow fault".into());
            }
            device.inject_after(kind, after, count, delay_ms.map(Duration::from_millis));
            info!(
                "control: armed {fault} for {}",
                if count == 0 {
                    "all transfers".to_string()
                } else {
                    format!("{count} transfer(s)")
                }
            );
            Ok(ok_line(&Done {}))
        }
        Request::Clear {} => {
            device.clear_faults();
            Ok(ok_line(&Done {}))
        }
        Request::ResetCounters {} => {
            device.reset_counters();
            Ok(ok_line(&Done {}))
        }
        Request::Unplug {} | Request::Replug {} => {
            let unplug = request == Request::Unplug {};
            device.set_unplugged(unplug);
            info!(
                "control: card {}",
                if unplug {
                    "unplugged"
                } else {
                    "plugged back in"
                }
            );
            Ok(ok_line(&Done {}))
        }
        Request::LeaveRunning {
            engine,
            desc,
            adjacent,
        } => {
            if adjacent.is_some_and(|n| n > 0x3f) {
                return Err("\"adjacent\" must be at most 63".into());
            }
            let dir = dir_of(engine);
            device.leave_running(dir, desc, adjacent)?;
            info!("control: {dir:?} engine left running");
            Ok(ok_line(&Done {}))
        }
        Request::Program { image, target } => {
            crate::program::handle(device, &image, target).map(|r| ok_line(&r))
        }
        Request::ProgramFault { corrupt } => {
            crate::program::handle_fault(device, corrupt);
            Ok(ok_line(&Done {}))
        }
        Request::ProgramState {} => Ok(ok_line(&crate::program::state(device))),
        Request::Timing { enable, params } => timing(device, enable, params).map(|r| ok_line(&r)),
    }
}

/// `timing`: reports the modeled clock and counters; `enable` turns timing mode on (clock and counters
/// from 0) or off, `params` changes parameters of the current ones.
fn timing(
    device: &Device,
    enable: Option<bool>,
    params: Option<std::collections::BTreeMap<String, u64>>,
) -> Result<gdr_model_control::TimingReply, String> {
    if let Some(map) = params {
        let mut p = device.timing_params();
        for (name, v) in map {
            crate::timing::set_param(&mut p, &name, v)?;
        }
        p.validate()?;
        if enable == Some(false) {
            return Err("\"params\" with \"enable\":false makes no sense".into());
        }
        device.set_timing(Some(p));
    } else if let Some(on) = enable {
        device.set_timing(on.then(|| device.timing_params()));
    }
    Ok(device.timing_reply())
}

/// An engine's direction from its name on the channel.
fn dir_of(engine: Engine) -> Dir {
    match engine {
        Engine::H2c => Dir::H2c,
        Engine::C2h => Dir::C2h,
    }
}

/// An engine's name on the control channel.
fn engine_of(dir: Dir) -> Engine {
    match dir {
        Dir::H2c => Engine::H2c,
        Dir::C2h => Engine::C2h,
    }
}

/// The `state` reply (`unplugged` is the device's, filled in by the caller).
pub fn state_reply(s: &Snapshot) -> StateReply {
    let engine = |d: Dir| {
        let e = s.engine(d);
        EngineCounters {
            runs: e.runs,
            descriptors: e.descriptors,
            bytes: e.bytes,
            errors: e.errors,
            writebacks: e.writebacks,
            host_addr: s.stats.host_addrs.last(d),
        }
    };
    StateReply {
        leds: s.leds(),
        gpio_data: s.gpio_data,
        scratch: s.scratch,
        msi_enabled: s.msi_enabled,
        irqs_msi: s.stats.irqs_msi,
        irqs_intx: s.stats.irqs_intx,
        h2c: engine(Dir::H2c),
        c2h: engine(Dir::C2h),
        dma_maps: s.dma_maps,
        dropped_writes: s.stats.dropped_writes,
        stray_dma: s.stats.stray_dma,
        bus_waits: s.bus_waits.iter().map(|&d| engine_of(d)).collect(),
        faults_injected: s.stats.faults_injected,
        pending_faults: s.pending_faults.iter().map(|n| n.to_string()).collect(),
        unplugged: false,
    }
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
            error_line(&format!("request longer than {MAX_LINE} bytes"))
        } else {
            match std::str::from_utf8(&line) {
                Ok(text) if text.trim().is_empty() => error_line("empty request"),
                Ok(text) => handle_line(device, text),
                Err(_) => error_line("request is not UTF-8"),
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
