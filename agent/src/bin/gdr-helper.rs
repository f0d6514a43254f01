//! `gdr-helper`: the privileged on-demand helper (root, started by systemd per connection on
//! `gdr-helper.socket`). Serves only the agent's user (checked on the socket, not only by its mode); reads
//! one request line on stdin, answers one line on stdout. Strict: only PicoEVB functions are removed, only
//! images of the shipped bitstream directory are loaded, and only with the bytes the agent checked, through
//! the fpga-bitstream/program scripts.

use std::io::{BufRead, Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, ExitCode};

use gdr_agent::access::uid_of;
use gdr_agent::sys::privileged::{PrivilegedError, check_peer, check_picoevb, file, stage_image};
use gdr_agent::sys::request::{MAX_LINE, Request};

const SYS: &str = "/sys";
const BITSTREAMS: &str = "/usr/share/gdr/bitstream";
const SCRIPTS: &str = "/usr/share/gdr/program";
/// The agent's user: the only one served.
const AGENT_USER: &str = "gdr";

fn main() -> ExitCode {
    gdr_agent::logging::init();
    let mut line = String::new();
    let stdin = std::io::stdin();
    let reply = serve(&stdin, &mut line);
    let (text, code) = match reply {
        Ok(t) => (format!("ok {t}"), ExitCode::SUCCESS),
        Err(e) => {
            log::warn!(
                "gdr-helper: refused '{}': {e}",
                line.trim_end().escape_debug()
            );
            (format!("error {e}"), ExitCode::FAILURE)
        }
    };
    let _ = writeln!(std::io::stdout(), "{}", text.replace('\n', " "));
    code
}

fn serve(stdin: &std::io::Stdin, line: &mut String) -> Result<String, PrivilegedError> {
    let agent = uid_of(AGENT_USER).ok_or(PrivilegedError::NoAgentUser(AGENT_USER))?;
    check_peer(stdin.as_fd(), agent)?;
    stdin
        .lock()
        .take(MAX_LINE as u64 + 1)
        .read_line(line)
        .map_err(PrivilegedError::Read)?;
    let req = Request::parse(line.strip_suffix('\n').unwrap_or(line))?;
    handle(&req)
}

fn handle(req: &Request) -> Result<String, PrivilegedError> {
    match req {
        Request::Remove(bdf) => {
            check_picoevb(Path::new(SYS), bdf)?;
            let remove = Path::new(SYS)
                .join("bus/pci/devices")
                .join(bdf)
                .join("remove");
            std::fs::write(&remove, "1").map_err(file(&remove))?;
            Ok(format!("removed {bdf}"))
        }
        Request::Rescan => {
            let rescan = Path::new(SYS).join("bus/pci/rescan");
            std::fs::write(&rescan, "1").map_err(file(&rescan))?;
            Ok("rescanned".into())
        }
        Request::JtagSram(j) | Request::JtagFlash(j) => {
            // A private copy of exactly the checked bytes (PrivateTmp: nobody else sees this /tmp).
            let staged = stage_image(
                Path::new(BITSTREAMS),
                &j.image,
                &j.sha256,
                &std::env::temp_dir(),
            )?;
            let mut cmd = match req {
                Request::JtagSram(_) => Command::new(Path::new(SCRIPTS).join("load-sram.sh")),
                _ => {
                    let mut c = Command::new(Path::new(SCRIPTS).join("flash-update.sh"));
                    c.arg("--reload");
                    c
                }
            };
            cmd.arg(&staged.path)
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
            if let Some(s) = &j.serial {
                cmd.env("GDR_JTAG_SERIAL", s);
            }
            let out = cmd.output().map_err(|e| {
                PrivilegedError::Script(format!("cannot run the programming script: {e}"))
            })?;
            let text = String::from_utf8_lossy(if out.status.success() {
                &out.stdout
            } else {
                &out.stderr
            });
            let last = text.lines().last().unwrap_or("").to_string();
            if out.status.success() {
                Ok(last)
            } else {
                Err(PrivilegedError::Script(format!("{}: {last}", out.status)))
            }
        }
    }
}
