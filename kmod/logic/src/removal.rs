//! Hot removal or unbind of a card, once for both kernels, while its BARs are still mapped: the order in
//! which nothing the device may still master is released before the device is shown idle or cut off, and
//! nothing a request holds is released before the request ended. Open files stay valid and fail with
//! ENODEV; the glue's own bookkeeping (the device node, debugfs, the interrupt) goes after [`remove`].

/// The kernel services one removal runs on.
pub trait Services {
    /// New requests fail with ENODEV from here on (the gate's `gone`, set under its lock).
    fn close(&mut self);
    /// Stops both engines and the interrupts (`probe::quiesce`); whether both were shown idle.
    fn quiesce(&mut self) -> bool;
    /// Bus mastering off for good: what the engines were given may be released although they were not
    /// shown idle.
    fn wedge(&mut self);
    /// Wakes every request waiting for an engine (it then sees the card gone).
    fn wake_waiters(&mut self);
    /// Waits until no request is in flight (bounded: every engine wait has a timeout, and the gate refuses
    /// new requests).
    fn drain(&mut self);
    /// Unpins the host pages quarantined by requests that ran on a wedged card.
    fn release_quarantine(&mut self);
    /// Unmaps every GPU surface from the device (waiting for a free callback that has begun); their pins
    /// stay until UNPIN, close or munmap.
    fn detach_surfaces(&mut self);
    /// Empties every open file's registration cache (its buffers unmapped when this returns).
    fn close_caches(&mut self);
    /// Frees both engines' descriptor tables (and what else the glue keeps mapped for the device).
    fn release_tables(&mut self);
}

/// Removes the card.
pub fn remove(s: &mut impl Services) {
    s.close();
    if !s.quiesce() {
        s.wedge();
    }
    s.wake_waiters();
    s.drain();
    s.release_quarantine();
    s.detach_surfaces();
    s.close_caches();
    s.release_tables();
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[derive(Default)]
    struct Fake {
        log: Vec<&'static str>,
        idle: bool,
    }

    impl Services for Fake {
        fn close(&mut self) {
            self.log.push("close");
        }
        fn quiesce(&mut self) -> bool {
            self.log.push("quiesce");
            self.idle
        }
        fn wedge(&mut self) {
            self.log.push("wedge");
        }
        fn wake_waiters(&mut self) {
            self.log.push("wake");
        }
        fn drain(&mut self) {
            self.log.push("drain");
        }
        fn release_quarantine(&mut self) {
            self.log.push("quarantine");
        }
        fn detach_surfaces(&mut self) {
            self.log.push("surfaces");
        }
        fn close_caches(&mut self) {
            self.log.push("caches");
        }
        fn release_tables(&mut self) {
            self.log.push("tables");
        }
    }

    #[test]
    fn nothing_is_released_before_the_device_is_idle_or_cut_off_and_drained() {
        for idle in [true, false] {
            let mut f = Fake {
                idle,
                ..Fake::default()
            };
            remove(&mut f);
            let mut want = std::vec!["close", "quiesce"];
            if !idle {
                want.push("wedge");
            }
            want.extend([
                "wake",
                "drain",
                "quarantine",
                "surfaces",
                "caches",
                "tables",
            ]);
            assert_eq!(f.log, want);
        }
    }
}
