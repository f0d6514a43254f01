//! Where the device's interrupt messages go: eventfds from vfio-user `SET_IRQS`, or a recorder in tests.
//!
//! The sink only delivers events. Which events to send (MSI edges, INTx level with QEMU's auto-masking) is
//! device logic and lives in [`crate::xdma::irq`].

use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, MutexGuard};

use log::warn;

/// One interrupt event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqLine {
    /// Assert INTA (QEMU masks the line until it sends UNMASK).
    Intx,
    /// An MSI message with this vector number (already reduced to the enabled vector count).
    Msi(u32),
}

/// Receives interrupt events; shared with the engine worker threads.
pub trait InterruptSink: Send + Sync {
    /// Delivers one event; returns false if nobody is listening on that line.
    fn signal(&self, line: IrqLine) -> bool;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Test sink: records every event.
#[derive(Default)]
pub struct RecordingSink {
    events: Mutex<Vec<IrqLine>>,
}

impl RecordingSink {
    /// No events yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns and forgets the events so far.
    pub fn take(&self) -> Vec<IrqLine> {
        std::mem::take(&mut *lock(&self.events))
    }

    /// The events so far.
    pub fn events(&self) -> Vec<IrqLine> {
        lock(&self.events).clone()
    }
}

impl InterruptSink for RecordingSink {
    fn signal(&self, line: IrqLine) -> bool {
        lock(&self.events).push(line);
        true
    }
}

/// Real sink: writes to the eventfds QEMU registered with `SET_IRQS`.
#[derive(Default)]
pub struct EventfdSink {
    intx: Mutex<Option<File>>,
    msi: Mutex<Vec<Option<File>>>,
}

impl EventfdSink {
    /// No eventfds yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets or removes the INTx trigger eventfd.
    pub fn set_intx(&self, fd: Option<File>) {
        *lock(&self.intx) = fd;
    }

    /// Installs trigger eventfds for MSI vectors `start..start + fds.len()`; returns how many vectors are set.
    pub fn set_msi(&self, start: u32, fds: Vec<File>) -> u32 {
        let mut msi = lock(&self.msi);
        for (i, fd) in fds.into_iter().enumerate() {
            let v = start as usize + i;
            if msi.len() <= v {
                msi.resize_with(v + 1, || None);
            }
            msi[v] = Some(fd);
        }
        msi.iter().filter(|f| f.is_some()).count() as u32
    }

    /// Removes every MSI eventfd (MSI disabled).
    pub fn clear_msi(&self) {
        lock(&self.msi).clear();
    }

    fn kick(file: &File) -> bool {
        // An eventfd adds the 8-byte value to its counter; the reader (QEMU) sees one or more events.
        match (&*file).write_all(&1u64.to_ne_bytes()) {
            Ok(()) => true,
            Err(e) => {
                warn!("interrupt eventfd write failed: {e}");
                false
            }
        }
    }
}

impl InterruptSink for EventfdSink {
    fn signal(&self, line: IrqLine) -> bool {
        match line {
            IrqLine::Intx => lock(&self.intx).as_ref().is_some_and(Self::kick),
            IrqLine::Msi(v) => lock(&self.msi)
                .get(v as usize)
                .and_then(Option::as_ref)
                .is_some_and(Self::kick),
        }
    }
}
