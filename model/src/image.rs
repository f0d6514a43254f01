//! The model's "bitstream": a small text file naming the design the model should present, with a checksum
//! so that a damaged image is recognised the way the FPGA's CRC check recognises a damaged bitstream.
//!
//! ```text
//! gdr-model-image 1
//! design gdr
//! design_version 0x01000000
//! build_hash 0x81690a8c
//! build_time 1700000000
//! checksum 0x1234abcd
//! ```
//!
//! `checksum` is FNV-1a (32 bit) of every byte before the `checksum` line. `fpga-bitstream/model-images.sh`
//! writes these files and the manifest the agent reads, from the same values as a Vivado build.

use std::fmt::Write;

use picoevb_regs::idblock;

use crate::options::{DESIGN_VERSION, Design, DeviceOptions};

/// First line of every image.
pub const MAGIC_LINE: &str = "gdr-model-image 1";

/// A design the model can be programmed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelImage {
    pub design: Design,
    pub design_version: u32,
    pub build_hash: u32,
    pub build_time: u32,
}

impl ModelImage {
    /// The design `options` describe (what the model runs without `--image`).
    pub fn from_options(o: &DeviceOptions) -> Self {
        Self {
            design: o.design,
            design_version: DESIGN_VERSION,
            build_hash: o.build_hash,
            build_time: o.build_time,
        }
    }

    /// The file text.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC_LINE}");
        let _ = writeln!(s, "design {}", self.design);
        let _ = writeln!(s, "design_version {:#010x}", self.design_version);
        let _ = writeln!(s, "build_hash {:#010x}", self.build_hash);
        let _ = writeln!(s, "build_time {}", self.build_time);
        let sum = fnv1a(s.as_bytes());
        let _ = writeln!(s, "checksum {sum:#010x}");
        s
    }

    /// Parses and checks an image; any damage is an error naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some(pos) = text.find("checksum ") else {
            return Err("no checksum line".into());
        };
        let (body, tail) = text.split_at(pos);
        let want = hex(tail.trim_start_matches("checksum ").trim(), "checksum")?;
        let got = fnv1a(body.as_bytes());
        if want != got {
            return Err(format!(
                "checksum {got:#010x} does not match {want:#010x}: image corrupt"
            ));
        }
        let mut lines = body.lines();
        if lines.next() != Some(MAGIC_LINE) {
            return Err(format!("first line is not '{MAGIC_LINE}'"));
        }
        let (mut design, mut version, mut hash, mut time) = (None, None, None, None);
        for line in lines {
            let (k, v) = line
                .split_once(' ')
                .ok_or_else(|| format!("bad line '{line}'"))?;
            match k {
                "design" => design = Some(v.parse::<Design>()?),
                "design_version" => version = Some(hex(v, k)?),
                "build_hash" => hash = Some(hex(v, k)?),
                "build_time" => {
                    time = Some(v.parse().map_err(|_| format!("bad build_time '{v}'"))?)
                }
                other => return Err(format!("unknown key '{other}'")),
            }
        }
        Ok(Self {
            design: design.ok_or("no design")?,
            design_version: version.ok_or("no design_version")?,
            build_hash: hash.ok_or("no build_hash")?,
            build_time: time.ok_or("no build_time")?,
        })
    }

    /// What the ID block reads with this design loaded (design_version 0: no ID block).
    pub fn id_version(&self) -> u32 {
        match self.design {
            Design::Gdr => self.design_version,
            Design::Reference => 0,
        }
    }
}

fn hex(v: &str, what: &str) -> Result<u32, String> {
    u32::from_str_radix(v.trim_start_matches("0x"), 16).map_err(|_| format!("bad {what} '{v}'"))
}

/// FNV-1a, 32 bit.
pub fn fnv1a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5, |h: u32, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// `picoevb-model make-image ...`: prints an image. Arguments: `--design gdr|reference --version X.Y.Z
/// --build-hash HEX --build-time SECS [--corrupt]` (`--corrupt` flips a byte after the checksum is taken,
/// for tests of the fallback path).
pub fn make_image(args: &[String]) -> Result<String, String> {
    let mut img = ModelImage {
        design: Design::Gdr,
        design_version: DESIGN_VERSION,
        build_hash: 0,
        build_time: 0,
    };
    let mut corrupt = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--design" => img.design = val()?.parse()?,
            "--version" => img.design_version = parse_version(&val()?)?,
            "--build-hash" => {
                let v = val()?;
                let digits = v.trim_start_matches("0x");
                img.build_hash = hex(
                    digits.get(..digits.len().min(8)).unwrap_or(digits),
                    "build hash",
                )?;
            }
            "--build-time" => {
                let v = val()?;
                img.build_time = v.parse().map_err(|_| format!("bad build time '{v}'"))?;
            }
            "--corrupt" => corrupt = true,
            other => return Err(format!("make-image: unknown argument '{other}'")),
        }
    }
    let mut text = img.render();
    if corrupt {
        // Still well-formed, but the checksum no longer matches (as a bit error in a bitstream).
        text = text.replacen("build_time ", "build_time 9", 1);
    }
    Ok(text)
}

/// `1.2.3` -> `idblock::version(1, 2, 3)`.
pub fn parse_version(v: &str) -> Result<u32, String> {
    let parts: Vec<&str> = v.split('.').collect();
    let bad = || format!("version '{v}' is not MAJOR.MINOR.PATCH");
    let [a, b, c] = parts.as_slice() else {
        return Err(bad());
    };
    Ok(idblock::version(
        a.parse().map_err(|_| bad())?,
        b.parse().map_err(|_| bad())?,
        c.parse().map_err(|_| bad())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let img = ModelImage {
            design: Design::Gdr,
            design_version: idblock::version(1, 2, 3),
            build_hash: 0x8169_0a8c,
            build_time: 1_700_000_000,
        };
        let text = img.render();
        assert_eq!(ModelImage::parse(&text).unwrap(), img);
        // Any flipped byte before the checksum is caught.
        for i in 0..text.find("checksum").unwrap() {
            let mut b = text.clone().into_bytes();
            b[i] ^= 0x01;
            if let Ok(t) = String::from_utf8(b) {
                assert!(ModelImage::parse(&t).is_err(), "flip at {i} accepted");
            }
        }
        assert!(ModelImage::parse("").unwrap_err().contains("no checksum"));
    }

    #[test]
    fn make_image_and_corrupt() {
        let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let t = make_image(&args(
            "--version 0.9.0 --build-hash 81690a8cffee --build-time 5",
        ))
        .unwrap();
        let img = ModelImage::parse(&t).unwrap();
        assert_eq!(img.design_version, 0x0009_0000);
        assert_eq!(img.build_hash, 0x8169_0a8c);
        let c = make_image(&args("--version 1.0.0 --corrupt")).unwrap();
        assert!(ModelImage::parse(&c).unwrap_err().contains("corrupt"));
        assert!(make_image(&args("--version 1.0")).is_err());
        let r = make_image(&args("--design reference")).unwrap();
        assert_eq!(ModelImage::parse(&r).unwrap().id_version(), 0);
    }
}
