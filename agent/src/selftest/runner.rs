//! The daemon's side of the self-test: run `gdr-selftest` as a child, kill it at the deadline, read the
//! [`Measurement`] it prints as one JSON line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Measurement;
use crate::card::ports::SelfTester;
use crate::config::Memory;

/// Runs the child program.
pub struct ChildTester {
    pub program: PathBuf,
    pub bytes: u64,
    pub memory: Memory,
    pub timeout: Duration,
}

impl ChildTester {
    /// Runs with `bytes` instead of the configured size (gdrctl bench).
    pub fn run_bytes(&self, node: &Path, bytes: u64) -> Result<Measurement, String> {
        let memory = match self.memory {
            Memory::Auto => "auto",
            Memory::Cuda => "cuda",
            Memory::Host => "host",
        };
        let mut child = Command::new(&self.program)
            .arg("--device")
            .arg(node)
            .args(["--bytes", &bytes.to_string(), "--memory", memory])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if start.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "self-test did not finish within {} s (killed)",
                    self.timeout.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        if status.code() == Some(super::BUSY_EXIT) {
            return Err(super::BUSY.into());
        }
        if !status.success() {
            let why = err.lines().last().unwrap_or("no message").to_string();
            return Err(format!("self-test child failed ({status}): {why}"));
        }
        serde_json::from_str(out.trim())
            .map_err(|e| format!("self-test child printed no result ({e}): '{}'", out.trim()))
    }
}

impl SelfTester for ChildTester {
    fn run(&self, node: &Path) -> Result<Measurement, String> {
        self.run_bytes(node, self.bytes)
    }
}
