//! The agent's D-Bus API from the client side (blocking; one connection per [`Agent`]).

use std::os::fd::OwnedFd;

use serde::Deserialize;
use zbus::blocking::{Connection, Proxy};

use crate::{BUS_NAME, CARD_IFACE, Device, Error, MANAGER_IFACE, MANAGER_PATH, card_path};

/// A connection to the agent.
pub struct Agent {
    conn: Connection,
}

/// The typed part of a card's `Status` property (the full JSON has more).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct CardSummary {
    pub index: u32,
    pub stage: String,
    #[serde(default)]
    pub failed_stage: Option<String>,
    pub message: String,
    pub pci: String,
    pub design_version: u32,
    pub build_hash: u32,
    pub abi_version: u32,
}

impl Agent {
    /// Connects to the system bus (where the agent runs).
    pub fn system() -> Result<Self, Error> {
        Ok(Self {
            conn: Connection::system()?,
        })
    }

    /// Connects to the bus at `address` (tests use a private bus).
    pub fn at(address: &str) -> Result<Self, Error> {
        let conn = zbus::blocking::connection::Builder::address(address)?.build()?;
        Ok(Self { conn })
    }

    fn manager(&self) -> Result<Proxy<'_>, Error> {
        Ok(Proxy::new(
            &self.conn,
            BUS_NAME,
            MANAGER_PATH,
            MANAGER_IFACE,
        )?)
    }

    fn card(&self, index: u32) -> Result<Proxy<'_>, Error> {
        Ok(Proxy::new(
            &self.conn,
            BUS_NAME,
            card_path(index),
            CARD_IFACE,
        )?)
    }

    /// Indexes of the configured cards.
    pub fn cards(&self) -> Result<Vec<u32>, Error> {
        Ok(self.manager()?.call("ListCards", &())?)
    }

    /// Whether every card has settled (ready or failed), as READY=1 tells systemd.
    pub fn settled(&self) -> Result<bool, Error> {
        Ok(self.manager()?.call("Settled", &())?)
    }

    /// Agent version.
    pub fn version(&self) -> Result<String, Error> {
        Ok(self.manager()?.call("GetVersion", &())?)
    }

    /// Re-reads the config file; applies all of it or nothing (the error names file, line and key).
    pub fn reload(&self) -> Result<(), Error> {
        Ok(self.manager()?.call("Reload", &())?)
    }

    /// Everything the agent knows about a card, as JSON.
    pub fn status_json(&self, index: u32) -> Result<String, Error> {
        Ok(self.card(index)?.call("GetStatus", &())?)
    }

    /// The typed summary of a card.
    pub fn status(&self, index: u32) -> Result<CardSummary, Error> {
        let json = self.status_json(index)?;
        serde_json::from_str(&json).map_err(|e| Error::Bus(format!("bad status JSON: {e}")))
    }

    /// Runs the self-test now; returns its result as JSON (also when it failed).
    pub fn selftest(&self, index: u32) -> Result<String, Error> {
        Ok(self.card(index)?.call("SelfTest", &())?)
    }

    /// Self-test transfers at several sizes (bytes); JSON array of results.
    pub fn bench(&self, index: u32, sizes: &[u32]) -> Result<String, Error> {
        Ok(self.card(index)?.call("Bench", &(sizes,))?)
    }

    /// The last `count` self-test results, oldest first, as a JSON array.
    pub fn history(&self, index: u32, count: u32) -> Result<String, Error> {
        Ok(self.card(index)?.call("History", &(count,))?)
    }

    /// LEDs: bit set = LED lit.
    pub fn set_leds(&self, index: u32, lit: u32) -> Result<(), Error> {
        Ok(self.card(index)?.call("SetLeds", &(lit,))?)
    }

    /// Programs the card again and runs it through bring-up; open fds are revoked (ENODEV).
    pub fn reprogram(&self, index: u32) -> Result<(), Error> {
        Ok(self.card(index)?.call("Reprogram", &())?)
    }

    /// The card's device fd, if the agent lets this caller have it.
    pub fn open(&self, index: u32) -> Result<Device, Error> {
        let fd: zbus::zvariant::OwnedFd = self.card(index)?.call("Open", &())?;
        Ok(Device::from_fd(OwnedFd::from(fd)))
    }
}
