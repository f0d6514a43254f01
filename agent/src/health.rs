//! The periodic health check of a ready card: still on the bus with the driver bound, the link as
//! trained, no new AER errors, the device answering. Its verdict gates the systemd watchdog.

use std::path::Path;

use crate::card::CardStatus;
use crate::card::machine::DRIVER;
use crate::card::ports::{Node, Pci};

/// What the last check of a card remembered (AER counters only count up).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Baseline {
    pub aer_errors: Option<u64>,
}

/// Checks one ready card; returns the problems found (empty = healthy).
pub fn check(
    pci: &dyn Pci,
    node: &dyn Node,
    status: &CardStatus,
    device: &Path,
    base: &mut Baseline,
) -> Vec<String> {
    let mut problems = Vec::new();
    let bdf = &status.pci;
    if pci.driver(bdf).as_deref() != Some(DRIVER) {
        problems.push(format!(
            "{bdf}: gone from the bus or driver '{DRIVER}' unbound"
        ));
        return problems;
    }
    let link = pci.link(bdf);
    if let Some((speed, width)) = link.filter(|(s, w)| {
        !status.link_speed.is_empty()
            && (status.link_width, status.link_speed.as_str()) != (*w, s.as_str())
    }) {
        problems.push(format!(
            "link is {speed} x{width}, trained as {} x{}",
            status.link_speed, status.link_width
        ));
    }
    let aer = pci.aer_errors(bdf);
    if let (Some(now), Some(before)) = (aer, base.aer_errors)
        && now > before
    {
        problems.push(format!("{} new AER error(s)", now - before));
    }
    base.aer_errors = aer.or(base.aer_errors);
    match node.abi_info(device) {
        Ok(info)
            if info.design_version != status.design_version
                || info.build_hash != status.build_hash =>
        {
            problems.push("the ID block changed under the agent".into())
        }
        Ok(_) => {}
        Err(e) => problems.push(format!("device does not answer: {e}")),
    }
    problems
}
