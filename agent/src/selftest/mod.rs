//! The loopback self-test: a pattern goes host/GPU memory -> FPGA RAM -> host/GPU memory and is verified.
//!
//! The transfer itself runs in a short-lived child (`gdr-selftest`, see [`child`]) so that the daemon never
//! holds a CUDA context; the daemon judges the [`Measurement`] against the config's thresholds and keeps a
//! bounded [`history`].

pub mod child;
pub mod gpu;
pub mod gpucheck;
pub mod gpupaths;
pub mod gpuring;
pub mod gpustream;
pub mod gpuwake;
pub mod history;
pub mod pattern;
pub mod runner;

use serde::{Deserialize, Serialize};

use crate::config::SelfTestSection;
pub use runner::SelfTestError;

/// Why a self-test or Bench did not run: an application holds the card RAM (the driver refused the
/// self-test's CLAIM). Not a verdict on the card: the test never runs over a holder's data.
pub const BUSY: &str = "busy: an application holds the card RAM";
/// `gdr-selftest`'s exit status for [`BUSY`] (EX_TEMPFAIL).
pub const BUSY_EXIT: i32 = 75;

/// The first word that came back wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Byte offset in the buffer.
    pub offset: u64,
    pub expected: u32,
    pub got: u32,
}

/// What the child measured (no judgement yet).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// `cuda` or `host`.
    pub memory: String,
    /// How the memory reached the card: `nv-p2p`, `nv-p2p-dgpu` or `pinned-host` for CUDA memory
    /// (`gdr_client::gpu_path::GpuPath::name`), `host` for plain host memory. Empty in results older
    /// than the field.
    #[serde(default)]
    pub path: String,
    /// Why host memory was used, or which GPU ran it.
    pub memory_note: String,
    pub bytes: u64,
    /// Host/GPU -> FPGA and back, MB/s (10^6 bytes per second) of DMA time as the driver measured it.
    pub h2c_mbps: f64,
    pub c2h_mbps: f64,
    /// Wall time of the whole test in the child, microseconds.
    pub duration_us: u64,
    /// Words that differed, and the first of them.
    pub mismatches: u64,
    pub first_mismatch: Option<Mismatch>,
}

/// A judged self-test, as kept in the history and shown on D-Bus.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelfTestResult {
    /// Seconds since the Unix epoch.
    pub time: u64,
    pub passed: bool,
    /// Empty when passed; else why it failed.
    pub reason: String,
    #[serde(flatten)]
    pub measurement: Measurement,
}

impl SelfTestResult {
    /// A test that could not run at all.
    pub fn error(time: u64, reason: String) -> Self {
        Self {
            time,
            passed: false,
            reason,
            measurement: Measurement {
                memory: String::new(),
                path: String::new(),
                memory_note: String::new(),
                bytes: 0,
                h2c_mbps: 0.0,
                c2h_mbps: 0.0,
                duration_us: 0,
                mismatches: 0,
                first_mismatch: None,
            },
        }
    }
}

/// Applies the config's thresholds.
pub fn judge(time: u64, m: Measurement, cfg: &SelfTestSection) -> SelfTestResult {
    let reason = if let Some(mm) = m.first_mismatch {
        format!(
            "{} word(s) differ; first at offset {:#x}: expected {:#010x}, got {:#010x}",
            m.mismatches, mm.offset, mm.expected, mm.got
        )
    } else if m.memory == "host" && cfg.memory == crate::config::Memory::Cuda {
        format!(
            "CUDA memory required but the test used host memory: {}",
            m.memory_note
        )
    } else if m.h2c_mbps < cfg.min_h2c_mbps {
        format!(
            "H2C {:.1} MB/s is below the threshold {:.1}",
            m.h2c_mbps, cfg.min_h2c_mbps
        )
    } else if m.c2h_mbps < cfg.min_c2h_mbps {
        format!(
            "C2H {:.1} MB/s is below the threshold {:.1}",
            m.c2h_mbps, cfg.min_c2h_mbps
        )
    } else {
        String::new()
    };
    SelfTestResult {
        time,
        passed: reason.is_empty(),
        reason,
        measurement: m,
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn good() -> Measurement {
        Measurement {
            memory: "host".into(),
            path: "host".into(),
            memory_note: "no libcuda".into(),
            bytes: 65536,
            h2c_mbps: 100.0,
            c2h_mbps: 90.0,
            duration_us: 1000,
            mismatches: 0,
            first_mismatch: None,
        }
    }

    #[test]
    fn thresholds_and_mismatches_fail() {
        let mut cfg = SelfTestSection::default();
        assert!(judge(1, good(), &cfg).passed);
        cfg.min_c2h_mbps = 95.0;
        let r = judge(1, good(), &cfg);
        assert!(
            !r.passed && r.reason.contains("C2H 90.0 MB/s"),
            "{}",
            r.reason
        );
        cfg.min_c2h_mbps = 0.0;
        let mut m = good();
        m.mismatches = 3;
        m.first_mismatch = Some(Mismatch {
            offset: 8,
            expected: 2,
            got: 0xffff_fffd,
        });
        let r = judge(1, m, &cfg);
        assert!(!r.passed && r.reason.contains("offset 0x8"), "{}", r.reason);
        cfg.memory = crate::config::Memory::Cuda;
        assert!(
            !judge(1, good(), &cfg).passed,
            "host memory when CUDA is required"
        );
    }
}
