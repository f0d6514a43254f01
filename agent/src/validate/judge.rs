//! The verdicts: pure functions from a measurement and its threshold to a [`Check`].

use super::dma::{Integrity, Throughput};
use super::report::{Check, Verdict};
use crate::manifest::{Identity, ManifestError};
use crate::selftest::Measurement;
use crate::selftest::child::ChildError;
use crate::selftest::gpu::Unavailable;

/// The GPU-memory path's run: `Err` where CUDA is not here, else the self-test child's outcome.
pub type GpuRun = Result<Result<Measurement, ChildError>, Unavailable>;

/// A failed ioctl on the card's fd (what was attempted and the errno).
type DevError = gdr_client::Error;

/// What a run is judged against. The defaults are a PicoEVB's on a Jetson: derived from the Gen2 x1 link's
/// framing (docs/agent.md, "gdrctl validate"); the bench passes its own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    pub link: super::link::LinkExpect,
    /// MB/s (10^6 bytes per second) of DMA time, one way, the whole RAM per transfer.
    pub min_h2c_mbps: f64,
    pub min_c2h_mbps: f64,
    /// MB/s through H2C2H (both ways in series).
    pub min_round_trip_mbps: f64,
    /// Median wall time of a small round trip, as the application sees it (the ioctl call), µs.
    pub max_latency_us: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            link: super::link::LinkExpect::PICOEVB,
            min_h2c_mbps: 300.0,
            min_c2h_mbps: 300.0,
            min_round_trip_mbps: 150.0,
            max_latency_us: 150.0,
        }
    }
}

fn verdict(ok: bool) -> Verdict {
    if ok { Verdict::Pass } else { Verdict::Fail }
}

/// Where the expected ID block comes from: the manifest the image ships.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdExpect {
    pub expected: Identity,
    /// The golden (fallback) design, when known: a card that runs it was not updated.
    pub golden: Option<Identity>,
    /// Where this came from, for the table (`/usr/share/gdr/bitstream/manifest.json`, `the agent's manifest`).
    pub source: String,
}

/// Why there is no ID block to compare the card's with.
#[derive(Debug, thiserror::Error)]
pub enum NoExpectation {
    /// `--manifest DIR` named a folder whose manifest does not load.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(
        "the agent has no bitstream configured (loader 'none'): nothing to compare with; \
         --manifest DIR compares with a bitstream folder's"
    )]
    LoaderNone,
    #[error("the agent has no manifest loaded: --manifest DIR compares with one")]
    NoManifest,
}

/// The ID block the card answers now (ABI_INFO) against the manifest; `want` is `Err(why)` where there is
/// nothing to compare with (the box has no bitstream).
pub fn id_block(
    live: Result<Identity, &DevError>,
    want: Result<&IdExpect, &NoExpectation>,
) -> Check {
    let live = match live {
        Ok(l) => l,
        Err(e) => {
            return Check::new("id-block", Verdict::Fail)
                .measured("unreadable")
                .detail(format!("ABI_INFO: {e}"));
        }
    };
    let c = Check::new("id-block", Verdict::Pass)
        .measured(live.to_string())
        .value("design_version", f64::from(live.design_version))
        .value("build_hash", f64::from(live.build_hash));
    let want = match want {
        Ok(w) => w,
        Err(why) => {
            return Check {
                verdict: Verdict::Skip,
                ..c
            }
            .detail(why.to_string());
        }
    };
    let c = c.expected(format!("{} ({})", want.expected, want.source));
    if live == want.expected {
        return c;
    }
    let why = if want.golden == Some(live) {
        "the card runs the golden (fallback) design: the update image was rejected; `gdrctl reprogram`, \
         then check the image and the flash"
            .to_string()
    } else if live.design_version == 0 {
        "the card has no ID block (NVIDIA's reference design?): `gdrctl reprogram` loads the manifest's"
            .to_string()
    } else {
        format!(
            "the card runs {live}, the manifest names {}: `gdrctl reprogram`",
            want.expected
        )
    };
    Check {
        verdict: Verdict::Fail,
        ..c
    }
    .detail(why)
}

