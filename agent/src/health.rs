//! The periodic health check of a ready card: still on the bus with the driver bound, the link as
//! trained, no new AER errors, the device answering a live register read (the driver reads the ID block
//! again for `ABI_INFO`). Its verdict is the card's alone: it degrades or fails that card and is signalled,
//! and never touches the watchdog (one card's fault must not stop the daemon serving the others).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::card::CardStatus;
use crate::card::machine::DRIVER;
use crate::card::ports::{Aer, Node, Pci};

/// A ready card's health, worst last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Health {
    /// Not checked yet, or the card is not ready.
    #[default]
    Unknown,
    Ok,
    /// Still served, but something is wrong (correctable AER errors, a link trained down).
    Degraded,
    /// Not served: `Open` refuses it (gone, not answering, uncorrectable AER errors, its design changed).
    Failed,
}

impl Health {
    /// The name used on D-Bus, in the metrics and by gdrctl.
    pub fn name(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Ok => "ok",
            Health::Degraded => "degraded",
            Health::Failed => "failed",
        }
    }
}

/// What the checks of a card remember between ticks. AER counters only count up; an AER verdict stays
/// until the card is brought up again (reprogram, restart) or passes a self-test, which start afresh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Baseline {
    pub aer: Option<Aer>,
    /// The worst AER verdict so far and why.
    pub aer_verdict: Option<(Health, String)>,
}

/// One check's result: the verdict and the problems behind it (empty when ok).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub health: Health,
    pub problems: Vec<String>,
}

/// Checks one ready card.
pub fn check(
    pci: &dyn Pci,
    node: &dyn Node,
    status: &CardStatus,
    device: &Path,
    base: &mut Baseline,
) -> Verdict {
    let mut v = Verdict {
        health: Health::Ok,
        problems: Vec::new(),
    };
    fn worse(h: Health, p: String, v: &mut Verdict) {
        v.health = v.health.max(h);
        v.problems.push(p);
    }
    let bdf = &status.pci;
    if pci.driver(bdf).as_deref() != Some(DRIVER) {
        worse(
            Health::Failed,
            format!("{bdf}: gone from the bus or driver '{DRIVER}' unbound"),
            &mut v,
        );
        return v;
    }
    if let Some((speed, width)) = pci.link(bdf).filter(|(s, w)| {
        !status.link_speed.is_empty()
            && (status.link_width, status.link_speed.as_str()) != (*w, s.as_str())
    }) {
        worse(
            Health::Degraded,
            format!(
                "link is {speed} x{width}, trained as {} x{}",
                status.link_speed, status.link_width
            ),
            &mut v,
        );
    }
    let aer = pci.aer_errors(bdf);
    if let (Some(now), Some(before)) = (aer, base.aer) {
        let (cor, unc) = (
            now.correctable.saturating_sub(before.correctable),
            now.uncorrectable.saturating_sub(before.uncorrectable),
        );
        let new = if unc > 0 {
            Some((
                Health::Failed,
                format!("{unc} new uncorrectable AER error(s)"),
            ))
        } else if cor > 0 {
            Some((
                Health::Degraded,
                format!("{cor} new correctable AER error(s)"),
            ))
        } else {
            None
        };
        if let Some(n) = new
            && base.aer_verdict.as_ref().is_none_or(|(h, _)| n.0 >= *h)
        {
            base.aer_verdict = Some(n);
        }
    }
    base.aer = aer.or(base.aer);
    if let Some((h, p)) = &base.aer_verdict {
        worse(*h, p.clone(), &mut v);
    }
    match node.abi_info(device) {
        Ok(info)
            if info.design_version != status.design_version
                || info.build_hash != status.build_hash =>
        {
            worse(
                Health::Failed,
                "the ID block changed under the agent".into(),
                &mut v,
            )
        }
        Ok(_) => {}
        Err(e) => worse(
            Health::Failed,
            format!("device does not answer: {e}"),
            &mut v,
        ),
    }
    v
}
