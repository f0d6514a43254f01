//! The agent's D-Bus API, version 2 (`org.gdr.Agent1.Manager2`, `org.gdr.Agent1.Card2`): the typed values
//! its methods return and the proxies that call them. The agent serves these very types, so a field added
//! or retyped on one side is a compile error on the other, and `busctl introspect` shows their signatures.
//! `gdrctl --json` prints them with the same field names.

use serde::{Deserialize, Serialize};
use zbus::zvariant::OwnedFd;
use zvariant::{OwnedValue, Type, Value};

/// Where a card is in its bring-up; on the wire the lower-case name (`"self-test"` for `SelfTest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Type)]
#[serde(rename_all = "kebab-case")]
#[zvariant(signature = "s")]
pub enum Stage {
    Pending,
    Discover,
    Identify,
    Program,
    Relink,
    Bind,
    SelfTest,
    Ready,
    Failed,
}

/// What the health checks make of a ready card (`Failed`: Open refuses it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Type)]
#[serde(rename_all = "kebab-case")]
#[zvariant(signature = "s")]
pub enum Health {
    Unknown,
    Ok,
    Degraded,
    Failed,
}

/// The design a card runs: gdr's (with an ID block), NVIDIA's reference design (none), or not read yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Type)]
#[serde(rename_all = "kebab-case")]
#[zvariant(signature = "s")]
pub enum Design {
    Unknown,
    Gdr,
    Reference,
}

impl Stage {
    /// The wire name (`pending` ... `failed`).
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
}

impl Health {
    pub fn name(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Ok => "ok",
            Health::Degraded => "degraded",
            Health::Failed => "failed",
        }
    }
}

impl Design {
    pub fn name(self) -> &'static str {
        match self {
            Design::Unknown => "unknown",
            Design::Gdr => "gdr",
            Design::Reference => "reference",
        }
    }
}

/// One judged loopback transfer (a self-test, or one size of a Bench). D-Bus `(tbsssstddtttuu)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Type, Value, OwnedValue)]
pub struct SelfTest {
    /// Seconds since the Unix epoch.
    pub time: u64,
    pub passed: bool,
    /// Empty when passed; else why it failed.
    pub reason: String,
    /// `cuda` or `host` ("" when the test could not run).
    pub memory: String,
    /// How the memory reached the card: `nv-p2p`, `nv-p2p-dgpu`, `pinned-host` or `host`.
    pub path: String,
    /// Why host memory was used, or which GPU ran it.
    pub memory_note: String,
    pub bytes: u64,
    /// MB/s (10^6 bytes per second) of DMA time as the driver measured it.
    pub h2c_mbps: f64,
    pub c2h_mbps: f64,
    pub duration_us: u64,
    /// Words that came back wrong; the first of them is described by the three fields below (all 0 when
    /// `mismatches` is 0).
    pub mismatches: u64,
    pub first_mismatch_offset: u64,
    pub first_mismatch_expected: u32,
    pub first_mismatch_got: u32,
}

/// A caller the agent handed the card's fd to. D-Bus `(uut)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Type, Value, OwnedValue)]
pub struct Holder {
    pub uid: u32,
    /// 0 where the bus did not say.
    pub pid: u32,
    /// Seconds since the Unix epoch.
    pub since: u64,
}

/// Everything the agent knows about a card, as one consistent snapshot (`Card2.GetStatus`). The same
/// values are the card object's properties, which are signalled as they change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Type)]
pub struct CardStatus {
    pub index: u32,
    pub stage: Stage,
    /// The stage that failed when `stage` is `failed`; else `stage` itself.
    pub failed_stage: Stage,
    /// What is happening, or why it failed.
    pub message: String,
    /// PCI address once discovered (`0000:01:00.0`), else "".
    pub pci: String,
    pub design: Design,
    /// `model`, `openocd` or `none` (the card's design is kept).
    pub loader: String,
    /// ID block read from the card (0 = none), and what the manifest expects.
    pub design_version: u32,
    pub build_hash: u32,
    pub expected_version: u32,
    pub expected_hash: u32,
    /// The last programming ended on the golden (MultiBoot fallback) design.
    pub fell_back_to_golden: bool,
    /// Driver ABI version (0 = not bound).
    pub abi_version: u32,
    /// As trained: `5.0 GT/s PCIe`, and the width.
    pub link_speed: String,
    pub link_width: u32,
    /// Times the card was programmed since the agent started.
    pub programmed: u32,
    /// The last self-test: none or one.
    pub last_selftest: Vec<SelfTest>,
    pub healthy: bool,
    pub health: Health,
}

impl CardStatus {
    /// The last self-test, if any ran.
    pub fn last_selftest(&self) -> Option<&SelfTest> {
        self.last_selftest.first()
    }

    /// The stage that failed, when the card failed.
    pub fn failed_at(&self) -> Option<Stage> {
        (self.stage == Stage::Failed).then_some(self.failed_stage)
    }
}

