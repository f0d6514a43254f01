//! Requests to the FPGA model's control socket, relayed by the host harness over the guest's second serial
//! port: the guest writes `RPC <json>\n`, the harness answers with the model's one-line JSON response.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The serial port QEMU connects to the harness (`-serial unix:RUN/rpc.sock`, the second `-serial`).
/// On arm64's virt machine that is the second PL011.
#[cfg(not(target_arch = "aarch64"))]
pub const DEFAULT_TTY: &str = "/dev/ttyS1";
#[cfg(target_arch = "aarch64")]
pub const DEFAULT_TTY: &str = "/dev/ttyAMA1";
/// How long to wait for one answer; TCG is slow, the model is not.
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Rpc {
    tty: File,
    /// Bytes read past the last answer line.
    pending: Vec<u8>,
}

/// Counters of one DMA engine, from the model's `state`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Engine {
    pub runs: u64,
    pub descriptors: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// The model's answer to `{"cmd":"state"}`.
#[derive(Clone, Debug, Default)]
pub struct ModelState {
    pub leds: u32,
    pub gpio_data: u32,
    /// Parsed to hold the model to the protocol; no test needs it yet.
    #[allow(dead_code)]
    pub scratch: u32,
    pub msi_enabled: bool,
    pub irqs_msi: u64,
    pub irqs_intx: u64,
    pub h2c: Engine,
    pub c2h: Engine,
    pub dma_maps: u64,
    pub dropped_writes: u64,
    /// Descriptors fetched by an engine left running (`leave_running`) rather than started by the driver.
    pub stray_dma: u64,
    /// Engines holding a memory request until bus mastering is enabled ("h2c", "c2h").
    pub bus_waits: Vec<Value>,
    pub faults_injected: u64,
    pub pending_faults: Vec<Value>,
}

impl Rpc {
    /// Opens the port and puts it in raw mode: no echo, no line editing, no CR/LF translation.
    pub fn open(path: &str) -> Result<Self, String> {
        let tty = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(path)
            .map_err(|e| format!("open {path}: {e}"))?;
        let fd = tty.as_raw_fd();
        // SAFETY: termios is plain old data; tcgetattr fills it completely before we use it.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is an open tty and `t` a valid termios for the calls below.
        let ok = unsafe {
            libc::tcgetattr(fd, &mut t) == 0 && {
                libc::cfmakeraw(&mut t);
                t.c_cc[libc::VMIN] = 1;
                t.c_cc[libc::VTIME] = 0;
                // Set the speed in c_cflag directly: libc binds cfset*speed to versioned glibc symbols that
                // a static link cannot resolve.
                t.c_cflag = (t.c_cflag & !libc::CBAUD) | libc::B115200;
                libc::tcsetattr(fd, libc::TCSANOW, &t) == 0
                    && libc::tcflush(fd, libc::TCIOFLUSH) == 0
            }
        };
        if !ok {
            return Err(format!(
                "raw mode on {path}: {}",
                io::Error::last_os_error()
            ));
        }
        Ok(Rpc {
            tty,
            pending: Vec::new(),
        })
    }

    /// Sends one request and returns the model's response; `{"ok":false}` becomes an error.
    pub fn call(&mut self, req: &Value) -> Result<Value, String> {
        let line = format!("RPC {req}\n");
        self.tty
            .write_all(line.as_bytes())
            .map_err(|e| format!("rpc write: {e}"))?;
        let answer = self.read_answer().map_err(|e| format!("rpc {req}: {e}"))?;
        let v: Value = serde_json::from_str(&answer)
            .map_err(|e| format!("rpc {req}: bad answer {answer:?}: {e}"))?;
        if v["ok"] == Value::Bool(true) {
            Ok(v)
        } else {
            Err(format!("rpc {req}: model error: {}", v["error"]))
        }
    }

