//! The harness's own checks on the console, and the final tally of guest tests plus checks.

use crate::console::Console;

/// A harness check, with console lines as evidence when it fails.
#[derive(Debug)]
pub struct Check {
    pub name: &'static str,
    pub failure: Option<String>,
    pub evidence: Vec<String>,
}

impl Check {
    fn pass(name: &'static str) -> Self {
        Check {
            name,
            failure: None,
            evidence: Vec::new(),
        }
    }
    fn fail(name: &'static str, why: String, evidence: Vec<String>) -> Self {
        Check {
            name,
            failure: Some(why),
            evidence,
        }
    }
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// What the run itself saw besides the console.
#[derive(Debug, Default)]
pub struct RunFacts {
    pub timed_out: bool,
    pub interrupted: bool,
    pub elapsed_s: u64,
    /// Tails of QEMU's stderr and the model's log, for a guest that never finished.
    pub qemu_stderr: Vec<String>,
    pub model_log: Vec<String>,
    /// Faults the FPGA models injected, over all cards; `None` if a model did not answer at the end.
    pub faults_injected: Option<u64>,
}

/// Console lines that mention any of `needles`, at most `max`.
fn grep(c: &Console, needles: &[&str], max: usize) -> Vec<String> {
    c.lines
        .iter()
        .filter(|l| needles.iter().any(|n| l.contains(n)))
        .take(max)
        .cloned()
        .collect()
}

/// `INIT insmod|rmmod` results for every module: each must appear with rc 0.
fn module_step(
    c: &Console,
    name: &'static str,
    verb: &str,
    results: &[(String, i32)],
    modules: &[String],
) -> Check {
    let bad: Vec<String> = modules
        .iter()
        .filter_map(|m| match results.iter().find(|(n, _)| n == m) {
            Some((_, 0)) => None,
            Some((_, rc)) => Some(format!("{verb} {m} rc={rc}")),
            None => Some(format!("{verb} {m} never ran")),
        })
        .collect();
    if bad.is_empty() {
        return Check::pass(name);
    }
    let stems: Vec<&str> = modules.iter().map(|m| m.trim_end_matches(".ko")).collect();
    let mut needles = stems;
    let marker = format!("INIT {verb}");
    needles.push(&marker);
    Check::fail(name, bad.join(", "), grep(c, &needles, 16))
}

fn splats(c: &Console) -> Check {
    const NAME: &str = "kernel: no splats";
    if c.splats.is_empty() {
        return Check::pass(NAME);
    }
    let mut ev = Vec::new();
    let mut last_shown = None;
    for &i in c.splats.iter().take(4) {
        // Splat lines close together belong to one report: show its context once.
        if last_shown.is_some_and(|l| i <= l) {
            continue;
        }
        ev.extend(c.context(i, 10));
        ev.push("...".into());
        last_shown = Some(i + 10);
    }
    let mut why = format!("{} splat line(s)", c.splats.len());
    let boot = c.boot_splats();
    if boot > 0 {
        why += &format!(
            " ({boot} during boot, before the modules were loaded; a splat taints the kernel and turns \
             lockdep off for the rest of the run)"
        );
    }
    Check::fail(NAME, why, ev)
}

fn kmemleak(c: &Console) -> Check {
    const NAME: &str = "kernel: no kmemleak reports";
    if c.kmemleak_unavailable {
        return Check::fail(
            NAME,
            "kmemleak unavailable (CONFIG_DEBUG_KMEMLEAK off or disabled)".into(),
            vec![],
        );
    }
    if c.kmemleak.is_empty() {
        return Check::fail(
            NAME,
            "not checked: the guest never reached the kmemleak dump".into(),
            vec![],
        );
    }
    if let Some(k) = c.kmemleak.iter().find(|k| !k.complete) {
        return Check::fail(
            NAME,
            format!("kmemleak dump {} cut short", k.phase),
            k.lines.clone(),
        );
    }
    let leaks: Vec<&str> = c
        .kmemleak
        .iter()
        .filter(|k| !k.lines.is_empty())
        .map(|k| k.phase.as_str())
        .collect();
    if leaks.is_empty() {
        return Check::pass(NAME);
    }
    let objects = c
        .kmemleak
        .iter()
        .flat_map(|k| &k.lines)
        .filter(|l| l.contains("unreferenced object"))
        .count();
    let ev = c
        .kmemleak
        .iter()
        .flat_map(|k| k.lines.iter().take(30))
        .cloned()
        .collect();
    Check::fail(
        NAME,
        format!("{objects} unreferenced object(s), in {}", leaks.join(", ")),
        ev,
    )
}

fn finished(c: &Console, f: &RunFacts) -> Check {
    const NAME: &str = "guest: finished";
    if c.done && !f.timed_out && !f.interrupted {
        return Check::pass(NAME);
    }
    let why = if f.interrupted {
        "interrupted".to_string()
    } else if f.timed_out {
        format!("no INIT DONE within {} s (timeout)", f.elapsed_s)
    } else {
        "QEMU exited before INIT DONE".to_string()
    };
    let mut ev = vec!["last console lines:".to_string()];
    ev.extend(c.tail(15));
    if !f.qemu_stderr.is_empty() {
        ev.push("qemu stderr:".into());
        ev.extend(f.qemu_stderr.iter().cloned());
    }
    if !f.model_log.is_empty() {
        ev.push("model log:".into());
        ev.extend(f.model_log.iter().cloned());
    }
    Check::fail(NAME, why, ev)
}

/// The guest printed its summary, it agrees with its TEST lines, and its exit code agrees with it.
fn result_reported(c: &Console) -> Check {
    const NAME: &str = "guest: result reported";
    let Some((p, f, k)) = c.guest_result else {
        let why = if c
            .init_lines
            .iter()
            .any(|&i| c.lines[i].contains("no /dev/picoevb0"))
        {
            "no /dev/picoevb0 appeared, the guest program never ran"
        } else {
            "no GUEST RESULT line (guest program crashed or hung?)"
        };
        return Check::fail(NAME, why.into(), grep(c, &["INIT "], 10));
    };
    let (tp, tf, tk) = (c.passed(), c.failed(), c.skipped());
    if (p as usize, f as usize, k as usize) != (tp, tf, tk) {
        return Check::fail(
            NAME,
            format!(
                "GUEST RESULT says {p} passed, {f} failed, {k} skipped, but TEST lines show {tp}, {tf} \
                 and {tk}"
            ),
            vec![],
        );
    }
    match c.guest_rc {
        Some(rc) if (rc == 0) == (f == 0) => Check::pass(NAME),
        rc => Check::fail(
            NAME,
            format!("guest exit code {rc:?} disagrees with {f} failed"),
            vec![],
        ),
    }
}

/// Every harness check, in report order. The appliance loads its modules through udev and runs far more
/// of the kernel than the driver (systemd, cgroups, BPF): its scenario checks the modules itself, and kmemleak
/// is left to the bench suites, where every leak is the driver's.
pub fn checks(c: &Console, modules: &[String], facts: &RunFacts, appliance: bool) -> Vec<Check> {
    if appliance {
        return vec![splats(c), finished(c, facts), result_reported(c)];
    }
    vec![
        module_step(c, "kernel: module loads", "insmod", &c.insmod, modules),
        splats(c),
        kmemleak(c),
        module_step(c, "kernel: module unloads", "rmmod", &c.rmmod, modules),
        finished(c, facts),
        result_reported(c),
    ]
}

/// The number after `key` in `line` (e.g. "FOLL_PIN pages held " in a guest counters line).
fn number_after(line: &str, key: &str) -> Option<i64> {
    let rest = &line[line.find(key)? + key.len()..];
    let end = rest
        .find(|ch: char| !(ch.is_ascii_digit() || ch == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// `after - before` of a counter in the guest's counter lines (the suite's "GUEST COUNTERS", the fuzzer's
/// "GUEST FUZZ counters"), from the last pair printed.
fn counter_delta(c: &Console, key: &str) -> Option<i64> {
    let last = |prefixes: &[&str]| {
        c.lines
            .iter()
            .rev()
            .find(|l| prefixes.iter().any(|p| l.starts_with(p)))
            .and_then(|l| number_after(l, key))
    };
    let before = last(&["GUEST COUNTERS before", "GUEST FUZZ counters before"])?;
    let after = last(&["GUEST COUNTERS now", "GUEST FUZZ counters after"])?;
    Some(after - before)
}

/// The run's figures in one line: what was exercised and what it left behind. `-` where the run had no
/// way to know (no counters printed by this guest mode, a model that did not answer).
pub fn figures(c: &Console, facts: &RunFacts) -> String {
    let opt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    let reports: usize = c
        .kmemleak
        .iter()
        .flat_map(|k| &k.lines)
        .filter(|l| l.contains("unreferenced object"))
        .count();
    format!(
        "FIGURES guest tests run {}, faults injected {}, kernel splat lines {}, kmemleak reports {reports}, \
         FOLL_PIN pages leaked {}, DMA mappings leaked {}",
        c.tests.iter().filter(|t| t.skipped.is_none()).count(),
        opt(facts.faults_injected.map(|n| n as i64)),
        c.splats.len(),
        opt(counter_delta(c, "FOLL_PIN pages held ")),
        opt(counter_delta(c, "dma-debug entries in use ")),
    )
}

/// The `n` guest tests that took longest, where the guest timed them: where a run's minutes go.
pub fn slowest(c: &Console, n: usize) -> Option<String> {
    let mut timed: Vec<_> = c
        .tests
        .iter()
        .filter_map(|t| Some((t.seconds?, t.name.as_str())))
        .collect();
    if timed.is_empty() {
        return None;
    }
    let total: f64 = timed.iter().map(|(s, _)| s).sum();
    timed.sort_by(|a, b| b.0.total_cmp(&a.0));
    let top: Vec<_> = timed
        .iter()
        .take(n)
        .map(|(s, name)| format!("{name} {s:.1} s"))
        .collect();
    Some(format!(
        "SLOWEST of {total:.0} s in tests: {}",
        top.join(", ")
    ))
}

/// Prints failing guest tests, every check (failing ones with evidence) and the closing tally; returns
/// whether the run succeeded.
pub fn print(c: &Console, checks: &[Check], expect_failures: bool) -> bool {
    println!();
    if let Some(seed) = c.seed {
        println!("guest seed {seed} (rerun with --guest-args \"--seed {seed}\")");
    }
    for t in c.tests.iter().filter(|t| t.failure.is_some()) {
        println!(
            "FAILED guest {}: {}",
            t.name,
            t.failure.as_deref().unwrap_or_default()
        );
    }
    if let Some(line) = slowest(c, 5) {
        println!("{line}");
    }
    for t in &c.tests {
        if let Some(why) = &t.skipped {
            println!("SKIPPED guest {}: {why}", t.name);
        }
    }
    for k in checks {
        match &k.failure {
            None => println!("CHECK {} ... ok", k.name),
            Some(why) => {
                println!("CHECK {} ... FAILED: {why}", k.name);
                for l in &k.evidence {
                    println!("    | {l}");
                }
            }
        }
    }
    let checks_failed = checks.iter().filter(|k| !k.ok()).count();
    let passed = c.passed() + checks.len() - checks_failed;
    let failed = c.failed() + checks_failed;
    let ok = if expect_failures {
        let ok = c.failed() >= 1 && checks_failed == 0;
        println!(
            "expect-failures: guest reported {} failed test(s), {checks_failed} harness check(s) failed: {}",
            c.failed(),
            if ok { "as expected" } else { "NOT as expected" }
        );
        ok
    } else {
        failed == 0
    };
    // Skipped guest tests are neither: the suffix only appears when there are some, so a run without skips
    // prints exactly what it always did.
    match c.skipped() {
        0 => println!("{passed} passed, {failed} failed"),
        k => println!("{passed} passed, {failed} failed, {k} skipped"),
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console(text: &str) -> Console {
        let mut c = Console::default();
        for l in text.lines() {
            c.feed(l);
        }
        c
    }

    const GOOD: &str = "INIT insmod picoevb.ko rc=0\n\
        TEST a ... ok\nTEST b ... ok\nGUEST RESULT: 2 passed, 0 failed\nINIT guest rc=0\n\
        INIT KMEMLEAK BEGIN after-tests\nINIT KMEMLEAK END after-tests\n\
        INIT rmmod picoevb.ko rc=0\n\
        INIT KMEMLEAK BEGIN after-unload\nINIT KMEMLEAK END after-unload\nINIT DONE\n";

    #[test]
    fn appliance_checks_skip_module_steps_but_not_the_verdict() {
        // No insmod/rmmod/kmemleak lines (udev loads the modules), yet a clean scenario passes...
        let ok = "TEST agent: ready ... ok\nGUEST RESULT: 1 passed, 0 failed\nINIT guest rc=0\nINIT DONE\n";
        let ks = checks(&console(ok), &[], &RunFacts::default(), true);
        assert_eq!(ks.len(), 3);
        assert!(ks.iter().all(Check::ok), "{ks:#?}");
        // ...and a scenario that never finished, or a splat, does not.
        let cut = "TEST agent: ready ... ok\n";
        assert!(
            !checks(&console(cut), &[], &RunFacts::default(), true)
                .iter()
                .all(Check::ok)
        );
        let splat = format!("{ok}BUG: KASAN: slab-use-after-free in x\n");
        assert!(
            !checks(&console(&splat), &[], &RunFacts::default(), true)
                .iter()
                .all(Check::ok)
        );
    }

    #[test]
    fn clean_run_passes() {
        let c = console(GOOD);
        let ks = checks(&c, &["picoevb.ko".into()], &RunFacts::default(), false);
        assert!(ks.iter().all(Check::ok), "{ks:#?}");
        assert!(print(&c, &ks, false));
        assert!(
            !print(&c, &ks, true),
            "expect-failures needs a failed guest test"
        );
    }

    #[test]
    fn failures_are_found() {
        let text = GOOD
            .replace("TEST b ... ok", "TEST b ... FAILED: nope")
            .replace("2 passed, 0 failed", "1 passed, 1 failed")
            .replace("guest rc=0", "guest rc=1")
            .replace("rmmod picoevb.ko rc=0", "rmmod picoevb.ko rc=1")
            .replace(
                "INIT KMEMLEAK END after-unload",
                "unreferenced object 0xffff888004d0 (size 32):\nINIT KMEMLEAK END after-unload",
            );
        let c = console(&text);
        let ks = checks(&c, &["picoevb.ko".into()], &RunFacts::default(), false);
        let failed: Vec<&str> = ks.iter().filter(|k| !k.ok()).map(|k| k.name).collect();
        assert_eq!(
            failed,
            vec!["kernel: no kmemleak reports", "kernel: module unloads"]
        );
        assert!(!print(&c, &ks, true), "harness checks failed too");

        let c = console(&GOOD.replace("INIT DONE\n", ""));
        let facts = RunFacts {
            timed_out: true,
            elapsed_s: 900,
            ..Default::default()
        };
        let ks = checks(&c, &["picoevb.ko".into(), "other.ko".into()], &facts, false);
        let failed: Vec<&str> = ks.iter().filter(|k| !k.ok()).map(|k| k.name).collect();
        assert_eq!(
            failed,
            vec![
                "kernel: module loads",
                "kernel: module unloads",
                "guest: finished"
            ]
        );
    }

    #[test]
    fn expect_failures_accepts_a_failing_guest() {
        let text = GOOD
            .replace("TEST b ... ok", "TEST b ... FAILED: injected")
            .replace("2 passed, 0 failed", "1 passed, 1 failed")
            .replace("guest rc=0", "guest rc=1");
        let c = console(&text);
        let ks = checks(&c, &["picoevb.ko".into()], &RunFacts::default(), false);
        assert!(ks.iter().all(Check::ok), "{ks:#?}");
        assert!(print(&c, &ks, true));
        assert!(!print(&c, &ks, false));
    }

    #[test]
    fn result_line_must_match_test_lines() {
        let c = console(&GOOD.replace("2 passed", "3 passed"));
        assert!(!result_reported(&c).ok());
        let c = console(&GOOD.replace("guest rc=0", "guest rc=1"));
        assert!(!result_reported(&c).ok());
    }

    #[test]
    fn skipped_tests_are_counted_apart() {
        let skipping = GOOD.replace(
            "TEST b ... ok\nGUEST RESULT: 2 passed, 0 failed\n",
            "TEST b ... ok\nTEST c ... skipped (no provider)\nGUEST RESULT: 2 passed, 0 failed, 1 skipped\n",
        );
        let c = console(&skipping);
        assert_eq!((c.passed(), c.failed(), c.skipped()), (2, 0, 1));
        let ks = checks(&c, &["picoevb.ko".into()], &RunFacts::default(), false);
        assert!(ks.iter().all(Check::ok), "{ks:#?}");
        assert!(print(&c, &ks, false), "a skip is not a failure");
        // The summary must count the skip too.
        let c = console(&skipping.replace(", 1 skipped", ""));
        assert!(!result_reported(&c).ok());
        let c = console(&skipping.replace("1 skipped", "0 skipped"));
        assert!(!result_reported(&c).ok());
        // The old two-field summary still parses (as 0 skipped).
        let c = console(&GOOD.replace("0 failed\n", "0 failed, 0 skipped\n"));
        assert!(result_reported(&c).ok());
    }

    #[test]
    fn figures_count_what_the_run_left() {
        let c = console(
            "TEST a ... ok\nTEST b ... FAILED: x\nTEST c ... skipped (why)\n\
             GUEST COUNTERS before the first test: dma-api error_count 0, dma-debug entries in use 2, FOLL_PIN pages held 0\n\
             GUEST COUNTERS now: dma-api error_count 0, dma-debug entries in use 5, FOLL_PIN pages held -3\n\
             INIT KMEMLEAK BEGIN after-tests\nunreferenced object 0xffff (size 64):\n  comm \"x\"\n\
             INIT KMEMLEAK END after-tests\n",
        );
        let facts = RunFacts {
            faults_injected: Some(7),
            ..Default::default()
        };
        assert_eq!(
            figures(&c, &facts),
            "FIGURES guest tests run 2, faults injected 7, kernel splat lines 0, kmemleak reports 1, \
             FOLL_PIN pages leaked -3, DMA mappings leaked 3"
        );
        let bare = console("TEST a ... ok\n");
        assert!(figures(&bare, &RunFacts::default()).contains("faults injected -, "));
        assert!(
            figures(&bare, &RunFacts::default()).ends_with("pages leaked -, DMA mappings leaked -")
        );
    }

    #[test]
    fn fuzz_counter_lines_count_too() {
        let c = console(
            "GUEST FUZZ counters before: dma-api error_count 0, dma-debug entries in use 2, FOLL_PIN pages held 4\n\
             GUEST FUZZ counters after:  dma-api error_count 0, dma-debug entries in use 2, FOLL_PIN pages held 4\n",
        );
        assert_eq!(counter_delta(&c, "FOLL_PIN pages held "), Some(0));
        assert_eq!(number_after("x held -12, y", "held "), Some(-12));
        assert_eq!(number_after("x held", "held "), None);
    }

    #[test]
    fn slowest_tests_by_guest_time() {
        let c = console(
            "TEST a ... ok [1.0 s]\nTEST b ... FAILED: x [9.5 s]\nTEST c ... ok [3.2 s]\nTEST d ... ok\n",
        );
        assert_eq!(
            slowest(&c, 2).as_deref(),
            Some("SLOWEST of 14 s in tests: b 9.5 s, c 3.2 s")
        );
        assert_eq!(slowest(&console("TEST a ... ok\n"), 2), None);
    }
}