/// Integrity: every byte back as it went.
pub fn integrity(m: Result<&Integrity, &DevError>) -> Check {
    let m = match m {
        Ok(m) => m,
        Err(e) => {
            return Check::new("dma-integrity", Verdict::Fail)
                .measured("transfer failed")
                .expected("every byte back")
                .detail(e.to_string());
        }
    };
    let mut c = Check::new("dma-integrity", verdict(m.wrong == 0))
        .measured(format!(
            "{} transfers, {} bytes, {} wrong",
            m.transfers, m.bytes, m.wrong
        ))
        .expected("every byte back")
        .value("transfers", f64::from(m.transfers))
        .value("bytes", m.bytes as f64)
        .value("wrong_bytes", m.wrong as f64);
    if let Some(f) = &m.first {
        c = c.detail(format!(
            "first wrong byte at {:#x} of {}: expected {:#04x}, got {:#04x}",
            f.offset, f.what, f.expected, f.got
        ));
    }
    c
}

/// MB/s of `bytes` in `ns`; 0 when no time was measured.
pub fn mbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 1e3 / ns as f64
    }
}

/// Bandwidth against a floor. Judged on the driver's DMA time; a driver that reports none (NVIDIA's
/// reference) is judged on the calls' wall time, and the detail says so.
pub fn bandwidth(name: &'static str, t: Result<&Throughput, &DevError>, min_mbps: f64) -> Check {
    let expected = format!(">= {min_mbps:.1} MB/s");
    let t = match t {
        Ok(t) => t,
        Err(e) => {
            return Check::new(name, Verdict::Fail)
                .measured("transfer failed")
                .expected(expected)
                .detail(e.to_string());
        }
    };
    let wall = mbps(t.bytes, t.wall_ns);
    let (rate, note) = if t.dma_ns > 0 {
        (
            mbps(t.bytes, t.dma_ns),
            format!("{wall:.1} MB/s counting the calls' wall time"),
        )
    } else {
        (
            wall,
            "wall time of the calls (the driver reports no DMA time)".to_string(),
        )
    };
    let ok = rate >= min_mbps;
    let mut c = Check::new(name, verdict(ok))
        .measured(format!("{rate:.1} MB/s"))
        .expected(expected)
        .value("mbps", rate)
        .value("wall_mbps", wall)
        .value("bytes", t.bytes as f64);
    c = if ok {
        c.detail(note)
    } else {
        c.detail(format!(
            "{rate:.1} MB/s is below {min_mbps:.1} ({note}): check the link (above) and what else \
             uses the card or the bus"
        ))
    };
    c
}

/// Nearest-rank percentile `p` (0..=100) of sorted samples.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    // The rank is an integer p·n/100 rounded up; the epsilon keeps 99.9 % of 1000 at 999, not 1000
    // (99.9 / 100 is 0.99900000000000011 in binary).
    let rank = ((p * sorted.len() as f64) / 100.0 - 1e-9).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Small-transfer latency: the median round trip against a ceiling; min, p99 and max alongside.
pub fn latency(samples_ns: Result<&[u64], &DevError>, bytes: usize, max_us: f64) -> Check {
    let expected = format!("median <= {max_us:.0} µs");
    let mut s = match samples_ns {
        Ok(s) if !s.is_empty() => s.to_vec(),
        Ok(_) => {
            return Check::new("latency", Verdict::Fail)
                .expected(expected)
                .detail("no samples");
        }
        Err(e) => {
            return Check::new("latency", Verdict::Fail)
                .measured("transfer failed")
                .expected(expected)
                .detail(e.to_string());
        }
    };
    s.sort_unstable();
    let us = |ns: u64| ns as f64 / 1e3;
    let (min, p50, p99, max) = (
        us(s[0]),
        us(percentile(&s, 50.0)),
        us(percentile(&s, 99.0)),
        us(s[s.len() - 1]),
    );
    let ok = p50 <= max_us;
    let c = Check::new("latency", verdict(ok))
        .measured(format!("median {p50:.0} µs"))
        .expected(expected)
        .value("bytes", bytes as f64)
        .value("samples", s.len() as f64)
        .value("min_us", min)
        .value("p50_us", p50)
        .value("p99_us", p99)
        .value("max_us", max);
    let spread = format!(
        "{bytes}-byte round trip, {} samples: min {min:.0}, p99 {p99:.0}, max {max:.0} µs",
        s.len()
    );
    if ok {
        c.detail(spread)
    } else {
        c.detail(format!(
            "{spread}; a median above the ceiling: interrupts not arriving (polling fallback) or a \
             loaded CPU"
        ))
    }
}

