//! Heartbeats of the card operations (bring-up, self-test, reprogram, bench), for the watchdog: an
//! operation beats whenever it moves on (a stage or message change, one bench size done); one that stays
//! silent for longer than it may is hung, and the daemon stops feeding the watchdog so systemd restarts it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Op {
    what: &'static str,
    last: Instant,
    allow: Duration,
    /// The allowance the operation started with (an extension lasts until the next beat).
    base: Duration,
}

/// One card's running operation, if any.
#[derive(Default)]
pub struct Beat(Mutex<Option<Op>>);

impl Beat {
    fn op(&self) -> std::sync::MutexGuard<'_, Option<Op>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An operation starts; it may stay silent for `allow` between beats.
    pub fn start(&self, what: &'static str, allow: Duration) {
        *self.op() = Some(Op {
            what,
            last: Instant::now(),
            allow,
            base: allow,
        });
    }

    /// The operation moved on.
    pub fn beat(&self) {
        if let Some(op) = self.op().as_mut() {
            op.last = Instant::now();
            op.allow = op.base;
        }
    }

    /// The next step may take up to `d` (programming: the loader asks systemd for as much start time).
    pub fn extend(&self, d: Duration) {
        if let Some(op) = self.op().as_mut() {
            op.last = Instant::now();
            op.allow = op.base.max(d);
        }
    }

    pub fn end(&self) {
        *self.op() = None;
    }

    /// Why the operation looks hung, if it does.
    pub fn stalled(&self) -> Option<String> {
        let op = self.op();
        let op = op.as_ref()?;
        let silent = op.last.elapsed();
        (silent > op.allow).then(|| {
            format!(
                "{} silent for {} s (allowed {} s)",
                op.what,
                silent.as_secs(),
                op.allow.as_secs()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_beyond_the_allowance_is_a_stall_and_a_beat_or_an_extension_resets_it() {
        let b = Beat::default();
        assert_eq!(b.stalled(), None, "no operation");
        b.start("bring-up", Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert!(b.stalled().unwrap().starts_with("bring-up silent for"));
        b.extend(Duration::from_secs(60));
        assert_eq!(b.stalled(), None);
        b.beat();
        std::thread::sleep(Duration::from_millis(5));
        assert!(b.stalled().is_some(), "the extension lasts one step");
        b.end();
        assert_eq!(b.stalled(), None);
    }
}
