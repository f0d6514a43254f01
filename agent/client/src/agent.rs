//! The agent's D-Bus API from the client side (blocking; one connection per [`Agent`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use serde::Deserialize;
use zbus::blocking::{Connection, Proxy};

use crate::{BUS_NAME, CARD_IFACE, Device, Error, MANAGER_IFACE, MANAGER_PATH, card_path};

/// How long a call waits for the agent's answer unless told otherwise (libdbus's default reply timeout):
/// a wedged agent must not block an application's `Open` forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(25);

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
    /// Connects to the system bus (where the agent runs); calls time out after [`DEFAULT_TIMEOUT`].
    pub fn system() -> Result<Self, Error> {
        Self::system_with_timeout(Some(DEFAULT_TIMEOUT))
    }

    /// Connects to the system bus; every call gives up after `timeout` (None: waits as long as the agent
    /// takes, for operations that take long, e.g. a JTAG reprogram).
    pub fn system_with_timeout(timeout: Option<Duration>) -> Result<Self, Error> {
        Self::build(zbus::blocking::connection::Builder::system()?, timeout)
    }

    /// Connects to the bus at `address` (tests use a private bus); [`DEFAULT_TIMEOUT`].
    pub fn at(address: &str) -> Result<Self, Error> {
        Self::at_with_timeout(address, Some(DEFAULT_TIMEOUT))
    }

    /// Connects to the bus at `address` with a method timeout (see [`Self::system_with_timeout`]).
    pub fn at_with_timeout(address: &str, timeout: Option<Duration>) -> Result<Self, Error> {
        Self::build(
            zbus::blocking::connection::Builder::address(address)?,
            timeout,
        )
    }

    fn build(
        b: zbus::blocking::connection::Builder<'_>,
        timeout: Option<Duration>,
    ) -> Result<Self, Error> {
        let b = match timeout {
            Some(t) => b.method_timeout(t),
            None => b,
        };
        Ok(Self { conn: b.build()? })
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

    /// The card's device fd, if the agent lets this caller have it. The fd is close-on-exec: a program the
    /// application starts never inherits the card.
    pub fn open(&self, index: u32) -> Result<Device, Error> {
        let fd: zbus::zvariant::OwnedFd = self.card(index)?.call("Open", &())?;
        let fd = OwnedFd::from(fd);
        set_cloexec(&fd)?;
        Ok(Device::from_fd(fd))
    }
}

/// Sets FD_CLOEXEC on `fd` (a descriptor received over the bus carries no such flag by itself).
pub(crate) fn set_cloexec(fd: &OwnedFd) -> Result<(), Error> {
    // SAFETY: F_GETFD on a descriptor we own; no pointers involved.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
    if flags < 0 {
        return Err(Error::last_os("fcntl(F_GETFD)"));
    }
    // SAFETY: F_SETFD on a descriptor we own; no pointers involved.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(Error::last_os("fcntl(F_SETFD)"));
    }
    Ok(())
}
