//! Parses the guest console: the guest program's `TEST`/`GUEST RESULT` lines, the init script's `INIT` lines,
//! kmemleak dumps, and kernel splats.

/// Substrings that mark a kernel splat (case-sensitive, as the kernel prints them).
pub const SPLATS: [&str; 10] = [
    "BUG:",
    "WARNING:",
    "KASAN:",
    "UBSAN:",
    "Oops",
    "possible circular locking",
    "inconsistent lock state",
    "DMA-API:",
    "Call Trace:",
    "kernel BUG",
];

/// Lines that contain a splat marker but are not one: DMA-API debug's boot banners.
const BENIGN: [&str; 3] = [
    "DMA-API: preallocated",
    "DMA-API: debugging enabled",
    "DMA-API: debugging disabled",
];
/// Words of the CPU-bug mitigation notices of arch/x86/kernel/cpu/bugs.c ("RETBleed: WARNING: Spectre v2
/// mitigation leaves CPU vulnerable ..."), which TCG's CPU model can trigger; they carry no backtrace.
const MITIGATION_WORDS: [&str; 2] = ["mitigation", "vulnerab"];

/// Outcome of one guest test line.
#[derive(Clone, Debug, PartialEq)]
pub struct TestLine {
    pub name: String,
    /// `None` when it passed (or was skipped), else the reason.
    pub failure: Option<String>,
    /// `Some(why)` when the guest skipped it (`TEST <name> ... skipped (<why>)`): neither passed nor failed.
    pub skipped: Option<String>,
    /// The guest's wall time for it, where the line ends in `[<seconds> s]`.
    pub seconds: Option<f64>,
}

/// Splits a trailing `[<seconds> s]` off a test's outcome.
fn split_seconds(outcome: &str) -> (&str, Option<f64>) {
    outcome
        .strip_suffix(" s]")
        .and_then(|rest| rest.rsplit_once(" ["))
        .and_then(|(head, secs)| Some((head.trim_end(), Some(secs.parse().ok()?))))
        .unwrap_or((outcome, None))
}

/// One kmemleak dump printed between the init script's markers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kmemleak {
    pub phase: String,
    /// Non-empty lines of the dump; any line is a leak report.
    pub lines: Vec<String>,
    pub complete: bool,
}

/// What a console line is, for live echo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Output of the guest program (TEST, GUEST, LOOPBACK lines) or the appliance's scenario (APPLIANCE).
    Guest,
    /// A line of the init script.
    Init,
    /// A kernel splat.
    Splat,
    Other,
}

/// Everything learnt from the console so far; fed one line at a time.
#[derive(Debug, Default)]
pub struct Console {
    pub lines: Vec<String>,
    pub tests: Vec<TestLine>,
    /// The guest's summary: passed, failed, skipped (0 when the line has no `, K skipped`).
    pub guest_result: Option<(u32, u32, u32)>,
    pub guest_rc: Option<i32>,
    pub seed: Option<u64>,
    pub insmod: Vec<(String, i32)>,
    pub rmmod: Vec<(String, i32)>,
    pub kmemleak: Vec<Kmemleak>,
    pub kmemleak_unavailable: bool,
    /// Indexes into `lines` of splat lines.
    pub splats: Vec<usize>,
    /// Indexes of the init script's lines (for evidence).
    pub init_lines: Vec<usize>,
    /// Index of the line after which the modules were being loaded: earlier splats are the kernel's own.
    pub modules_from: Option<usize>,
    pub done: bool,
    in_kmemleak: bool,
}

/// `INIT <verb> <name> rc=<n>` → (name, rc).
fn name_rc(rest: &str) -> Option<(String, i32)> {
    let (name, rc) = rest.rsplit_once(" rc=")?;
    Some((name.trim().to_string(), rc.trim().parse().ok()?))
}

/// Whether a line (not from the guest program or the init script) is a kernel splat.
pub fn is_splat(line: &str) -> bool {
    let markers = SPLATS.iter().filter(|s| line.contains(*s)).count();
    let mitigation_notice = markers == 1
        && line.contains("WARNING:")
        && !line.contains("WARNING: CPU:")
        && MITIGATION_WORDS.iter().any(|w| line.contains(w));
    markers > 0 && !mitigation_notice && !BENIGN.iter().any(|b| line.contains(b))
}

