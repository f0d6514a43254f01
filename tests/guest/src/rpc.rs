//! Requests to the FPGA model's control socket, relayed by the host harness over the guest's second serial
//! port: the guest writes `RPC <json>\n`, the harness answers with the model's one-line JSON response.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use gdr_model_control::{Done, Engine, Request, StateReply, TimingReply, parse_reply};
use serde::de::DeserializeOwned;

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

/// The model's answer to `state`, as the control protocol crate defines it.
pub type ModelState = StateReply;

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

    /// Sends one request and reads the model's reply as `T`; a refusal is an error.
    pub fn call<T: DeserializeOwned>(&mut self, req: &Request) -> Result<T, String> {
        let req = req.to_line();
        let line = format!("RPC {req}\n");
        self.tty
            .write_all(line.as_bytes())
            .map_err(|e| format!("rpc write: {e}"))?;
        let answer = self.read_answer().map_err(|e| format!("rpc {req}: {e}"))?;
        parse_reply(&answer).map_err(|e| format!("rpc {req}: model: {e}"))
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
        self.call(&Request::State {})
    }

    /// Timing mode's clock, counters and parameters.
    pub fn timing(&mut self) -> Result<TimingReply, String> {
        self.call(&Request::Timing {
            enable: None,
            params: None,
        })
    }

    /// Turns timing mode on with the current parameters (clock and counters from 0).
    pub fn timing_on(&mut self) -> Result<TimingReply, String> {
        self.call(&Request::Timing {
            enable: Some(true),
            params: None,
        })
    }

    /// Turns timing mode off.
    pub fn timing_off(&mut self) -> Result<TimingReply, String> {
        self.call(&Request::Timing {
            enable: Some(false),
            params: None,
        })
    }

    /// Injects `fault` into the next `count` engine runs (0: until cleared).
    pub fn inject(&mut self, fault: &str, count: u64) -> Result<(), String> {
        self.call::<Done>(&Request::inject(fault, count))
            .map(|_| ())
    }

    /// Injects `fault` into `count` engine runs after letting `after` runs pass (a fault in the middle of a
    /// request made of several runs).
    pub fn inject_after(&mut self, fault: &str, after: u64, count: u64) -> Result<(), String> {
        self.call::<Done>(&Request::Inject {
            fault: fault.to_string(),
            count,
            delay_ms: None,
            after,
        })
        .map(|_| ())
    }

    /// Injects the `slow` fault, which alone takes a delay.
    pub fn inject_slow(&mut self, count: u64, delay_ms: u64) -> Result<(), String> {
        self.call::<Done>(&Request::Inject {
            fault: "slow".to_string(),
            count,
            delay_ms: Some(delay_ms),
            after: 0,
        })
        .map(|_| ())
    }

    /// Sets Run on `engine` at the chain the SGDMA registers still point to, as a driver unbound
    /// mid-transfer leaves it.
    pub fn leave_running(&mut self, engine: Engine) -> Result<(), String> {
        self.call::<Done>(&Request::LeaveRunning {
            engine,
            desc: None,
            adjacent: None,
        })
        .map(|_| ())
    }

    pub fn clear(&mut self) -> Result<(), String> {
        self.call::<Done>(&Request::Clear {}).map(|_| ())
    }

    pub fn reset_counters(&mut self) -> Result<(), String> {
        self.call::<Done>(&Request::ResetCounters {}).map(|_| ())
    }

    /// Surprise removal of the card (`false`) or its re-insertion (`true`).
    pub fn plug(&mut self, present: bool) -> Result<(), String> {
        let req = if present {
            Request::Replug {}
        } else {
            Request::Unplug {}
        };
        self.call::<Done>(&req).map(|_| ())
    }
}