/// `major.minor.patch` of an ID-block version word ("" for 0, no ID block).
pub fn version_string(v: u32) -> String {
    if v == 0 {
        return String::new();
    }
    format!("{}.{}.{}", v >> 24, (v >> 16) & 0xff, v & 0xffff)
}

/// `org.gdr.Agent1.Manager2` at `/org/gdr/Agent1`.
#[zbus::proxy(
    interface = "org.gdr.Agent1.Manager2",
    default_service = "org.gdr.Agent1",
    default_path = "/org/gdr/Agent1"
)]
pub trait Manager {
    /// Indexes of the configured cards (objects `/org/gdr/Agent1/cardN`).
    fn list_cards(&self) -> zbus::Result<Vec<u32>>;
    /// Whether every card is ready or failed (what READY=1 told systemd).
    fn settled(&self) -> zbus::Result<bool>;
    /// Re-reads the config file, all or nothing (administration).
    fn reload(&self) -> zbus::Result<()>;
    /// The agent's version (constant).
    #[zbus(property(emits_changed_signal = "const"))]
    fn version(&self) -> zbus::Result<String>;
    /// `STATUS=` text, one summary per card.
    #[zbus(property)]
    fn status(&self) -> zbus::Result<String>;
    /// The configuration was reloaded.
    #[zbus(signal)]
    fn reloaded(&self) -> zbus::Result<()>;
}

/// `org.gdr.Agent1.Card2` at `/org/gdr/Agent1/cardN`.
#[zbus::proxy(interface = "org.gdr.Agent1.Card2", default_service = "org.gdr.Agent1")]
pub trait Card {
    fn get_status(&self) -> zbus::Result<CardStatus>;
    /// Administration. A failed test is a result, not an error.
    fn self_test(&self) -> zbus::Result<SelfTest>;
    /// Administration: one transfer per size (bytes).
    fn bench(&self, sizes: &[u32]) -> zbus::Result<Vec<SelfTest>>;
    /// The last `count` self-test results, oldest first.
    fn history(&self, count: u32) -> zbus::Result<Vec<SelfTest>>;
    /// Administration: bit set = LED lit (A, B, C = bits 0..2).
    fn set_leds(&self, lit: u32) -> zbus::Result<()>;
    /// Administration: programs the card again and brings it up; returns once it is ready (else an
    /// error). Stage and Message are signalled on the way.
    fn reprogram(&self) -> zbus::Result<()>;
    /// The card's device fd, for callers `[access]` allows.
    fn open(&self) -> zbus::Result<OwnedFd>;

    #[zbus(property(emits_changed_signal = "const"))]
    fn index(&self) -> zbus::Result<u32>;
    #[zbus(property)]
    fn stage(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn failed_stage(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn message(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn pci_address(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn design(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn loader(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn design_version(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn build_hash(&self) -> zbus::Result<u32>;
    #[zbus(property)]
    fn expected_version(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn fell_back_to_golden(&self) -> zbus::Result<bool>;
    #[zbus(property)]
    fn link_speed(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn link_width(&self) -> zbus::Result<u32>;
    #[zbus(property)]
    fn last_self_test(&self) -> zbus::Result<Vec<SelfTest>>;
    #[zbus(property)]
    fn healthy(&self) -> zbus::Result<bool>;
    #[zbus(property)]
    fn health(&self) -> zbus::Result<String>;
    /// Read on demand: not signalled (a holder's process ending is noticed only when read).
    #[zbus(property(emits_changed_signal = "false"))]
    fn holders(&self) -> zbus::Result<Vec<Holder>>;

    /// The stage or message changed (also sent as PropertiesChanged).
    #[zbus(signal)]
    fn state_changed(&self, stage: &str, message: &str) -> zbus::Result<()>;
    /// Fds handed out stopped or are about to stop working; Open again once ready.
    #[zbus(signal)]
    fn revoked(&self, reason: &str) -> zbus::Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form is the interface's contract (docs/agent.md): changing it is an incompatible change,
    /// which needs new interface names (`Card3`), not an edit here.
    #[test]
    fn signatures_are_the_documented_ones() {
        assert_eq!(SelfTest::SIGNATURE.to_string(), "(tbsssstddtttuu)");
        assert_eq!(
            CardStatus::SIGNATURE.to_string(),
            "(ussssssuuuubusuua(tbsssstddtttuu)bs)"
        );
        assert_eq!(Holder::SIGNATURE.to_string(), "(uut)");
        assert_eq!(Stage::SIGNATURE.to_string(), "s");
    }

    #[test]
    fn enums_travel_as_their_names() {
        let ctx = zvariant::serialized::Context::new_dbus(zvariant::LE, 0);
        let bytes = zvariant::to_bytes(ctx, &Stage::SelfTest).unwrap();
        let (name, _): (String, _) = bytes.deserialize().unwrap();
        assert_eq!(name, "self-test");
        let (back, _): (Stage, _) = bytes.deserialize().unwrap();
        assert_eq!(back, Stage::SelfTest);
    }
}
