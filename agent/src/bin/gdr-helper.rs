//! `gdr-helper`: the privileged on-demand helper (root, started by systemd per connection on
//! `gdr-helper.socket`, which only user gdr may open). Reads one request line on stdin, answers one line
//! on stdout. Strict: only PicoEVB functions are removed, only images of the shipped bitstream directory
//! are loaded, through the fpga-bitstream/program scripts.

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode};

use gdr_agent::sys::request::{MAX_LINE, Request};
use picoevb_regs::pci::{DEVICE_ID, VENDOR_ID};

const SYS_PCI: &str = "/sys/bus/pci";
const BITSTREAMS: &str = "/usr/share/gdr/bitstream";
const SCRIPTS: &str = "/usr/share/gdr/program";

fn main() -> ExitCode {
    let mut line = String::new();
    let stdin = std::io::stdin();
    let n = stdin.lock().take(MAX_LINE as u64 + 1).read_line(&mut line);
    let reply = match n {
        Ok(_) => match Request::parse(line.strip_suffix('\n').unwrap_or(&line)) {
            Ok(req) => handle(&req).map(|m| format!("ok {m}")),
            Err(e) => Err(e),
        },
        Err(e) => Err(e.to_string()),
    };
    let (text, code) = match reply {
        Ok(t) => (t, ExitCode::SUCCESS),
        Err(e) => {
            eprintln!(
                "gdr-helper: refused '{}': {e}",
                line.trim_end().escape_debug()
            );
            (format!("error {e}"), ExitCode::FAILURE)
        }
    };
    let _ = writeln!(std::io::stdout(), "{}", text.replace('\n', " "));
    code
}

fn hex(p: &Path) -> Option<u32> {
    let s = std::fs::read_to_string(p).ok()?;
    u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

fn handle(req: &Request) -> Result<String, String> {
    match req {
        Request::Remove(bdf) => {
            let dev = Path::new(SYS_PCI).join("devices").join(bdf);
            if hex(&dev.join("vendor")) != Some(VENDOR_ID.into())
                || hex(&dev.join("device")) != Some(DEVICE_ID.into())
            {
                return Err(format!("{bdf} is not a PicoEVB"));
            }
            std::fs::write(dev.join("remove"), "1").map_err(|e| format!("remove {bdf}: {e}"))?;
            Ok(format!("removed {bdf}"))
        }
        Request::Rescan => {
            std::fs::write(Path::new(SYS_PCI).join("rescan"), "1")
                .map_err(|e| format!("rescan: {e}"))?;
            Ok("rescanned".into())
        }
        Request::JtagSram { image, serial } | Request::JtagFlash { image, serial } => {
            let path = Path::new(BITSTREAMS).join(image);
            if !path.is_file() {
                return Err(format!("{} does not exist", path.display()));
            }
            let mut cmd = match req {
                Request::JtagSram { .. } => Command::new(Path::new(SCRIPTS).join("load-sram.sh")),
                _ => {
                    let mut c = Command::new(Path::new(SCRIPTS).join("flash-update.sh"));
                    c.arg("--reload");
                    c
                }
            };
            cmd.arg(&path)
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
            if let Some(s) = serial {
                cmd.env("GDR_JTAG_SERIAL", s);
            }
            let out = cmd
                .output()
                .map_err(|e| format!("cannot run the programming script: {e}"))?;
            let text = String::from_utf8_lossy(if out.status.success() {
                &out.stdout
            } else {
                &out.stderr
            });
            let last = text.lines().last().unwrap_or("").to_string();
            if out.status.success() {
                Ok(last)
            } else {
                Err(format!("{}: {last}", out.status))
            }
        }
    }
}
