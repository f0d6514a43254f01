//! The guest <-> model RPC relay. QEMU connects the guest's second serial port to our UNIX socket; the guest
//! writes `RPC <json>\n`, we forward the JSON to the model's control socket and write its answer line back.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::thread::{self, JoinHandle};

use gdr_model_control::error_line;

use crate::control;

/// Serves one guest connection until it closes; returns the number of requests relayed. Anything that is not
/// an `RPC` line (boot noise on the port) is ignored; model failures are answered with `{"ok":false}` so the
/// guest never waits for an answer that will not come.
pub fn serve(guest: UnixStream, model_control: &Path, log: &mut impl Write) -> io::Result<u64> {
    let mut out = guest.try_clone()?;
    let mut reader = BufReader::new(guest);
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(n);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_matches(|c: char| c.is_whitespace() || c.is_control());
        // Tolerate noise in front of the marker on the same line.
        let Some(at) = text.find("RPC ") else {
            continue;
        };
        let req = text[at + 4..].trim();
        let answer = control::request(model_control, req)
            .unwrap_or_else(|e| error_line(&format!("relay: model control: {e}")));
        writeln!(log, "> {req}\n< {answer}")?;
        out.write_all(answer.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()?;
        n += 1;
    }
}

/// Accepts QEMU's one connection on `listener` and relays on a thread; the log goes to `log_path`.
pub fn spawn(
    listener: UnixListener,
    model_control: PathBuf,
    log_path: PathBuf,
) -> JoinHandle<io::Result<u64>> {
    thread::spawn(move || {
        let (guest, _) = listener.accept()?;
        let mut log = std::fs::File::create(&log_path)?;
        serve(guest, &model_control, &mut log)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A fake model: answers each request line on each connection with a line derived from it.
    fn fake_model(path: &Path) -> JoinHandle<()> {
        let l = UnixListener::bind(path).unwrap();
        thread::spawn(move || {
            for conn in l.incoming() {
                let conn = conn.unwrap();
                let mut w = conn.try_clone().unwrap();
                for req in BufReader::new(conn).lines() {
                    let v: serde_json::Value = serde_json::from_str(&req.unwrap()).unwrap();
                    let answer = match v["cmd"].as_str() {
                        Some("state") => serde_json::json!({"ok": true, "leds": 5}),
                        Some(other) => {
                            serde_json::json!({"ok": false, "error": format!("unknown {other}")})
                        }
                        None => serde_json::json!({"ok": false, "error": "no cmd"}),
                    };
                    writeln!(w, "{answer}").unwrap();
                }
            }
        })
    }

    fn read_line(s: &mut UnixStream) -> String {
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
            out.push(b[0]);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn relays_requests_and_skips_noise() {
        let dir = std::env::temp_dir().join(format!("gdr-relay-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ctl = dir.join("ctl.sock");
        let _model = fake_model(&ctl);
        let (mut guest, harness_side) = UnixStream::pair().unwrap();
        let ctl2 = ctl.clone();
        let relay = thread::spawn(move || serve(harness_side, &ctl2, &mut Vec::new()));

        guest.write_all(b"\x00\xffboot noise\r\n").unwrap();
        guest.write_all(b"RPC {\"cmd\":\"state\"}\n").unwrap();
        let a: serde_json::Value = serde_json::from_str(&read_line(&mut guest)).unwrap();
        assert_eq!(a, serde_json::json!({"ok": true, "leds": 5}));
        guest.write_all(b"RPC {\"cmd\":\"bogus\"}\r\n").unwrap();
        let a: serde_json::Value = serde_json::from_str(&read_line(&mut guest)).unwrap();
        assert_eq!(
            a,
            serde_json::json!({"ok": false, "error": "unknown bogus"})
        );
        drop(guest);
        assert_eq!(relay.join().unwrap().unwrap(), 2);

        // With no model the guest still gets an answer.
        let (mut guest, harness_side) = UnixStream::pair().unwrap();
        let missing = dir.join("missing.sock");
        let relay = thread::spawn(move || serve(harness_side, &missing, &mut Vec::new()));
        guest.write_all(b"RPC {\"cmd\":\"state\"}\n").unwrap();
        let a: serde_json::Value = serde_json::from_str(&read_line(&mut guest)).unwrap();
        assert_eq!(a["ok"], false);
        assert!(
            a["error"]
                .as_str()
                .unwrap()
                .starts_with("relay: model control")
        );
        drop(guest);
        relay.join().unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