    /// Reads until a line that starts with `{`; anything else on the line is noise and skipped.
    fn read_answer(&mut self) -> io::Result<String> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=nl).collect();
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.starts_with('{') {
                    return Ok(text.to_string());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no answer from the harness",
                ));
            }
            let mut pfd = libc::pollfd {
                fd: self.tty.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let n =
                unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                continue;
            }
            let mut buf = [0u8; 512];
            let got = self.tty.read(&mut buf)?;
            self.pending.extend_from_slice(&buf[..got]);
        }
    }

    pub fn state(&mut self) -> Result<ModelState, String> {
        let v = self.call(&json!({"cmd": "state"}))?;
        ModelState::from_json(&v)
    }

    /// Injects `fault` into the next `count` engine runs (0: until cleared).
    pub fn inject(&mut self, fault: &str, count: u64) -> Result<(), String> {
        self.call(&json!({"cmd": "inject", "fault": fault, "count": count}))
            .map(|_| ())
    }

    /// Injects `fault` into `count` engine runs after letting `after` runs pass (a fault in the middle of a
    /// request made of several runs).
    pub fn inject_after(&mut self, fault: &str, after: u64, count: u64) -> Result<(), String> {
        self.call(&json!({"cmd": "inject", "fault": fault, "count": count, "after": after}))
            .map(|_| ())
    }

    /// Injects the `slow` fault, which alone takes a delay.
    pub fn inject_slow(&mut self, count: u64, delay_ms: u64) -> Result<(), String> {
        self.call(&json!({"cmd": "inject", "fault": "slow", "count": count, "delay_ms": delay_ms}))
            .map(|_| ())
    }

    /// Sets Run on `engine` ("h2c" or "c2h") at the chain the SGDMA registers still point to, as a driver
    /// unbound mid-transfer leaves it.
    pub fn leave_running(&mut self, engine: &str) -> Result<(), String> {
        self.call(&json!({"cmd": "leave_running", "engine": engine}))
            .map(|_| ())
    }

    pub fn clear(&mut self) -> Result<(), String> {
        self.call(&json!({"cmd": "clear"})).map(|_| ())
    }

    pub fn reset_counters(&mut self) -> Result<(), String> {
        self.call(&json!({"cmd": "reset_counters"})).map(|_| ())
    }
}

fn field_u64(v: &Value, key: &str) -> Result<u64, String> {
    v[key]
        .as_u64()
        .ok_or_else(|| format!("model state: field {key:?} missing or not a number in {v}"))
}

fn field_u32(v: &Value, key: &str) -> Result<u32, String> {
    u32::try_from(field_u64(v, key)?).map_err(|_| format!("model state: {key:?} does not fit u32"))
}

impl Engine {
    fn from_json(v: &Value, key: &str) -> Result<Self, String> {
        let e = &v[key];
        if !e.is_object() {
            return Err(format!("model state: {key:?} missing in {v}"));
        }
        Ok(Engine {
            runs: field_u64(e, "runs")?,
            descriptors: field_u64(e, "descriptors")?,
            bytes: field_u64(e, "bytes")?,
            errors: field_u64(e, "errors")?,
        })
    }
}

impl ModelState {
    /// Parses a state answer; every field of the control protocol must be present.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        Ok(ModelState {
            leds: field_u32(v, "leds")?,
            gpio_data: field_u32(v, "gpio_data")?,
            scratch: field_u32(v, "scratch")?,
            msi_enabled: v["msi_enabled"]
                .as_bool()
                .ok_or_else(|| format!("model state: msi_enabled missing in {v}"))?,
            irqs_msi: field_u64(v, "irqs_msi")?,
            irqs_intx: field_u64(v, "irqs_intx")?,
            h2c: Engine::from_json(v, "h2c")?,
            c2h: Engine::from_json(v, "c2h")?,
            dma_maps: field_u64(v, "dma_maps")?,
            dropped_writes: field_u64(v, "dropped_writes")?,
            stray_dma: field_u64(v, "stray_dma")?,
            bus_waits: v["bus_waits"]
                .as_array()
                .cloned()
                .ok_or_else(|| format!("model state: bus_waits missing in {v}"))?,
            faults_injected: field_u64(v, "faults_injected")?,
            pending_faults: v["pending_faults"].as_array().cloned().unwrap_or_default(),
        })
    }

    pub fn irqs(&self) -> u64 {
        self.irqs_msi + self.irqs_intx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state() {
        let v: Value = serde_json::from_str(
            r#"{"ok":true,"leds":5,"gpio_data":2,"scratch":0,"msi_enabled":true,"irqs_msi":3,"irqs_intx":0,
            "h2c":{"runs":1,"descriptors":2,"bytes":65536,"errors":0},
            "c2h":{"runs":0,"descriptors":0,"bytes":0,"errors":0},
            "dma_maps":4,"dropped_writes":0,"stray_dma":0,"bus_waits":[],"faults_injected":0,
            "pending_faults":[]}"#,
        )
        .unwrap();
        let s = ModelState::from_json(&v).unwrap();
        assert_eq!(
            (s.leds, s.gpio_data, s.irqs(), s.h2c.bytes),
            (5, 2, 3, 65536)
        );
        let mut v = v;
        v.as_object_mut().unwrap().remove("c2h");
        assert!(ModelState::from_json(&v).unwrap_err().contains("c2h"));
    }
}
