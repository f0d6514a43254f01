//! The `gdr-agent` binary as systemd runs it: READY=1 and STATUS= over $NOTIFY_SOCKET once every card
//! has settled, WATCHDOG=1 while healthy, a clean stop on SIGTERM, and a malformed config refused at start
//! with file, line and key.

mod common;

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn notifies_ready_status_and_watchdog() {
    let Some(bus) = common::start_bus("daemon") else {
        return;
    };
    let dir = bus.dir.join("d");
    std::fs::create_dir_all(&dir).unwrap();
    // One card that cannot be found here (no PicoEVB on a build machine): it fails at discover, which
    // settles it, so READY=1 must come and STATUS= must name the failure.
    let config = dir.join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "[agent]\nbitstream_dir = \"{d}\"\nstate_dir = \"{d}/state\"\nmetrics_file = \"{d}/m/gdr.prom\"\n\
             [retry]\nattempts = 1\nbackoff_ms = 0\n[health]\ninterval_s = 1\n\
             [[card]]\npci = \"0000:7f:1f.7\"\ndevice = \"/dev/picoevb0\"\nloader = \"none\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let sock_path = dir.join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gdr-agent"))
        .args(["--config", config.to_str().unwrap(), "--bus", &bus.address])
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "1000000")
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let (mut ready, mut status, mut watchdog) = (false, String::new(), 0);
    let mut buf = [0u8; 4096];
    while t0.elapsed() < Duration::from_secs(20) && !(ready && watchdog >= 2) {
        let Ok(n) = sock.recv(&mut buf) else { break };
        for line in String::from_utf8_lossy(&buf[..n]).lines() {
            match line {
                "READY=1" => ready = true,
                "WATCHDOG=1" => watchdog += 1,
                l if l.starts_with("STATUS=") => status = l.to_string(),
                _ => {}
            }
        }
    }
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let exit = child.wait().unwrap();
    assert!(ready, "no READY=1");
    assert!(
        status.contains("card0 failed at discover: no PicoEVB at 0000:7f:1f.7"),
        "{status}"
    );
    assert!(watchdog >= 2, "watchdog pinged {watchdog} times");
    assert!(exit.success(), "SIGTERM is a clean stop: {exit}");
    let metrics = std::fs::read_to_string(dir.join("m/gdr.prom")).unwrap();
    assert!(
        metrics.contains("gdr_card_stage{card=\"0\",stage=\"failed\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_malformed_config_stops_the_start_with_file_line_and_key() {
    let dir = std::env::temp_dir().join(format!("gdr-daemon-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    std::fs::write(&config, "[selftest]\nbytes = 65536\nmemory = \"gpu\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gdr-agent"))
        .args(["--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:3: selftest.memory: unknown variant `gpu`",
            config.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reload_during_bring_up_does_not_tell_systemd_the_start_is_over() {
    let Some(bus) = common::start_bus("daemon-hup") else {
        return;
    };
    let dir = bus.dir.join("d");
    std::fs::create_dir_all(&dir).unwrap();
    // Discovery fails three times 1.5 s apart: the card settles (failed) after about 4.5 s.
    let config = dir.join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "[agent]\nbitstream_dir = \"{d}\"\nstate_dir = \"{d}/state\"\nmetrics_file = \"\"\n\
             [retry]\nattempts = 3\nbackoff_ms = 1500\nmax_backoff_ms = 3000\n\
             [[card]]\npci = \"0000:7f:1f.7\"\ndevice = \"/dev/picoevb0\"\nloader = \"none\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let sock_path = dir.join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gdr-agent"))
        .args(["--config", config.to_str().unwrap(), "--bus", &bus.address])
        .env("NOTIFY_SOCKET", &sock_path)
        .spawn()
        .unwrap();
    let (mut status, mut hup_sent, mut ready_with) = (String::new(), false, None);
    let mut buf = [0u8; 4096];
    while ready_with.is_none() {
        let Ok(n) = sock.recv(&mut buf) else { break };
        for line in String::from_utf8_lossy(&buf[..n]).lines() {
            if line.starts_with("STATUS=") {
                status = line.to_string();
                if !hup_sent {
                    hup_sent = true;
                    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
                    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
                }
            }
            if line == "READY=1" {
                ready_with = Some(status.clone());
            }
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    assert!(hup_sent);
    let ready_with = ready_with.expect("no READY=1");
    assert!(
        ready_with.contains("failed at discover"),
        "READY=1 came before the card settled, with {ready_with}"
    );
}

#[test]
fn the_watchdog_is_withheld_once_the_bus_connection_is_lost() {
    let Some(mut bus) = common::start_bus("daemon-busloss") else {
        return;
    };
    let dir = bus.dir.join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "[agent]\nbitstream_dir = \"{d}\"\nstate_dir = \"{d}/state\"\nmetrics_file = \"\"\n\
             [retry]\nattempts = 1\nbackoff_ms = 0\n[health]\ninterval_s = 1\n\
             [[card]]\npci = \"0000:7f:1f.7\"\ndevice = \"/dev/picoevb0\"\nloader = \"none\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let sock_path = dir.join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gdr-agent"))
        .args(["--config", config.to_str().unwrap(), "--bus", &bus.address])
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "1000000")
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let mut count = |until: Instant| {
        let mut n = 0;
        while Instant::now() < until {
            if let Ok(len) = sock.recv(&mut buf) {
                n += String::from_utf8_lossy(&buf[..len])
                    .lines()
                    .filter(|l| *l == "WATCHDOG=1")
                    .count();
            }
        }
        n
    };
    let before = count(Instant::now() + Duration::from_secs(4));
    bus.kill();
    let after = count(Instant::now() + Duration::from_secs(5));
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    assert!(before >= 2, "fed {before} times while the bus was up");
    // A ping already under way when the bus went may still land.
    assert!(
        after <= 1,
        "fed {after} times after the bus connection was lost"
    );
}
