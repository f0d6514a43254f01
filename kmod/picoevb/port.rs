// SPDX-License-Identifier: GPL-2.0

//! What the engines may touch of a card: its DMA registers (BAR1), the gate that says whether a
//! request may use the device and a chain may start (gone after removal, wedged after an engine that
//! could not be stopped), and the stream source's enable (a stopping C2H may be blocked on it). The card
//! owns one, with the user BAR (BAR0) the card reads through it; the engines borrow it per call, so they
//! never see the card.

use crate::channel::Regs32;
use crate::ids;
use crate::stream::Stream;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    device::Device,
    devres::Devres,
    new_condvar, new_spinlock, pci,
    prelude::*,
    revocable::RevocableGuard,
    sync::{aref::ARef, lock::spinlock::SpinLockGuard, CondVar, SpinLock},
    time::Delta,
};

/// The XDMA's registers (BAR1).
pub(crate) type DmaBar = pci::Bar<{ ids::BAR_DMA_SIZE }>;
/// The user BAR (BAR0): LEDs and the ID block, which the card reads.
pub(crate) type UserBar = pci::Bar<{ ids::BAR_USER_SIZE }>;

/// Both BARs: the XDMA's (`DmaBar`) and the user BAR (`UserBar`).
impl<const SIZE: usize> Regs32 for pci::Bar<SIZE> {
    type Error = Error;
    fn read32(&self, offset: usize) -> Result<u32> {
        self.try_read32(offset)
    }
    fn write32(&self, value: u32, offset: usize) -> Result {
        self.try_write32(value, offset)
    }
}

#[derive(Default)]
pub(crate) struct Gate {
    active: u32,
    gone: bool,
    /// An engine could not be shown idle: no chain starts again until unbind (see `wedge`).
    wedged: bool,
}

/// A request's hold on the device: removal waits for it.
pub(crate) struct Active<'a> {
    port: &'a Port,
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let mut g = self.port.gate.lock();
        g.active -= 1;
        if g.active == 0 && g.gone {
            self.port.drained.notify_all();
        }
    }
}

#[pin_data]
pub(crate) struct Port {
    #[pin]
    bar: Devres<DmaBar>,
    #[pin]
    bar_user: Devres<UserBar>,
    /// The ID block says the design has the stream block (set once at probe).
    stream: AtomicBool,
    /// Requests using the device now, and whether it is gone or wedged (see `begin`, `close`).
    #[pin]
    gate: SpinLock<Gate>,
    #[pin]
    drained: CondVar,
    pdev: ARef<pci::Device>,
}

impl Port {
    pub(crate) fn new<'a>(
        pdev: &'a pci::Device<kernel::device::Core>,
        bar: impl PinInit<Devres<DmaBar>, Error> + 'a,
        bar_user: impl PinInit<Devres<UserBar>, Error> + 'a,
    ) -> impl PinInit<Self, Error> + 'a {
        try_pin_init!(Self {
            bar <- bar,
            bar_user <- bar_user,
            stream: AtomicBool::new(false),
            gate <- new_spinlock!(Gate::default()),
            drained <- new_condvar!(),
            pdev: pdev.into(),
        })
    }

    pub(crate) fn dev(&self) -> &Device {
        self.pdev.as_ref()
    }

    /// The XDMA registers, or ENODEV once the device is gone. Holds an RCU read lock: do not sleep with it.
    pub(crate) fn regs(&self) -> Result<RevocableGuard<'_, DmaBar>> {
        self.bar.try_access().ok_or(ENODEV)
    }

    /// The user BAR (LEDs, ID block, stream block), or ENODEV once the device is gone.
    pub(crate) fn user_regs(&self) -> Result<RevocableGuard<'_, UserBar>> {
        self.bar_user.try_access().ok_or(ENODEV)
    }

    /// Records whether the design has the stream block (probe, from the ID block).
    pub(crate) fn set_stream(&self, stream: bool) {
        self.stream.store(stream, Ordering::Release);
    }

    /// Disables the stream source, so that a C2H blocked on its next record ends (the window then reads
    /// zeros); whether the card has a source and the write went out.
    pub(crate) fn stop_stream_source(&self) -> bool {
        if !self.stream.load(Ordering::Acquire) {
            return false;
        }
        self.user_regs()
            .and_then(|r| Stream::new(&*r).enable_source(false))
            .is_ok()
    }

    /// The registers from the interrupt handler, which runs while the device is bound.
    pub(crate) fn bar(&self) -> &Devres<DmaBar> {
        &self.bar
    }

    /// Enters a request that uses the device (registers, DMA mappings): ENODEV once it is gone.
    pub(crate) fn begin(&self) -> Result<Active<'_>> {
        let mut g = self.gate.lock();
        if g.gone {
            return Err(ENODEV);
        }
        if g.wedged {
            return Err(EIO);
        }
        g.active += 1;
        Ok(Active { port: self })
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gate.lock().gone
    }

    /// Whether the card has vanished from the bus (`probe::left_bus`: its identifiers read all ones,
    /// twice). Marks the card gone, so every later request fails with ENODEV at once; unbind (hot-unplug,
    /// PCI remove) still releases what the card holds.
    pub(crate) fn vanished(&self) -> bool {
        // The BAR's guard is an RCU read side: taken for each look, never held across the sleep.
        let all_ones = || {
            self.regs()
                .map_or(true, |r| crate::probe::identifiers_all_ones(&*r))
        };
        let sleep = |ms: u32| kernel::time::delay::fsleep(Delta::from_millis(ms.into()));
        let gone = crate::probe::left_bus(all_ones, sleep);
        if gone {
            self.gate.lock().gone = true;
        }
        gone
    }

    /// Held while an engine is started: removal sets `gone` under the same lock and then stops the
    /// engines, so an engine is either started before removal stops it, or not started at all.
    pub(crate) fn start_guard(&self) -> Result<SpinLockGuard<'_, Gate>> {
        let g = self.gate.lock();
        if g.gone {
            return Err(ENODEV);
        }
        if g.wedged {
            return Err(EIO);
        }
        Ok(g)
    }

    /// An engine could not be shown idle after a run: it may still read descriptors and move data. No chain
    /// starts again, bus mastering goes off (a PCIe function may then issue no memory request), and the
    /// requests keep their pages pinned (`Book::quarantine`) until unbind. Every later request fails with
    /// EIO.
    pub(crate) fn wedge(&self) {
        self.gate.lock().wedged = true;
        // SAFETY: `pdev` is bound to us: a request holds `Active` (unbind waits for it) or unbind itself
        // calls this, before its devres and the driver's `Enabled` are released.
        unsafe { crate::ffi::pevb_clear_master(crate::ffi::raw_pdev(&self.pdev)) };
        dev_err!(
            self.dev(),
            "card wedged until unbind: bus mastering off, the DMA's pages stay pinned\n"
        );
    }

    pub(crate) fn is_wedged(&self) -> bool {
        self.gate.lock().wedged
    }

    /// Removal's first step: new requests fail with ENODEV from now on.
    pub(crate) fn close(&self) {
        self.gate.lock().gone = true;
    }

    /// Waits until no request holds an `Active` (after `close`).
    pub(crate) fn drain(&self) {
        let mut g = self.gate.lock();
        while g.active > 0 {
            self.drained.wait(&mut g);
        }
    }
}
