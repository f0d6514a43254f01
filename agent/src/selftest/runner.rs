//! The daemon's side of the self-test: run `gdr-selftest` as a child, kill it at the deadline, read the
//! [`Measurement`] it prints as one JSON line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Measurement;
use crate::card::ports::SelfTester;
use crate::config::Memory;

/// Why the self-test child gave no measurement.
#[derive(Debug, thiserror::Error)]
pub enum SelfTestError {
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Wait(#[source] std::io::Error),
    #[error("self-test did not finish within {} s (killed)", limit.as_secs())]
    Timeout { limit: Duration },
    /// The child found the card RAM held by an application (see [`super::BUSY`]).
    #[error("{}", super::BUSY)]
    Busy,
    /// The child failed; `why` is the last line of its stderr.
    #[error("self-test child failed ({status}): {why}")]
    Child {
        status: std::process::ExitStatus,
        why: String,
    },
    #[error("self-test child printed no result ({source}): '{out}'")]
    NoResult {
        out: String,
        source: serde_json::Error,
    },
}

/// Runs the child program.
pub struct ChildTester {
    pub program: PathBuf,
    pub bytes: u64,
    pub memory: Memory,
    pub timeout: Duration,
}

impl ChildTester {
    /// Runs with `bytes` instead of the configured size (gdrctl bench).
    pub fn run_bytes(&self, node: &Path, bytes: u64) -> Result<Measurement, SelfTestError> {
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
            .map_err(|source| SelfTestError::Spawn {
                program: self.program.clone(),
                source,
            })?;
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().map_err(SelfTestError::Wait)? {
                break s;
            }
            if start.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SelfTestError::Timeout {
                    limit: self.timeout,
                });
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
            return Err(SelfTestError::Busy);
        }
        if !status.success() {
            let why = err.lines().last().unwrap_or("no message").to_string();
            return Err(SelfTestError::Child { status, why });
        }
        serde_json::from_str(out.trim()).map_err(|source| SelfTestError::NoResult {
            out: out.trim().to_string(),
            source,
        })
    }
}

impl SelfTester for ChildTester {
    fn run(&self, node: &Path) -> Result<Measurement, SelfTestError> {
        self.run_bytes(node, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A `gdr-selftest` stand-in: a shell script with body `body`.
    fn child(name: &str, body: &str) -> ChildTester {
        let program =
            std::env::temp_dir().join(format!("gdr-selftest-{name}-{}", std::process::id()));
        std::fs::write(&program, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        ChildTester {
            program,
            bytes: 4096,
            memory: Memory::Host,
            timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn each_way_the_child_fails_is_its_own_error() {
        let node = Path::new("/dev/null");
        // Every script is written before any child runs: no fork can inherit a script still open for
        // writing (ETXTBSY).
        let busy = child("busy", "exit 75");
        let failed = child("failed", "echo first >&2; echo 'no card' >&2; exit 1");
        let garbled = child("garbled", "echo hello");
        assert!(matches!(busy.run(node), Err(SelfTestError::Busy)));
        let e = failed.run(node).unwrap_err();
        assert!(
            matches!(&e, SelfTestError::Child { why, .. } if why == "no card"),
            "{e}"
        );
        let e = garbled.run(node).unwrap_err();
        assert!(matches!(e, SelfTestError::NoResult { .. }), "{e}");
        assert!(e.to_string().ends_with("'hello'"), "{e}");
        let missing = ChildTester {
            program: "/nonexistent/gdr-selftest".into(),
            bytes: 4096,
            memory: Memory::Host,
            timeout: Duration::from_secs(10),
        };
        let e = missing.run(node).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot run /nonexistent/gdr-selftest: "),
            "{e}"
        );
        for t in [busy, failed, garbled] {
            std::fs::remove_file(t.program).unwrap();
        }
    }
}
