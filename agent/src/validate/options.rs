//! `gdrctl validate`'s arguments ([`ValidateArgs`], parsed by clap under gdrctl's `validate` subcommand)
//! and the run they make ([`Options`]: the card, the thresholds, the run's sizes).

use std::path::PathBuf;
use std::str::FromStr;

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

/// A link property to require, or `any` (`None`: not judged).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrAny<T>(pub Option<T>);

fn or_any<T: FromStr>(s: &str, check: impl Fn(&T) -> bool) -> Result<OrAny<T>, &'static str> {
    if s == "any" {
        return Ok(OrAny(None));
    }
    match s.parse() {
        Ok(v) if check(&v) => Ok(OrAny(Some(v))),
        _ => Err("not a non-negative number or 'any'"),
    }
}

fn speed(s: &str) -> Result<OrAny<f64>, &'static str> {
    or_any(s, |x: &f64| x.is_finite() && *x >= 0.0)
}

fn width(s: &str) -> Result<OrAny<u32>, &'static str> {
    or_any(s, |_| true)
}

/// A rate or time floor: finite and not negative.
fn non_negative(s: &str) -> Result<f64, &'static str> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err("not a non-negative number"),
    }
}

/// `0` or `card0`.
fn card_index(s: &str) -> Result<u32, &'static str> {
    s.trim_start_matches("card")
        .parse()
        .map_err(|_| "not a card number (0, card0)")
}

/// `gdrctl validate`'s own arguments; each threshold left out keeps its default (docs/agent.md,
/// "gdrctl validate").
#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
pub struct ValidateArgs {
    /// The card's index (0, card0). gdrctl's --card also takes a PCI address.
    // Its own id: gdrctl's global `--card` is `card`.
    #[arg(id = "validate_card", value_name = "CARD", value_parser = card_index)]
    pub card: Option<u32>,
    /// The link speed the card must train to, GT/s per lane, or 'any' [default: 5.0].
    #[arg(long, value_name = "GT/s|any", value_parser = speed)]
    pub link_speed: Option<OrAny<f64>>,
    /// The link width the card must train to, or 'any' [default: 1].
    #[arg(long, value_name = "N|any", value_parser = width)]
    pub link_width: Option<OrAny<u32>>,
    /// Host to card bandwidth floor, MB/s of DMA time [default: 300].
    #[arg(long, value_name = "MB/s", value_parser = non_negative, allow_negative_numbers = true)]
    pub min_h2c: Option<f64>,
    /// Card to host bandwidth floor, MB/s of DMA time [default: 300].
    #[arg(long, value_name = "MB/s", value_parser = non_negative, allow_negative_numbers = true)]
    pub min_c2h: Option<f64>,
    /// Round-trip (H2C2H) bandwidth floor, MB/s [default: 150].
    #[arg(long, value_name = "MB/s", value_parser = non_negative, allow_negative_numbers = true)]
    pub min_round_trip: Option<f64>,
    /// Ceiling of the median 4 KiB round trip, µs [default: 150].
    #[arg(long, value_name = "US", value_parser = non_negative, allow_negative_numbers = true)]
    pub max_latency_us: Option<f64>,
    /// Compare the ID block with this bitstream folder's manifest.json instead of the agent's.
    #[arg(long, value_name = "DIR")]
    pub manifest: Option<PathBuf>,
    /// Transfers per bandwidth measurement [default: 32].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub iterations: Option<u32>,
}

impl ValidateArgs {
    /// The run these arguments ask for: the defaults, each given value in its place.
    pub fn options(&self) -> Options {
        let mut o = Options::default();
        let t = &mut o.thresholds;
        if let Some(OrAny(s)) = self.link_speed {
            t.link.speed_gts = s;
        }
        if let Some(OrAny(w)) = self.link_width {
            t.link.width = w;
        }
        t.min_h2c_mbps = self.min_h2c.unwrap_or(t.min_h2c_mbps);
        t.min_c2h_mbps = self.min_c2h.unwrap_or(t.min_c2h_mbps);
        t.min_round_trip_mbps = self.min_round_trip.unwrap_or(t.min_round_trip_mbps);
        t.max_latency_us = self.max_latency_us.unwrap_or(t.max_latency_us);
        o.card = self.card.unwrap_or(0);
        o.manifest = self.manifest.clone();
        o.iterations = self.iterations.unwrap_or(o.iterations);
        o
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use clap::error::ErrorKind;

    use super::*;

    /// The arguments as gdrctl's subcommand sees them.
    #[derive(Parser)]
    struct Validate {
        #[command(flatten)]
        args: ValidateArgs,
    }

    fn p(s: &str) -> Result<Options, clap::Error> {
        let words = std::iter::once("validate").chain(s.split_whitespace());
        Validate::try_parse_from(words).map(|v| v.args.options())
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
        // The appliance test's floors.
        let o =
            p("0 --min-h2c 1 --min-c2h 1 --min-round-trip 0.5 --max-latency-us 500000").unwrap();
        assert_eq!(o.thresholds.min_round_trip_mbps, 0.5);
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        for (args, kind, says) in [
            ("--min-h2c", ErrorKind::InvalidValue, "a value is required"),
            ("--min-h2c fast", ErrorKind::ValueValidation, "non-negative"),
            ("--min-c2h -1", ErrorKind::ValueValidation, "non-negative"),
            (
                "--max-latency-us NaN",
                ErrorKind::ValueValidation,
                "non-negative",
            ),
            ("--link-speed fast", ErrorKind::ValueValidation, "'any'"),
            ("--iterations 0", ErrorKind::ValueValidation, "1..=100000"),
            ("--bogus 1", ErrorKind::UnknownArgument, "--bogus"),
            ("0 1", ErrorKind::UnknownArgument, "'1'"),
            ("x", ErrorKind::ValueValidation, "not a card number"),
        ] {
            let e = p(args).unwrap_err();
            let text = e.to_string();
            assert_eq!(e.kind(), kind, "{args}: {text}");
            assert!(text.contains(says), "{args}: {text}");
            assert_eq!(e.exit_code(), 2, "{args}");
        }
    }
}
