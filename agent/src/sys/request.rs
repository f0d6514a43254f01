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
    JtagSram(Jtag),
    /// Write an image into the MultiBoot update slot, verify it and reload the FPGA.
    JtagFlash(Jtag),
}

/// A JTAG load: which image, the sha256 the agent checked it against (the helper programs only those
/// bytes), and which cable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jtag {
    pub image: String,
    pub sha256: String,
    pub serial: Option<String>,
}

/// Why a request line was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("request too long")]
    TooLong,
    #[error("usage: {0}")]
    Usage(&'static str),
    #[error("bad image name '{}'", .0.escape_debug())]
    BadImage(String),
    #[error("bad sha256 '{}'", .0.escape_debug())]
    BadSha256(String),
    #[error("bad USB serial '{}'", .0.escape_debug())]
    BadSerial(String),
    #[error("unknown request '{}' (known: remove, rescan, jtag-sram, jtag-flash)", .0.escape_debug())]
    Unknown(String),
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

fn sha256(s: &str) -> Result<String, RequestError> {
    if s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(s.to_string())
    } else {
        Err(RequestError::BadSha256(s.into()))
    }
}

fn serial(s: Option<&str>) -> Result<Option<String>, RequestError> {
    match s {
        None => Ok(None),
        Some(s)
            if !s.is_empty() && s.len() <= 32 && s.bytes().all(|c| c.is_ascii_alphanumeric()) =>
        {
            Ok(Some(s.to_string()))
        }
        Some(s) => Err(RequestError::BadSerial(s.into())),
    }
}

impl Request {
    /// Parses one line (without its newline).
    pub fn parse(line: &str) -> Result<Self, RequestError> {
        if line.len() > MAX_LINE {
            return Err(RequestError::TooLong);
        }
        let mut words = line.split(' ');
        let verb = words.next().unwrap_or("");
        let args: Vec<&str> = words.collect();
        let req = match (verb, args.as_slice()) {
            ("remove", [bdf]) if valid_bdf(bdf) => Request::Remove(bdf.to_string()),
            ("remove", _) => return Err(RequestError::Usage("remove DDDD:BB:DD.F")),
            ("rescan", []) => Request::Rescan,
            ("jtag-sram" | "jtag-flash", [image, sum, rest @ ..]) if rest.len() <= 1 => {
                if !plain_name(image) {
                    return Err(RequestError::BadImage(image.to_string()));
                }
                let jtag = Jtag {
                    image: image.to_string(),
                    sha256: sha256(sum)?,
                    serial: serial(rest.first().copied())?,
                };
                if verb == "jtag-sram" {
                    Request::JtagSram(jtag)
                } else {
                    Request::JtagFlash(jtag)
                }
            }
            ("jtag-sram" | "jtag-flash", _) => {
                return Err(RequestError::Usage(
                    "jtag-sram|jtag-flash IMAGE SHA256 [SERIAL]",
                ));
            }
            _ => return Err(RequestError::Unknown(verb.to_string())),
        };
        Ok(req)
    }

    /// The line that [`Request::parse`] reads back.
    pub fn line(&self) -> String {
        match self {
            Request::Remove(b) => format!("remove {b}"),
            Request::Rescan => "rescan".into(),
            Request::JtagSram(j) | Request::JtagFlash(j) => {
                let verb = if matches!(self, Request::JtagSram(_)) {
                    "jtag-sram"
                } else {
                    "jtag-flash"
                };
                let Jtag {
                    image,
                    sha256,
                    serial,
                } = j;
                match serial {
                    Some(s) => format!("{verb} {image} {sha256} {s}"),
                    None => format!("{verb} {image} {sha256}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUM: &str = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";

    #[test]
    fn round_trip() {
        for r in [
            Request::Remove("0000:01:00.0".into()),
            Request::Rescan,
            Request::JtagSram(Jtag {
                image: "gdr-picoevb-1.0.0-update.bit".into(),
                sha256: SUM.into(),
                serial: None,
            }),
            Request::JtagFlash(Jtag {
                image: "a.bin".into(),
                sha256: SUM.into(),
                serial: Some("DK0ABC12".into()),
            }),
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
            "jtag-sram ../../etc/shadow SUM",
            "jtag-sram .hidden SUM",
            "jtag-flash a.bin SUM serial;rm",
            "jtag-flash a.bin SUM s1 s2",
            "jtag-flash /abs/path.bin SUM",
            "jtag-flash a.bin",
            "jtag-flash a.bin DK0ABC12",
            "jtag-flash a.bin 5E884898DA28047151D0E56F8DC6292773603D0D6AABBDD62A11EF721D1542D8",
            "reboot",
        ] {
            let bad = bad.replace("SUM", SUM);
            assert!(Request::parse(&bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(Request::parse(&"x".repeat(600)), Err(RequestError::TooLong));
        assert_eq!(
            Request::parse("jtag-flash a.bin DK0ABC12"),
            Err(RequestError::BadSha256("DK0ABC12".into()))
        );
    }
}