/// Strips the serial line's CR and anything before the first printable character.
fn clean(raw: &str) -> &str {
    raw.trim_end_matches(['\r', '\n'])
        .trim_start_matches(|c: char| c.is_control())
}

impl Console {
    /// Records one console line and says what it was.
    pub fn feed(&mut self, raw: &str) -> Kind {
        let line = clean(raw).to_string();
        let idx = self.lines.len();
        self.lines.push(line);
        let line = &self.lines[idx];

        if self.in_kmemleak {
            if let Some(phase) = line.strip_prefix("INIT KMEMLEAK END") {
                self.in_kmemleak = false;
                if let Some(k) = self.kmemleak.last_mut() {
                    k.complete = k.phase == phase.trim();
                }
                self.init_lines.push(idx);
                return Kind::Init;
            }
            if !line.trim().is_empty() {
                self.kmemleak
                    .last_mut()
                    .expect("open section")
                    .lines
                    .push(line.clone());
            }
            return Kind::Other;
        }
        if let Some(rest) = line.strip_prefix("INIT ") {
            self.init_lines.push(idx);
            if let Some(r) = rest.strip_prefix("insmod ").and_then(name_rc) {
                self.insmod.push(r);
            } else if let Some(r) = rest.strip_prefix("rmmod ").and_then(name_rc) {
                self.rmmod.push(r);
            } else if let Some(rc) = rest.strip_prefix("guest rc=") {
                self.guest_rc = rc.trim().parse().ok();
            } else if let Some(phase) = rest.strip_prefix("KMEMLEAK BEGIN") {
                self.in_kmemleak = true;
                self.kmemleak.push(Kmemleak {
                    phase: phase.trim().into(),
                    ..Default::default()
                });
            } else if rest.starts_with("KMEMLEAK UNAVAILABLE") {
                self.kmemleak_unavailable = true;
            } else if rest.trim() == "loading modules" {
                self.modules_from = Some(idx);
            } else if rest.trim() == "DONE" {
                self.done = true;
            }
            return Kind::Init;
        }
        if let Some(rest) = line.strip_prefix("TEST ")
            && let Some((name, outcome)) = rest.split_once(" ... ")
        {
            let (outcome, seconds) = split_seconds(outcome.trim());
            let (failure, skipped) = if outcome == "ok" {
                (None, None)
            } else if let Some(why) = outcome.strip_prefix("skipped") {
                let why = why.trim();
                let why = why
                    .strip_prefix('(')
                    .and_then(|w| w.strip_suffix(')'))
                    .unwrap_or(why);
                (None, Some(why.to_string()))
            } else {
                let why = outcome.strip_prefix("FAILED:").unwrap_or(outcome).trim();
                (Some(why.to_string()), None)
            };
            self.tests.push(TestLine {
                name: name.trim().into(),
                failure,
                skipped,
                seconds,
            });
            return Kind::Guest;
        }
        // Searched anywhere in the line: a kernel message may have been printed in front of it.
        if let Some(at) = line.find("GUEST RESULT:") {
            self.guest_result = parse_result(&line[at + "GUEST RESULT:".len()..]);
            return Kind::Guest;
        }
        if let Some(seed) = line.strip_prefix("GUEST SEED ") {
            self.seed = seed.trim().parse().ok();
            return Kind::Guest;
        }
        // LOOPBACK lines, and the figures tests print as `GUEST <WORD> ...` (counters, statistics).
        if ["LOOPBACK ", "GUEST ", "APPLIANCE "]
            .iter()
            .any(|p| line.starts_with(p))
        {
            return Kind::Guest;
        }
        if is_splat(line) {
            self.splats.push(idx);
            return Kind::Splat;
        }
        Kind::Other
    }

    /// Splat lines printed before the modules were loaded (the kernel's own, during boot).
    pub fn boot_splats(&self) -> usize {
        let from = self.modules_from.unwrap_or(usize::MAX);
        self.splats.iter().filter(|&&i| i < from).count()
    }

    pub fn passed(&self) -> usize {
        self.tests
            .iter()
            .filter(|t| t.failure.is_none() && t.skipped.is_none())
            .count()
    }

    pub fn failed(&self) -> usize {
        self.tests.iter().filter(|t| t.failure.is_some()).count()
    }

