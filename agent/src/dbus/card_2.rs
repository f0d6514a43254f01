//! `org.gdr.Agent1.Card2` at `/org/gdr/Agent1/cardN`: version 2 of the card interface (typed results; see
//! `gdr_client::api`, whose types it serves). Every property that may change is signalled with
//! PropertiesChanged when it does (`signalled` lists them; `mod.rs` sends the differences).

use std::sync::Arc;

use zbus::fdo::DBusProxy;
use zbus::interface;
use zbus::message::Header;
use zbus::names::BusName;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::OwnedFd;

use gdr_client::api;
use zbus::zvariant::OwnedValue;

use super::errors::Error;
use crate::access::Caller;
use crate::card::{CardStatus, Stage};
use crate::daemon::Agent;

/// One card object.
pub struct Card {
    pub agent: Arc<Agent>,
    pub index: u32,
}

/// The caller's uid, groups and pid as the bus daemon knows them (not as the caller claims).
pub async fn caller(hdr: &Header<'_>, conn: &zbus::Connection) -> Result<Caller, Error> {
    let sender = hdr
        .sender()
        .ok_or_else(|| Error::AccessDenied("no sender on the message".into()))?;
    let creds = DBusProxy::new(conn)
        .await?
        .get_connection_credentials(BusName::from(sender.clone()))
        .await
        .map_err(|e| Error::AccessDenied(format!("cannot get the caller's credentials: {e}")))?;
    let uid = creds
        .unix_user_id()
        .ok_or_else(|| Error::AccessDenied("the bus did not tell the caller's uid".into()))?;
    Ok(Caller {
        uid,
        gids: creds.unix_group_ids().cloned().unwrap_or_default(),
        pid: creds.process_id(),
    })
}

/// Administration (SelfTest, Bench, SetLeds, Reprogram, Reload) needs polkit's `org.gdr.agent.*` where the
/// box has polkit, else `[admin]` (`crate::polkit`); applications, which only Open and read, need `[access]`.
pub async fn authorize_admin(
    agent: &Agent,
    hdr: &Header<'_>,
    conn: &zbus::Connection,
) -> Result<Caller, Error> {
    let c = caller(hdr, conn).await?;
    crate::polkit::authorize(conn, hdr, &c, &agent.config().admin)
        .await
        .map_err(|e| Error::AccessDenied(e.to_string()))?;
    Ok(c)
}

impl Card {
    fn s(&self) -> CardStatus {
        self.agent
            .status(self.index)
            .unwrap_or_else(|_| CardStatus::new(self.index as usize))
    }
}

fn version(v: u32) -> String {
    if v == 0 {
        return String::new();
    }
    let (a, b, c) = picoevb_regs::idblock::version_parts(v);
    format!("{a}.{b}.{c}")
}

/// The value of every property that may change (all but the const Index and the unsignalled Holders),
/// by name: what PropertiesChanged carries. `signalled_covers_every_changing_property` holds it to the
/// interface.
pub fn signalled(s: &CardStatus) -> Vec<(&'static str, OwnedValue)> {
    fn v<T: Into<zbus::zvariant::Value<'static>>>(x: T) -> OwnedValue {
        OwnedValue::try_from(x.into()).expect("no fds in a property")
    }
    vec![
        ("Stage", v(s.stage.to_string())),
        ("FailedStage", v(failed_stage(s))),
        ("Message", v(s.message.clone())),
        ("PciAddress", v(s.pci.clone())),
        ("Design", v(s.design.name().to_string())),
        ("Loader", v(s.loader.clone())),
        ("DesignVersion", v(version(s.design_version))),
        ("BuildHash", v(s.build_hash)),
        ("ExpectedVersion", v(version(s.expected_version))),
        ("FellBackToGolden", v(s.fell_back_to_golden)),
        ("LinkSpeed", v(s.link_speed.clone())),
        ("LinkWidth", v(s.link_width)),
        ("LastSelfTest", v(last_selftest(s))),
        ("Healthy", v(s.healthy)),
        ("Health", v(s.health.name().to_string())),
    ]
}

fn failed_stage(s: &CardStatus) -> String {
    s.failed_stage.map(|s| s.to_string()).unwrap_or_default()
}

fn last_selftest(s: &CardStatus) -> Vec<api::SelfTest> {
    s.last_selftest.iter().map(api::SelfTest::from).collect()
}

#[interface(name = "org.gdr.Agent1.Card2")]
impl Card {
    /// Everything about the card as one snapshot (what `gdrctl --json status` prints).
    fn get_status(&self) -> Result<api::CardStatus, Error> {
        Ok((&self.agent.status(self.index)?).into())
    }

