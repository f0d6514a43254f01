//! The PCIe link as trained (sysfs `current_link_speed`/`current_link_width`) against what the card should
//! train to: a PicoEVB is Gen2 x1 (5.0 GT/s, one lane) on every Jetson root port.

use std::path::Path;

use super::report::{Check, Verdict};

/// What the link should be; `None` in a field accepts any value (a slot or emulator that reports otherwise).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkExpect {
    /// GT/s per lane.
    pub speed_gts: Option<f64>,
    pub width: Option<u32>,
}

impl LinkExpect {
    /// A PicoEVB: PCIe Gen2 x1.
    pub const PICOEVB: Self = Self {
        speed_gts: Some(5.0),
        width: Some(1),
    };
}

/// The link as sysfs shows it (`max_*`: what both ends could do).
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// `current_link_speed` as written (`5.0 GT/s PCIe`, `Unknown`).
    pub speed: String,
    pub width: Option<u32>,
    pub max_speed: String,
    pub max_width: Option<u32>,
}

impl Link {
    /// Reads the function `bdf` under `sysfs` (normally `/sys`); `None` when it is not there.
    pub fn read(sysfs: &Path, bdf: &str) -> Option<Self> {
        let dir = sysfs.join("bus/pci/devices").join(bdf);
        let attr = |a: &str| {
            std::fs::read_to_string(dir.join(a))
                .ok()
                .map(|s| s.trim().to_string())
        };
        Some(Self {
            speed: attr("current_link_speed")?,
            width: attr("current_link_width").and_then(|w| w.parse().ok()),
            max_speed: attr("max_link_speed").unwrap_or_default(),
            max_width: attr("max_link_width").and_then(|w| w.parse().ok()),
        })
    }
}

/// GT/s of a sysfs speed text (`5.0 GT/s PCIe`, `2.5 GT/s`, `16.0 GT/s PCIe`); `None` for `Unknown`.
pub fn gts(speed: &str) -> Option<f64> {
    let (num, rest) = speed.trim().split_once(' ')?;
    rest.starts_with("GT/s").then(|| num.parse().ok()).flatten()
}

fn show(speed: Option<f64>, width: Option<u32>) -> String {
    let s = speed.map_or("any speed".to_string(), |g| format!("{g:.1} GT/s"));
    let w = width.map_or("any width".to_string(), |w| format!("x{w}"));
    format!("{s} {w}")
}

/// Judges the link; `None`: sysfs has no link for the function (gone from the bus, or not PCIe).
pub fn judge(link: Option<&Link>, want: LinkExpect, bdf: &str) -> Check {
    let expected = show(want.speed_gts, want.width);
    let Some(l) = link else {
        return Check::new("link", Verdict::Fail)
            .measured("no link")
            .expected(expected)
            .detail(format!(
                "sysfs has no current_link_speed for {bdf}: the function is gone from the bus"
            ));
    };
    let speed = gts(&l.speed);
    let measured = format!(
        "{} x{}",
        speed.map_or(l.speed.clone(), |g| format!("{g:.1} GT/s")),
        l.width.map_or("?".into(), |w| w.to_string())
    );
    let mut why = Vec::new();
    if let Some(s) = want.speed_gts {
        match speed {
            None => why.push(format!("speed '{}' is not a link speed", l.speed)),
            Some(g) if g < s - 0.05 => why.push(format!("trained to {g:.1} GT/s, below {s:.1}")),
            Some(g) if g > s + 0.05 => why.push(format!("trained to {g:.1} GT/s, not {s:.1}")),
            Some(_) => {}
        }
    }
    if let Some(w) = want.width {
        match l.width {
            Some(x) if x == w => {}
            Some(x) => why.push(format!("x{x} lanes, not x{w}")),
            None => why.push("no link width".into()),
        }
    }
    let mut c = Check::new(
        "link",
        if why.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
    )
    .measured(measured)
    .expected(expected);
    if let Some(g) = speed {
        c = c.value("gts", g);
    }
    if let Some(w) = l.width {
        c = c.value("width", f64::from(w));
    }
    if !why.is_empty() {
        why.push(format!(
            "both ends can do {} x{}: reseat the card or check the slot, or pass --link-speed/--link-width \
             where this slot trains otherwise",
            gts(&l.max_speed).map_or(l.max_speed.clone(), |g| format!("{g:.1} GT/s")),
            l.max_width.map_or("?".into(), |w| w.to_string())
        ));
        c = c.detail(why.join("; "));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(speed: &str, width: u32) -> Link {
        Link {
            speed: speed.into(),
            width: Some(width),
            max_speed: "5.0 GT/s PCIe".into(),
            max_width: Some(1),
        }
    }

    #[test]
    fn sysfs_speed_texts() {
        assert_eq!(gts("5.0 GT/s PCIe"), Some(5.0));
        assert_eq!(gts("2.5 GT/s"), Some(2.5));
        assert_eq!(gts("16.0 GT/s PCIe\n"), Some(16.0));
        assert_eq!(gts("Unknown"), None);
        assert_eq!(gts("Unknown speed"), None);
        assert_eq!(gts(""), None);
    }

    #[test]
    fn gen2_x1_passes_and_a_degraded_link_fails() {
        let want = LinkExpect::PICOEVB;
        let c = judge(Some(&link("5.0 GT/s PCIe", 1)), want, "b");
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert_eq!(c.measured, "5.0 GT/s x1");
        assert_eq!(c.expected, "5.0 GT/s x1");
        let c = judge(Some(&link("2.5 GT/s PCIe", 1)), want, "b");
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("2.5 GT/s, below 5.0"), "{}", c.detail);
        assert!(
            c.detail.contains("both ends can do 5.0 GT/s x1"),
            "{}",
            c.detail
        );
        let c = judge(Some(&link("5.0 GT/s PCIe", 2)), want, "b");
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("x2 lanes, not x1"), "{}", c.detail);
        let c = judge(Some(&link("Unknown", 1)), want, "b");
        assert_eq!(c.verdict, Verdict::Fail);
        let c = judge(None, want, "0000:01:00.0");
        assert!(c.detail.contains("gone from the bus"), "{}", c.detail);
    }

    #[test]
    fn the_expectation_is_configurable() {
        let any = LinkExpect {
            speed_gts: None,
            width: None,
        };
        let c = judge(Some(&link("Unknown", 4)), any, "b");
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert_eq!(c.expected, "any speed any width");
        let gen1 = LinkExpect {
            speed_gts: Some(2.5),
            width: Some(1),
        };
        assert_eq!(
            judge(Some(&link("2.5 GT/s PCIe", 1)), gen1, "b").verdict,
            Verdict::Pass
        );
        assert_eq!(
            judge(Some(&link("5.0 GT/s PCIe", 1)), gen1, "b").verdict,
            Verdict::Fail
        );
    }

    #[test]
    fn reads_a_fake_sysfs() {
        let root = std::env::temp_dir().join(format!("gdr-validate-link-{}", std::process::id()));
        let d = root.join("bus/pci/devices/0000:01:00.0");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("current_link_speed"), "5.0 GT/s PCIe\n").unwrap();
        std::fs::write(d.join("current_link_width"), "1\n").unwrap();
        let l = Link::read(&root, "0000:01:00.0").unwrap();
        assert_eq!((l.speed.as_str(), l.width), ("5.0 GT/s PCIe", Some(1)));
        assert_eq!((l.max_speed.as_str(), l.max_width), ("", None));
        assert!(Link::read(&root, "0000:02:00.0").is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
