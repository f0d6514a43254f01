//! `gdrctl validate`'s arguments: the card, the thresholds (each overridable) and the run's sizes.

use std::path::PathBuf;

use super::judge::Thresholds;

/// One validation run's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub card: u32,
    pub thresholds: Thresholds,
    /// Compare the ID block with this bitstream folder's `manifest.json` instead of the agent's.
    pub manifest: Option<PathBuf>,
    /// Transfers per bandwidth measurement.
    pub iterations: u32,
    /// Round trips timed for the latency.
    pub latency_samples: u32,
    /// Bytes of the small round trip.
    pub latency_bytes: usize,
    /// sysfs root (tests point it elsewhere).
    pub sysfs: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            card: 0,
            thresholds: Thresholds::default(),
            manifest: None,
            iterations: 32,
            latency_samples: 200,
            latency_bytes: 4096,
            sysfs: PathBuf::from("/sys"),
        }
    }
}

fn number<T: std::str::FromStr>(flag: &str, v: Option<&String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse()
        .map_err(|_| format!("{flag}: '{v}' is not a valid number"))
}

fn non_negative(flag: &str, v: Option<&String>) -> Result<f64, String> {
    let x: f64 = number(flag, v)?;
    if !x.is_finite() || x < 0.0 {
        return Err(format!("{flag}: {x} is not a non-negative number"));
    }
    Ok(x)
}

impl Options {
    /// Parses the words after `validate`.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut o = Self::default();
        let mut card = None;
        let mut i = 0;
        while i < args.len() {
            let flag = args[i].as_str();
            let v = args.get(i + 1);
            let t = &mut o.thresholds;
            match flag {
                "--link-speed" => {
                    t.link.speed_gts = match v.map(String::as_str) {
                        Some("any") => None,
                        _ => Some(non_negative(flag, v)?),
                    }
                }
                "--link-width" => {
                    t.link.width = match v.map(String::as_str) {
                        Some("any") => None,
                        _ => Some(number(flag, v)?),
                    }
                }
                "--min-h2c" => t.min_h2c_mbps = non_negative(flag, v)?,
                "--min-c2h" => t.min_c2h_mbps = non_negative(flag, v)?,
                "--min-round-trip" => t.min_round_trip_mbps = non_negative(flag, v)?,
                "--max-latency-us" => t.max_latency_us = non_negative(flag, v)?,
                "--manifest" => {
                    o.manifest = Some(v.ok_or("--manifest needs a folder")?.into());
                }
                "--iterations" => {
                    o.iterations = number(flag, v)?;
                    if !(1..=100_000).contains(&o.iterations) {
                        return Err("--iterations: 1 to 100000".into());
                    }
                }
                _ if flag.starts_with("--") => {
                    return Err(format!("validate: unknown option {flag}"));
                }
                _ if card.is_none() => {
                    card = Some(
                        flag.trim_start_matches("card")
                            .parse()
                            .map_err(|_| format!("'{flag}' is not a card number"))?,
                    );
                    i += 1;
                    continue;
                }
                _ => return Err(format!("validate: unexpected '{flag}'")),
            }
            i += 2;
        }
        o.card = card.unwrap_or(0);
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Options, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        Options::parse(&v)
    }

    #[test]
    fn defaults_are_a_picoevbs() {
        let o = p("").unwrap();
        assert_eq!(o, Options::default());
        assert_eq!(o.thresholds.link.speed_gts, Some(5.0));
        assert_eq!(o.thresholds.link.width, Some(1));
    }

    #[test]
    fn every_threshold_can_be_set() {
        let o = p(
            "card1 --link-speed 2.5 --link-width any --min-h2c 10 --min-c2h 11 \
                   --min-round-trip 5 --max-latency-us 5000 --manifest /m --iterations 4",
        )
        .unwrap();
        assert_eq!(o.card, 1);
        let t = o.thresholds;
        assert_eq!((t.link.speed_gts, t.link.width), (Some(2.5), None));
        assert_eq!(
            (
                t.min_h2c_mbps,
                t.min_c2h_mbps,
                t.min_round_trip_mbps,
                t.max_latency_us
            ),
            (10.0, 11.0, 5.0, 5000.0)
        );
        assert_eq!(o.manifest, Some(PathBuf::from("/m")));
        assert_eq!(o.iterations, 4);
        assert_eq!(
            p("--link-speed any 2").unwrap().thresholds.link.speed_gts,
            None
        );
        assert_eq!(p("2").unwrap().card, 2);
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        for (args, says) in [
            ("--min-h2c", "needs a value"),
            ("--min-h2c fast", "not a valid number"),
            ("--min-c2h -1", "non-negative"),
            ("--max-latency-us NaN", "non-negative"),
            ("--iterations 0", "1 to 100000"),
            ("--bogus 1", "unknown option --bogus"),
            ("0 1", "unexpected '1'"),
            ("x", "not a card number"),
        ] {
            let e = p(args).unwrap_err();
            assert!(e.contains(says), "{args}: {e}");
        }
    }
}
