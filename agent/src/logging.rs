//! The agent's log: the `log` facade, one line per record on stderr. Under systemd (stderr is the journal:
//! `JOURNAL_STREAM` names its device and inode) each line carries its syslog priority as the `<N>` prefix
//! journald reads, so `journalctl -p` filters it; elsewhere (a terminal, a test) it reads `level: message`.
//! A message of several lines is written as several lines, each with the priority.

use std::io::Write;
use std::os::unix::fs::MetadataExt;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// syslog priority of a level: error 3, warn 4, info 6, debug and trace 7.
pub fn priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// The text written for one record: one line per line of the message.
pub fn format(level: Level, message: &str, journal: bool) -> String {
    let mut out = String::new();
    for line in message.lines() {
        if journal {
            out.push_str(&format!("<{}>{line}\n", priority(level)));
        } else {
            out.push_str(&format!(
                "{}: {line}\n",
                level.as_str().to_ascii_lowercase()
            ));
        }
    }
    if out.is_empty() {
        out = format(level, " ", journal);
    }
    out
}

/// Whether a stream with `(dev, ino)` is the journal stream `journal_stream` (`JOURNAL_STREAM`, `dev:ino`)
/// names.
fn is_journal(journal_stream: Option<&str>, stream: Option<(u64, u64)>) -> bool {
    let named = journal_stream.and_then(|v| {
        let (d, i) = v.split_once(':')?;
        Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?))
    });
    named.is_some() && named == stream
}

fn stderr_is_journal() -> bool {
    let stderr = std::fs::metadata("/proc/self/fd/2")
        .ok()
        .map(|m| (m.dev(), m.ino()));
    is_journal(std::env::var("JOURNAL_STREAM").ok().as_deref(), stderr)
}

struct Logger {
    journal: bool,
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record<'_>) {
        if self.enabled(r.metadata()) {
            let text = format(r.level(), &r.args().to_string(), self.journal);
            // One write per record, so records of several threads never interleave within a line.
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

/// Installs the logger once per process; `GDR_LOG` (error, warn, info, debug, trace) sets the level,
/// info by default.
pub fn init() {
    let level = std::env::var("GDR_LOG")
        .ok()
        .and_then(|v| v.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::Info);
    let logger = Box::new(Logger {
        journal: stderr_is_journal(),
    });
    if log::set_boxed_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_carries_its_priority() {
        assert_eq!(
            format(Level::Warn, "card0: remove failed\nsecond line", true),
            "<4>card0: remove failed\n<4>second line\n"
        );
        assert_eq!(format(Level::Error, "x", true), "<3>x\n");
        assert_eq!(format(Level::Info, "x", true), "<6>x\n");
        assert_eq!(format(Level::Debug, "x", true), "<7>x\n");
        assert_eq!(format(Level::Info, "x", false), "info: x\n");
        assert_eq!(format(Level::Error, "", true), "<3> \n");
    }

    #[test]
    fn the_journal_is_recognised_by_its_stream_only() {
        assert!(is_journal(Some("8:1234"), Some((8, 1234))));
        assert!(
            !is_journal(Some("8:1234"), Some((8, 1235))),
            "another stream"
        );
        assert!(!is_journal(None, Some((8, 1234))), "not under systemd");
        assert!(!is_journal(Some("8:1234"), None));
        assert!(!is_journal(Some("garbage"), Some((8, 1234))));
    }
}
