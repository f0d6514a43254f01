//! The agent's D-Bus API from the client side (blocking; one connection per [`Agent`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use zbus::blocking::Connection;
use zbus::proxy::CacheProperties;

use crate::api::{CardProxyBlocking, CardStatus, ManagerProxyBlocking, SelfTest};
use crate::{Device, Error, card_path};

/// How long a call waits for the agent's answer unless told otherwise (libdbus's default reply timeout):
/// a wedged agent must not block an application's `Open` forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(25);

/// A connection to the agent.
pub struct Agent {
    conn: Connection,
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

    /// The connection, for proxies of one's own.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The manager object's proxy (uncached: every property read asks the agent).
    pub fn manager(&self) -> Result<ManagerProxyBlocking<'static>, Error> {
        Ok(ManagerProxyBlocking::builder(&self.conn)
            .cache_properties(CacheProperties::No)
            .build()?)
    }

    /// Card `index`'s proxy, for its properties and signals (StateChanged, Revoked, PropertiesChanged).
    /// Uncached: every property read asks the agent.
    pub fn card(&self, index: u32) -> Result<CardProxyBlocking<'static>, Error> {
        Ok(CardProxyBlocking::builder(&self.conn)
            .path(card_path(index))?
            .cache_properties(CacheProperties::No)
            .build()?)
    }

    /// Indexes of the configured cards.
    pub fn cards(&self) -> Result<Vec<u32>, Error> {
        Ok(self.manager()?.list_cards()?)
    }

    /// Whether every card has settled (ready or failed), as READY=1 tells systemd.
    pub fn settled(&self) -> Result<bool, Error> {
        Ok(self.manager()?.settled()?)
    }

    /// Agent version.
    pub fn version(&self) -> Result<String, Error> {
        Ok(self.manager()?.version()?)
    }

    /// Re-reads the config file; applies all of it or nothing (the error names file, line and key).
    pub fn reload(&self) -> Result<(), Error> {
        Ok(self.manager()?.reload()?)
    }

    /// Everything the agent knows about a card, as one snapshot.
    pub fn status(&self, index: u32) -> Result<CardStatus, Error> {
        Ok(self.card(index)?.get_status()?)
    }

    /// The card whose PCI address is `pci` (`0000:01:00.0`, or `01:00.0` in domain 0).
    pub fn card_at(&self, pci: &str) -> Result<u32, Error> {
        let want = if pci.matches(':').count() == 1 {
            format!("0000:{pci}")
        } else {
            pci.to_string()
        };
        for i in self.cards()? {
            if self.status(i)?.pci.eq_ignore_ascii_case(&want) {
                return Ok(i);
            }
        }
        Err(Error::NoSuchCard(format!("no card at PCI address {want}")))
    }

    /// Runs the self-test now; returns its result (also when it failed).
    pub fn selftest(&self, index: u32) -> Result<SelfTest, Error> {
        Ok(self.card(index)?.self_test()?)
    }

    /// Self-test transfers at several sizes (bytes).
    pub fn bench(&self, index: u32, sizes: &[u32]) -> Result<Vec<SelfTest>, Error> {
        Ok(self.card(index)?.bench(sizes)?)
    }

    /// The last `count` self-test results, oldest first.
    pub fn history(&self, index: u32, count: u32) -> Result<Vec<SelfTest>, Error> {
        Ok(self.card(index)?.history(count)?)
    }

    /// LEDs: bit set = LED lit.
    pub fn set_leds(&self, index: u32, lit: u32) -> Result<(), Error> {
        Ok(self.card(index)?.set_leds(lit)?)
    }

    /// Programs the card again and runs it through bring-up; open fds are revoked (ENODEV).
    pub fn reprogram(&self, index: u32) -> Result<(), Error> {
        Ok(self.card(index)?.reprogram()?)
    }

    /// The card's device fd, if the agent lets this caller have it. The fd is close-on-exec: a program the
    /// application starts never inherits the card.
    pub fn open(&self, index: u32) -> Result<Device, Error> {
        let fd = OwnedFd::from(self.card(index)?.open()?);
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