    pub fn skipped(&self) -> usize {
        self.tests.iter().filter(|t| t.skipped.is_some()).count()
    }

    /// Up to `after` lines following line `idx` (and the line itself), for evidence.
    pub fn context(&self, idx: usize, after: usize) -> Vec<String> {
        self.lines[idx..self.lines.len().min(idx + 1 + after)].to_vec()
    }

    /// The last `n` lines.
    pub fn tail(&self, n: usize) -> Vec<String> {
        self.lines[self.lines.len().saturating_sub(n)..].to_vec()
    }
}

/// " N passed, M failed" or " N passed, M failed, K skipped" → (N, M, K), K = 0 in the first form.
pub fn parse_result(s: &str) -> Option<(u32, u32, u32)> {
    let parts: Vec<&str> = s.trim().split(',').collect();
    let count = |i: usize, word: &str| -> Option<u32> {
        parts[i].trim().strip_suffix(word)?.trim().parse().ok()
    };
    match parts.len() {
        2 => Some((count(0, "passed")?, count(1, "failed")?, 0)),
        3 => Some((
            count(0, "passed")?,
            count(1, "failed")?,
            count(2, "skipped")?,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(text: &str) -> Console {
        let mut c = Console::default();
        for l in text.lines() {
            c.feed(l);
        }
        c
    }

    #[test]
    fn test_and_result_lines() {
        let c = feed_all(
            "GUEST SEED 42\r\n\
             TEST basic::card_info ... ok\r\n\
             TEST dma::h2c_c2h_1 ... FAILED: round trip: 1 of 1 bytes differ ... really\r\n\
             TEST not a result line\r\n\
             TEST dma::timed ... ok [12.5 s]\r\n\
             TEST dma::timed_fail ... FAILED: short [x] [0.3 s]\r\n\
             TEST dma::odd ... FAILED: ends [in] s]\r\n\
             GUEST RESULT: 2 passed, 3 failed\r\n",
        );
        assert_eq!(c.seed, Some(42));
        assert_eq!(c.tests.len(), 5);
        assert_eq!(
            c.tests[0],
            TestLine {
                name: "basic::card_info".into(),
                failure: None,
                skipped: None,
                seconds: None,
            }
        );
        assert_eq!(
            (c.tests[2].failure.as_deref(), c.tests[2].seconds),
            (None, Some(12.5))
        );
        assert_eq!(
            (c.tests[3].failure.as_deref(), c.tests[3].seconds),
            (Some("short [x]"), Some(0.3))
        );
        // Not a time: the reason is kept whole.
        assert_eq!(
            (c.tests[4].failure.as_deref(), c.tests[4].seconds),
            (Some("ends [in] s]"), None)
        );
        assert_eq!(c.tests[1].name, "dma::h2c_c2h_1");
        assert_eq!(
            c.tests[1].failure.as_deref(),
            Some("round trip: 1 of 1 bytes differ ... really")
        );
        assert_eq!((c.passed(), c.failed(), c.skipped()), (2, 3, 0));
        assert_eq!(c.guest_result, Some((2, 3, 0)));
    }

    #[test]
    fn skipped_tests() {
        let c = feed_all(
            "TEST a ... ok\n\
             TEST cuda::x ... skipped (no GPU-memory provider: ABI_INFO caps 0xc have no CUDA bit)\n\
             TEST cuda::y ... skipped\n\
             TEST b ... FAILED: skipped (not really)\n\
             GUEST RESULT: 1 passed, 1 failed, 2 skipped\n",
        );
        assert_eq!((c.passed(), c.failed(), c.skipped()), (1, 1, 2));
        assert_eq!(
            c.tests[1].skipped.as_deref(),
            Some("no GPU-memory provider: ABI_INFO caps 0xc have no CUDA bit")
        );
        assert_eq!(c.tests[2].skipped.as_deref(), Some(""));
        assert_eq!(c.tests[3].failure.as_deref(), Some("skipped (not really)"));
        assert_eq!(c.guest_result, Some((1, 1, 2)));
        assert_eq!(
            parse_result(" 3 passed, 0 failed, 0 skipped"),
            Some((3, 0, 0))
        );
        assert_eq!(parse_result(" 3 passed, 0 failed, x skipped"), None);
        assert_eq!(parse_result(" 3 passed, 0 failed, 1 skipped, 2 more"), None);
        assert_eq!(parse_result(" 3 passed, 0 failed, 1 ignored"), None);
    }

    #[test]
    fn result_line_after_kernel_noise() {
        let c = feed_all("[   12.5] random: crng init done GUEST RESULT: 7 passed, 0 failed");
        assert_eq!(c.guest_result, Some((7, 0, 0)));
        assert_eq!(parse_result(" 3 passed, x failed"), None);
    }

    #[test]
    fn init_lines() {
        let c = feed_all(
            "INIT insmod picoevb.ko rc=0\n\
             INIT insmod other.ko rc=1\n\
             INIT guest rc=1\n\
             INIT KMEMLEAK BEGIN after-tests\n\
             \n\
             INIT KMEMLEAK END after-tests\n\
             INIT KMEMLEAK BEGIN after-unload\n\
             unreferenced object 0xffff888003b1c000 (size 64):\n\
             \x20 comm \"insmod\", pid 61, jiffies 4294893165\n\
             INIT KMEMLEAK END after-unload\n\
             INIT rmmod picoevb.ko rc=0\n\
             INIT DONE\n",
        );
        assert_eq!(
            c.insmod,
            vec![("picoevb.ko".into(), 0), ("other.ko".into(), 1)]
        );
        assert_eq!(c.rmmod, vec![("picoevb.ko".into(), 0)]);
        assert_eq!(c.guest_rc, Some(1));
        assert_eq!(c.kmemleak.len(), 2);
        assert!(c.kmemleak[0].lines.is_empty() && c.kmemleak[0].complete);
        assert_eq!(c.kmemleak[1].lines.len(), 2);
        assert!(c.kmemleak[1].complete);
        assert!(c.done);
        // The kmemleak dump is not mistaken for a splat.
        assert!(c.splats.is_empty());
    }

    #[test]
    fn splats_caught_benign_ignored() {
        let c = feed_all(
            "[    0.4] DMA-API: preallocated 65536 debug entries\n\
             [    0.5] RETBleed: WARNING: Spectre v2 mitigation leaves CPU vulnerable to RETBleed attacks\n\
             [    0.6] kasan: KernelAddressSanitizer initialized\n\
             [    1.0] picoevb 0000:01:00.0: probe done\n\
             [    5.1] ==================================================================\n\
             [    5.1] BUG: KASAN: slab-use-after-free in picoevb_ioctl+0x1c/0x80 [picoevb]\n\
             [    5.2] Call Trace:\n\
             [    6.0] WARNING: CPU: 1 PID: 80 at kernel/dma/debug.c:1018 check_unmap+0x6f0/0x8c0\n\
             [    6.1] DMA-API: picoevb 0000:01:00.0: device driver tries to free DMA memory it has not allocated\n\
             [    7.0] WARNING: possible circular locking dependency detected\n\
             TEST errors::x ... FAILED: BUG: this is the guest's own text\n",
        );
        let caught: Vec<&str> = c.splats.iter().map(|&i| c.lines[i].as_str()).collect();
        assert_eq!(caught.len(), 5, "{caught:#?}");
        assert!(caught[0].contains("BUG: KASAN"));
        assert!(caught[1].contains("Call Trace:"));
        assert!(caught[3].contains("DMA-API: picoevb"));
        assert!(caught[4].contains("circular locking"));
        assert!(!is_splat(
            "[    1.0] picoevb 0000:01:00.0: enabling device (0000 -> 0002)"
        ));
        assert!(!is_splat(
            "[    0.4] DMA-API: preallocated 65536 debug entries"
        ));
        assert!(is_splat(
            "[   9.9] Oops: general protection fault, probably for non-canonical address"
        ));
        assert_eq!(c.context(c.splats[0], 1).len(), 2);
        assert_eq!(
            c.boot_splats(),
            5,
            "no INIT loading modules line: all count as boot"
        );
    }

    #[test]
    fn boot_splats_are_told_apart() {
        let c = feed_all(
            "BUG: KASAN: wild-memory-access in rcu_is_watching+0x24/0x50\n\
             INIT loading modules\n\
             WARNING: possible recursive locking detected\n",
        );
        assert_eq!((c.splats.len(), c.boot_splats()), (2, 1));
    }
}