/// The GPU-memory path: `Err(why)` where CUDA is not here (a skip that says why), else the self-test
/// child's measurement of CUDA memory through the card.
pub fn gpu_path(m: GpuRun, t: &Thresholds) -> Check {
    let m = match m {
        Err(why) => {
            return Check::skip(
                "gpu-path",
                format!("no CUDA here ({why}): the GPU-memory path was not tested"),
            );
        }
        Ok(Err(e)) => {
            return Check::new("gpu-path", Verdict::Fail)
                .measured("failed")
                .expected("every word back")
                .detail(e.to_string());
        }
        Ok(Ok(m)) => m,
    };
    let mut why = Vec::new();
    if let Some(f) = m.first_mismatch {
        why.push(format!(
            "{} word(s) differ; first at {:#x}: expected {:#010x}, got {:#010x}",
            m.mismatches, f.offset, f.expected, f.got
        ));
    }
    if m.h2c_mbps < t.min_h2c_mbps {
        why.push(format!(
            "H2C {:.1} MB/s is below {:.1}",
            m.h2c_mbps, t.min_h2c_mbps
        ));
    }
    if m.c2h_mbps < t.min_c2h_mbps {
        why.push(format!(
            "C2H {:.1} MB/s is below {:.1}",
            m.c2h_mbps, t.min_c2h_mbps
        ));
    }
    let c = Check::new("gpu-path", verdict(why.is_empty()))
        .measured(format!(
            "{} via {}: H2C {:.1}, C2H {:.1} MB/s",
            m.memory, m.path, m.h2c_mbps, m.c2h_mbps
        ))
        .expected(format!(
            "every word back, >= {:.1}/{:.1} MB/s",
            t.min_h2c_mbps, t.min_c2h_mbps
        ))
        .value("bytes", m.bytes as f64)
        .value("h2c_mbps", m.h2c_mbps)
        .value("c2h_mbps", m.c2h_mbps)
        .value("wrong_words", m.mismatches as f64);
    if why.is_empty() {
        c.detail(m.memory_note)
    } else {
        c.detail(why.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::super::dma::Mismatch;
    use super::*;

    const V1: Identity = Identity {
        design_version: 0x0100_0000,
        build_hash: 0x8169_0a8c,
    };
    const GOLDEN: Identity = Identity {
        design_version: 0x0009_0000,
        build_hash: 1,
    };

    fn want() -> IdExpect {
        IdExpect {
            expected: V1,
            golden: Some(GOLDEN),
            source: "manifest.json".into(),
        }
    }

    #[test]
    fn the_id_block_must_be_the_manifests() {
        let w = want();
        let c = id_block(Ok(V1), Ok(&w));
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert_eq!(c.expected, "1.0.0 build 81690a8c (manifest.json)");
        let other = Identity {
            build_hash: 0x8169_0a8d,
            ..V1
        };
        let c = id_block(Ok(other), Ok(&w));
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(
            c.detail.contains("runs 1.0.0 build 81690a8d"),
            "{}",
            c.detail
        );
        let c = id_block(Ok(GOLDEN), Ok(&w));
        assert!(c.detail.contains("golden"), "{}", c.detail);
        let c = id_block(Ok(Identity::default()), Ok(&w));
        assert!(c.detail.contains("no ID block"), "{}", c.detail);
        let gone = DevError::Os {
            op: "ABI_INFO",
            errno: libc::ENODEV,
        };
        let c = id_block(Err(&gone), Ok(&w));
        assert_eq!(
            (c.verdict, c.measured.as_str()),
            (Verdict::Fail, "unreadable")
        );
        assert_eq!(c.detail, "ABI_INFO: ABI_INFO: No such device (os error 19)");
        // Nothing to compare with: a skip that says why, with what the card runs.
        let c = id_block(Ok(V1), Err(&NoExpectation::LoaderNone));
        assert_eq!(c.verdict, Verdict::Skip);
        assert!(c.detail.contains("loader 'none'"), "{}", c.detail);
        assert_eq!(c.measured, "1.0.0 build 81690a8c");
    }

    #[test]
    fn one_wrong_byte_fails_integrity_and_is_located() {
        let mut m = Integrity {
            transfers: 16,
            bytes: 300_000,
            wrong: 0,
            first: None,
        };
        assert_eq!(integrity(Ok(&m)).verdict, Verdict::Pass);
        m.wrong = 1;
        m.first = Some(Mismatch {
            what: "33 bytes at FPGA 0x1, counter".into(),
            offset: 5,
            expected: 0x01,
            got: 0x11,
        });
        let c = integrity(Ok(&m));
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(
            c.detail,
            "first wrong byte at 0x5 of 33 bytes at FPGA 0x1, counter: expected 0x01, got 0x11"
        );
        assert_eq!(c.values["wrong_bytes"], 1.0);
        let eio = DevError::Os {
            op: "C2H_DMA",
            errno: libc::EIO,
        };
        let c = integrity(Err(&eio));
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(c.detail, "C2H_DMA: Input/output error (os error 5)");
    }

    #[test]
    fn bandwidth_below_the_floor_fails() {
        // 65536 bytes in 163840 ns of DMA = 400 MB/s.
        let t = Throughput {
            bytes: 65536,
            dma_ns: 163_840,
            wall_ns: 262_144,
        };
        let c = bandwidth("h2c-bandwidth", Ok(&t), 300.0);
        assert_eq!(
            (c.verdict, c.measured.as_str()),
            (Verdict::Pass, "400.0 MB/s")
        );
        assert_eq!(c.values["wall_mbps"], 250.0);
        let c = bandwidth("h2c-bandwidth", Ok(&t), 400.1);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("below 400.1"), "{}", c.detail);
        // No DMA time from the driver: judged on the wall time, and said so.
        let t = Throughput { dma_ns: 0, ..t };
        let c = bandwidth("c2h-bandwidth", Ok(&t), 300.0);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("reports no DMA time"), "{}", c.detail);
        assert_eq!(
            bandwidth("round-trip", Err(&DevError::Timeout("x".into())), 0.0).verdict,
            Verdict::Fail
        );
    }

    #[test]
    fn latency_is_judged_on_the_median() {
        assert_eq!(percentile(&[1, 2, 3, 4], 50.0), 2);
        assert_eq!(percentile(&[1, 2, 3, 4], 99.0), 4);
        assert_eq!(percentile(&[7], 0.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
        // 99 fast samples and one slow one: the median passes, p99/max show the outlier.
        let mut s = vec![40_000u64; 99];
        s.push(5_000_000);
        let c = latency(Ok(&s), 4096, 150.0);
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert_eq!(c.values["p50_us"], 40.0);
        assert_eq!(c.values["max_us"], 5000.0);
        let slow = vec![200_000u64; 10];
        let c = latency(Ok(&slow), 4096, 150.0);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("interrupts"), "{}", c.detail);
        assert_eq!(latency(Ok(&[]), 4096, 150.0).verdict, Verdict::Fail);
    }

    #[test]
    fn the_gpu_path_is_skipped_without_cuda_and_judged_with_it() {
        let t = Thresholds::default();
        let c = gpu_path(Err(Unavailable::NoLibcuda), &t);
        assert_eq!(c.verdict, Verdict::Skip);
        assert!(c.detail.contains("libcuda not found"), "{}", c.detail);
        let mut m = Measurement {
            memory: "cuda".into(),
            path: "nv-p2p".into(),
            memory_note: "Orin".into(),
            bytes: 65536,
            h2c_mbps: 400.0,
            c2h_mbps: 410.0,
            duration_us: 1000,
            mismatches: 0,
            first_mismatch: None,
        };
        assert_eq!(gpu_path(Ok(Ok(m.clone())), &t).verdict, Verdict::Pass);
        m.mismatches = 2;
        m.first_mismatch = Some(crate::selftest::Mismatch {
            offset: 8,
            expected: 2,
            got: 0,
        });
        let c = gpu_path(Ok(Ok(m)), &t);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("2 word(s) differ"), "{}", c.detail);
        let refused = ChildError::Card(DevError::Os {
            op: "PIN_CUDA",
            errno: libc::EINVAL,
        });
        let c = gpu_path(Ok(Err(refused)), &t);
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(c.detail, "PIN_CUDA: Invalid argument (os error 22)");
    }
}