    /// Runs the loopback self-test now; returns the result (a failed test is a result, not an error).
    async fn self_test(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<api::SelfTest, Error> {
        authorize_admin(&self.agent, &hdr, conn).await?;
        let (agent, i) = (self.agent.clone(), self.index);
        Ok((&blocking::unblock(move || agent.selftest(i)).await?).into())
    }

    /// Self-test transfers of each size (bytes), one result each.
    async fn bench(
        &self,
        sizes: Vec<u32>,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<Vec<api::SelfTest>, Error> {
        authorize_admin(&self.agent, &hdr, conn).await?;
        let (agent, i) = (self.agent.clone(), self.index);
        let r = blocking::unblock(move || agent.bench(i, &sizes)).await?;
        Ok(r.iter().map(api::SelfTest::from).collect())
    }

    /// The last `count` self-test results, oldest first.
    fn history(&self, count: u32) -> Result<Vec<api::SelfTest>, Error> {
        Ok(self
            .agent
            .history(self.index, count)?
            .iter()
            .map(api::SelfTest::from)
            .collect())
    }

    /// LEDs: bit set = LED lit (A, B, C = bits 0..2).
    async fn set_leds(
        &self,
        lit: u32,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<(), Error> {
        authorize_admin(&self.agent, &hdr, conn).await?;
        Ok(self.agent.set_leds(self.index, lit)?)
    }

    /// Programs the FPGA again and brings the card up; fds handed out before stop working (ENODEV).
    /// Returns when the card is ready (else Failed); Stage and Message are signalled on the way.
    async fn reprogram(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<(), Error> {
        let c = authorize_admin(&self.agent, &hdr, conn).await?;
        let (agent, i) = (self.agent.clone(), self.index);
        match blocking::unblock(move || agent.reprogram_for(i, c.uid)).await? {
            Stage::Ready => Ok(()),
            _ => Err(Error::Failed(self.s().summary())),
        }
    }

    /// The card's device fd, for callers allowed by the config's `[access]` (checked on the caller's bus
    /// credentials, as logind's TakeDevice does).
    async fn open(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<OwnedFd, Error> {
        let c = caller(&hdr, conn).await?;
        let fd = self.agent.open(self.index, &c)?;
        Ok(OwnedFd::from(fd))
    }

    /// Who was handed the card's fd since it was last brought up and still runs: (uid, pid, since as
    /// Unix seconds); pid 0 where the bus did not say. Read on demand (not signalled).
    #[zbus(property(emits_changed_signal = "false"))]
    fn holders(&self) -> Vec<api::Holder> {
        self.agent
            .holders(self.index)
            .unwrap_or_default()
            .into_iter()
            .map(|h| api::Holder {
                uid: h.uid,
                pid: h.pid,
                since: h.since,
            })
            .collect()
    }

    #[zbus(property(emits_changed_signal = "const"))]
    fn index(&self) -> u32 {
        self.index
    }

    /// Current stage: pending, discover, identify, program, relink, bind, self-test, ready, failed.
    #[zbus(property)]
    fn stage(&self) -> String {
        self.s().stage.to_string()
    }

    /// The stage that failed, when Stage is failed; else empty.
    #[zbus(property)]
    fn failed_stage(&self) -> String {
        failed_stage(&self.s())
    }

    /// What is happening, or why it failed.
    #[zbus(property)]
    fn message(&self) -> String {
        self.s().message
    }

    #[zbus(property)]
    fn pci_address(&self) -> String {
        self.s().pci
    }

    /// The design the card runs: `gdr`, `reference` (NVIDIA's jetson-rdma-picoevb: no ID block) or
    /// `unknown` (not read yet).
    #[zbus(property)]
    fn design(&self) -> String {
        self.s().design.name().to_string()
    }

    /// How the card is programmed: `model`, `openocd`, or `none` (its design is kept).
    #[zbus(property)]
    fn loader(&self) -> String {
        self.s().loader
    }

    /// Design version from the card's ID block ("" = none).
    #[zbus(property)]
    fn design_version(&self) -> String {
        version(self.s().design_version)
    }

    #[zbus(property)]
    fn build_hash(&self) -> u32 {
        self.s().build_hash
    }

    /// What the bitstream manifest expects.
    #[zbus(property)]
    fn expected_version(&self) -> String {
        version(self.s().expected_version)
    }

    /// The last programming ended on the golden design (MultiBoot fallback).
    #[zbus(property)]
    fn fell_back_to_golden(&self) -> bool {
        self.s().fell_back_to_golden
    }

    #[zbus(property)]
    fn link_speed(&self) -> String {
        self.s().link_speed
    }

    #[zbus(property)]
    fn link_width(&self) -> u32 {
        self.s().link_width
    }

    /// The last self-test result: none or one.
    #[zbus(property)]
    fn last_self_test(&self) -> Vec<api::SelfTest> {
        last_selftest(&self.s())
    }

    /// The last health check passed (Health is `ok`).
    #[zbus(property)]
    fn healthy(&self) -> bool {
        self.s().healthy
    }

    /// What the health checks make of a ready card: `unknown`, `ok`, `degraded` (still served) or
    /// `failed` (Open refuses it); Message says why.
    #[zbus(property)]
    fn health(&self) -> String {
        self.s().health.name().to_string()
    }

    /// The stage or the message changed (both are also sent as PropertiesChanged): a reprogram's progress.
    #[zbus(signal)]
    pub async fn state_changed(
        emitter: &SignalEmitter<'_>,
        stage: &str,
        message: &str,
    ) -> zbus::Result<()>;

    /// Fds handed out stopped or are about to stop working (reprogramming, the card failed its health
    /// check); sent once Stage has left `ready` or Health is `failed`. Ask again with Open once ready.
    #[zbus(signal)]
    pub async fn revoked(emitter: &SignalEmitter<'_>, reason: &str) -> zbus::Result<()>;
}
