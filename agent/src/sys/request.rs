//! The privileged helper's protocol: one request line in, one reply line out. Parsing is strict because
//! the helper runs as root on behalf of the unprivileged agent: only PicoEVB functions can be removed, only
//! images named in the shipped bitstream directory can be loaded.

use crate::config::valid_bdf;

/// A request to the helper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Remove PCI function BDF (must be a PicoEVB).
    Remove(String),
    /// Rescan all PCI buses.
    Rescan,
    /// Load an image from the bitstream directory into configuration SRAM over JTAG.
    JtagSram {
        image: String,
        serial: Option<String>,
    },
    /// Write an image into the MultiBoot update slot, verify it and reload the FPGA.
    JtagFlash {
        image: String,
        serial: Option<String>,
    },
}

/// Longest request line the helper reads.
pub const MAX_LINE: usize = 512;

fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('.')
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
}

fn serial(s: Option<&str>) -> Result<Option<String>, String> {
    match s {
        None => Ok(None),
        Some(s)
            if !s.is_empty() && s.len() <= 32 && s.bytes().all(|c| c.is_ascii_alphanumeric()) =>
        {
            Ok(Some(s.to_string()))
        }
        Some(s) => Err(format!("bad USB serial '{}'", s.escape_debug())),
    }
}

impl Request {
    /// Parses one line (without its newline).
    pub fn parse(line: &str) -> Result<Self, String> {
        if line.len() > MAX_LINE {
            return Err("request too long".into());
        }
        let mut words = line.split(' ');
        let verb = words.next().unwrap_or("");
        let args: Vec<&str> = words.collect();
        let req = match (verb, args.as_slice()) {
            ("remove", [bdf]) if valid_bdf(bdf) => Request::Remove(bdf.to_string()),
            ("remove", _) => return Err("usage: remove DDDD:BB:DD.F".into()),
            ("rescan", []) => Request::Rescan,
            ("jtag-sram" | "jtag-flash", [image, rest @ ..]) if rest.len() <= 1 => {
                if !plain_name(image) {
                    return Err(format!("bad image name '{}'", image.escape_debug()));
                }
                let serial = serial(rest.first().copied())?;
                let image = image.to_string();
                if verb == "jtag-sram" {
                    Request::JtagSram { image, serial }
                } else {
                    Request::JtagFlash { image, serial }
                }
            }
            _ => {
                return Err(format!(
                    "unknown request '{}' (known: remove, rescan, jtag-sram, jtag-flash)",
                    verb.escape_debug()
                ));
            }
        };
        Ok(req)
    }

    /// The line that [`Request::parse`] reads back.
    pub fn line(&self) -> String {
        match self {
            Request::Remove(b) => format!("remove {b}"),
            Request::Rescan => "rescan".into(),
            Request::JtagSram { image, serial } | Request::JtagFlash { image, serial } => {
                let verb = if matches!(self, Request::JtagSram { .. }) {
                    "jtag-sram"
                } else {
                    "jtag-flash"
                };
                match serial {
                    Some(s) => format!("{verb} {image} {s}"),
                    None => format!("{verb} {image}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for r in [
            Request::Remove("0000:01:00.0".into()),
            Request::Rescan,
            Request::JtagSram {
                image: "gdr-picoevb-1.0.0-update.bit".into(),
                serial: None,
            },
            Request::JtagFlash {
                image: "a.bin".into(),
                serial: Some("DK0ABC12".into()),
            },
        ] {
            assert_eq!(Request::parse(&r.line()).unwrap(), r);
        }
    }

    #[test]
    fn hostile_input_is_refused() {
        for bad in [
            "",
            "remove",
            "remove ../../../../sys/kernel",
            "remove 0000:01:00.0 extra",
            "remove 0000:01:00.0\n",
            "rescan now",
            "jtag-sram ../../etc/shadow",
            "jtag-sram .hidden",
            "jtag-flash a.bin serial;rm",
            "jtag-flash a.bin s1 s2",
            "jtag-flash /abs/path.bin",
            "reboot",
        ] {
            assert!(Request::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(Request::parse(&"x".repeat(600)).is_err());
    }
}
