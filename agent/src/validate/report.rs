//! A validation's outcome: one [`Check`] per property, the verdicts, the exit status, the human table and
//! the JSON form.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

/// One check's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// Not applicable here (no CUDA, no manifest to compare with); `detail` says why.
    Skip,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        }
    }
}

/// One judged property of the card.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// Stable name (`link`, `id-block`, `dma-integrity`, `h2c-bandwidth`, `c2h-bandwidth`, `round-trip`,
    /// `latency`, `gpu-path`): scripts key on it.
    pub name: &'static str,
    pub verdict: Verdict,
    /// What was seen, for people.
    pub measured: String,
    /// The threshold or expectation it was judged against.
    pub expected: String,
    /// Why it failed or was skipped; empty on a pass unless there is something worth saying.
    pub detail: String,
    /// The numbers behind `measured` (MB/s, µs, counts), for scripts.
    pub values: BTreeMap<&'static str, f64>,
}

impl Check {
    pub fn new(name: &'static str, verdict: Verdict) -> Self {
        Self {
            name,
            verdict,
            measured: String::new(),
            expected: String::new(),
            detail: String::new(),
            values: BTreeMap::new(),
        }
    }

    pub fn skip(name: &'static str, why: impl Into<String>) -> Self {
        Self {
            detail: why.into(),
            ..Self::new(name, Verdict::Skip)
        }
    }

    pub fn measured(mut self, m: impl Into<String>) -> Self {
        self.measured = m.into();
        self
    }

    pub fn expected(mut self, e: impl Into<String>) -> Self {
        self.expected = e.into();
        self
    }

    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.detail = d.into();
        self
    }

    pub fn value(mut self, key: &'static str, v: f64) -> Self {
        self.values.insert(key, v);
        self
    }
}

/// Every check of one card.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub card: u32,
    pub pci: String,
    /// `passed` or `failed`.
    pub result: &'static str,
    pub checks: Vec<Check>,
}

/// `gdrctl validate`'s exit status when every check passed or was skipped.
pub const EXIT_PASSED: u8 = 0;
/// ... when a check failed.
pub const EXIT_FAILED: u8 = 1;
/// ... when validation could not run (no agent, card not ready, access denied, RAM held, bad arguments).
pub const EXIT_COULD_NOT_RUN: u8 = 2;

impl Report {
    pub fn new(card: u32, pci: String, checks: Vec<Check>) -> Self {
        let failed = checks.iter().any(|c| c.verdict == Verdict::Fail);
        Self {
            card,
            pci,
            result: if failed { "failed" } else { "passed" },
            checks,
        }
    }

    pub fn passed(&self) -> bool {
        self.result == "passed"
    }

    pub fn exit_code(&self) -> u8 {
        if self.passed() {
            EXIT_PASSED
        } else {
            EXIT_FAILED
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report serialises")
    }

    /// The human table: one row per check, the reason under a failed or skipped one, a closing line.
    pub fn table(&self) -> String {
        let mut s = format!("card{} {}\n", self.card, self.pci);
        let w = self
            .checks
            .iter()
            .map(|c| c.measured.chars().count())
            .max()
            .unwrap_or(0)
            .max("MEASURED".len());
        let _ = writeln!(
            s,
            "  {:<14} {:<6} {:<w$}  EXPECTED",
            "CHECK", "RESULT", "MEASURED"
        );
        for c in &self.checks {
            let _ = writeln!(
                s,
                "  {:<14} {:<6} {:<w$}  {}",
                c.name,
                c.verdict.word(),
                c.measured,
                c.expected
            );
            if !c.detail.is_empty() {
                let _ = writeln!(s, "  {:<14} {:<6} {}", "", "", c.detail);
            }
        }
        let count = |v| self.checks.iter().filter(|c| c.verdict == v).count();
        let _ = write!(
            s,
            "card{}: validation {} ({} passed, {} failed, {} skipped)",
            self.card,
            self.result,
            count(Verdict::Pass),
            count(Verdict::Fail),
            count(Verdict::Skip)
        );
        s
    }
}

/// Validation could not run at all: why, as JSON for `--json`.
pub fn could_not_run_json(card: u32, why: &str) -> serde_json::Value {
    serde_json::json!({
        "card": card,
        "result": "could not run",
        "error": why,
        "exit": EXIT_COULD_NOT_RUN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_failed_check_fails_the_card_and_skips_do_not() {
        let pass = Check::new("link", Verdict::Pass).measured("5.0 GT/s x1");
        let skip = Check::skip("gpu-path", "no CUDA: libcuda not found");
        let r = Report::new(0, "0000:01:00.0".into(), vec![pass.clone(), skip.clone()]);
        assert_eq!((r.result, r.exit_code()), ("passed", EXIT_PASSED));
        let fail = Check::new("dma-integrity", Verdict::Fail).detail("3 bytes differ");
        let r = Report::new(0, String::new(), vec![pass, fail, skip]);
        assert_eq!((r.result, r.exit_code()), ("failed", EXIT_FAILED));
        let t = r.table();
        assert!(t.contains("dma-integrity  FAIL"), "{t}");
        assert!(t.contains("3 bytes differ"), "{t}");
        assert!(t.contains("no CUDA: libcuda not found"), "{t}");
        assert!(
            t.ends_with("validation failed (1 passed, 1 failed, 1 skipped)"),
            "{t}"
        );
    }

    #[test]
    fn the_json_form_names_every_check_and_its_numbers() {
        let c = Check::new("h2c-bandwidth", Verdict::Pass)
            .measured("400.0 MB/s")
            .expected(">= 300.0 MB/s")
            .value("mbps", 400.0);
        let j = Report::new(1, "0000:02:00.0".into(), vec![c]).json();
        assert_eq!(j["result"], "passed");
        assert_eq!(j["card"], 1);
        assert_eq!(j["checks"][0]["name"], "h2c-bandwidth");
        assert_eq!(j["checks"][0]["verdict"], "pass");
        assert_eq!(j["checks"][0]["values"]["mbps"], 400.0);
        let e = could_not_run_json(0, "card0 is not ready");
        assert_eq!(e["exit"], 2);
        assert_eq!(e["result"], "could not run");
    }
}
