//! The stages a card goes through and what the outside world sees of it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::manifest::Identity;
use crate::selftest::SelfTestResult;

/// Where a card is in its bring-up. Ready and Failed are final until a reprogram, self-test or restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Not started yet.
    Pending,
    /// Looking for the card on the PCI bus.
    Discover,
    /// Reading the ID block and comparing it with the manifest.
    Identify,
    /// Loading the FPGA (the link is down meanwhile).
    Program,
    /// PCI remove and rescan: bringing the link back.
    Relink,
    /// Waiting for the driver to bind; checking its ABI version.
    Bind,
    /// Loopback DMA through the card.
    SelfTest,
    Ready,
    Failed,
}

impl Stage {
    /// The name used on D-Bus, in `STATUS=`, in the journal and by gdrctl.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Pending => "pending",
            Stage::Discover => "discover",
            Stage::Identify => "identify",
            Stage::Program => "program",
            Stage::Relink => "relink",
            Stage::Bind => "bind",
            Stage::SelfTest => "self-test",
            Stage::Ready => "ready",
            Stage::Failed => "failed",
        }
    }

    /// Whether the card has settled (the agent may report READY=1 once every card has).
    pub fn settled(self) -> bool {
        matches!(self, Stage::Ready | Stage::Failed)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which design a card runs, as its registers tell it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// Not read yet (or unreadable).
    #[default]
    Unknown,
    /// gdr's design: the ID block gives its version and build.
    Gdr,
    /// NVIDIA's jetson-rdma-picoevb design: the same PCI identity, XDMA and BRAM, but no ID block.
    Reference,
}

impl Design {
    /// The design behind what the driver reports: an ID block is gdr's, none is NVIDIA's (both are
    /// 10de:0001 with subsystem PicoEVB, so the ID block is the only tell).
    pub fn of(info: &picoevb_abi::AbiInfo) -> Self {
        if info.caps & picoevb_abi::CAP_ID_BLOCK != 0 || info.design_version != 0 {
            Design::Gdr
        } else {
            Design::Reference
        }
    }

    /// For gdrctl, D-Bus (`Design`) and logs.
    pub fn name(self) -> &'static str {
        match self {
            Design::Unknown => "unknown",
            Design::Gdr => "gdr",
            Design::Reference => "reference",
        }
    }
}

/// Everything the agent knows about one card; D-Bus properties, gdrctl and metrics read this.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CardStatus {
    pub index: usize,
    pub stage: Stage,
    /// The stage that failed (with `stage == Failed`).
    pub failed_stage: Option<Stage>,
    /// Human-readable: what is happening or what went wrong.
    pub message: String,
    /// PCI address, once discovered.
    pub pci: String,
    /// The design the card runs.
    #[serde(default)]
    pub design: Design,
    /// The configured loader (`model`, `openocd`, `none`: the card's design is kept, never programmed).
    #[serde(default)]
    pub loader: String,
    /// ID block read from the card (design_version 0 = none).
    pub design_version: u32,
    pub build_hash: u32,
    /// What the manifest expects.
    pub expected_version: u32,
    pub expected_hash: u32,
    /// The last programming attempt ended on the golden (fallback) design.
    pub fell_back_to_golden: bool,
    /// Driver ABI version (0 = not bound).
    pub abi_version: u32,
    /// Link as trained: GT/s string from sysfs (e.g. "5.0 GT/s PCIe") and width.
    pub link_speed: String,
    pub link_width: u32,
    /// Times the card was programmed since the agent started.
    pub programmed: u32,
    pub last_selftest: Option<SelfTestResult>,
    /// Whether the last health check passed (health ok).
    pub healthy: bool,
    /// What the health checks make of a ready card; a failed one is not handed out.
    #[serde(default)]
    pub health: crate::health::Health,
}

impl CardStatus {
    pub fn new(index: usize) -> Self {
        Self {
            index,
            stage: Stage::Pending,
            failed_stage: None,
            message: String::new(),
            pci: String::new(),
            design: Design::Unknown,
            loader: String::new(),
            design_version: 0,
            build_hash: 0,
            expected_version: 0,
            expected_hash: 0,
            fell_back_to_golden: false,
            abi_version: 0,
            link_speed: String::new(),
            link_width: 0,
            programmed: 0,
            last_selftest: None,
            healthy: false,
            health: crate::health::Health::Unknown,
        }
    }

    pub fn identity(&self) -> Identity {
        Identity {
            design_version: self.design_version,
            build_hash: self.build_hash,
        }
    }

    /// One line for `STATUS=` and logs: `card0 ready` or `card0 failed at program: ...`.
    pub fn summary(&self) -> String {
        match (self.stage, self.failed_stage) {
            (Stage::Failed, Some(s)) => {
                format!("card{} failed at {s}: {}", self.index, self.message)
            }
            (Stage::Ready, _) if self.health >= crate::health::Health::Degraded => {
                format!("card{} ready, health {}", self.index, self.health.name())
            }
            (stage, _) => format!("card{} {stage}", self.index),
        }
    }
}
