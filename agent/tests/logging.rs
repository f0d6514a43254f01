//! The agent's log lines carry their syslog priority where stderr is the journal (systemd's
//! `JOURNAL_STREAM`) and read plainly elsewhere: the real binary, a refused config.

use std::os::unix::fs::MetadataExt;
use std::process::Command;

/// Runs gdr-agent on a config it refuses, stderr into a file; `journal` sets `JOURNAL_STREAM` to that
/// file, as systemd does for the journal's stream. Returns what it wrote.
fn refused_start(tag: &str, journal: bool) -> String {
    let dir = std::env::temp_dir().join(format!("gdr-logging-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    std::fs::write(&config, "[selftest]\nmemory = \"gpu\"\n").unwrap();
    let err = std::fs::File::create(dir.join("stderr")).unwrap();
    let m = err.metadata().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gdr-agent"));
    cmd.args(["--config", config.to_str().unwrap()])
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .stderr(err);
    if journal {
        cmd.env("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino()));
    }
    assert_eq!(cmd.status().unwrap().code(), Some(1));
    let text = std::fs::read_to_string(dir.join("stderr")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    text
}

#[test]
fn each_line_has_its_priority_under_the_journal_only() {
    let j = refused_start("journal", true);
    assert!(
        j.starts_with("<3>gdr-agent: ") && j.contains("selftest.memory"),
        "{j}"
    );
    let plain = refused_start("plain", false);
    assert!(plain.starts_with("error: gdr-agent: "), "{plain}");
}
