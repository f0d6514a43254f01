//! Fault injection: misbehaviour the control channel arms for the next N transfers (a transfer = one rising
//! edge of Run on either engine).

use std::time::Duration;

/// Delay of a `slow` fault when the request names none.
pub const DEFAULT_SLOW_DELAY_MS: u64 = 500;

/// One kind of injectable misbehaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Flip the first data byte the transfer moves.
    CorruptData,
    /// The first descriptor fetched reads with a bad magic.
    BadMagic,
    /// H2C: host read fails (read_error UR); C2H: BRAM read fails (AXI decode error, also bit 9).
    ReadError,
    /// H2C: BRAM write fails (write_error decode); C2H has no write-error group: the host writes are dropped.
    WriteError,
    /// The first descriptor fetch fails (desc_error UR).
    DescError,
    /// The engine stays busy until Run is cleared.
    Hang,
    /// The engine stays busy even after Run is cleared and the descriptor fetch is halted (a wedged engine):
    /// only disabling bus mastering (or a reset) ends the transfer.
    Stuck,
    /// The transfer completes but its interrupt is never sent.
    DropIrq,
    /// Completion is delayed.
    Slow,
    /// The first data descriptor uses the previous transfer's host address (see `host_addrs`).
    StaleAddr,
}

impl FaultKind {
    /// Every kind, in protocol order.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::CorruptData,
        FaultKind::BadMagic,
        FaultKind::ReadError,
        FaultKind::WriteError,
        FaultKind::DescError,
        FaultKind::Hang,
        FaultKind::DropIrq,
        FaultKind::Slow,
        FaultKind::Stuck,
        FaultKind::StaleAddr,
    ];

    /// The name used on the control channel.
    pub const fn name(self) -> &'static str {
        match self {
            FaultKind::CorruptData => "corrupt_data",
            FaultKind::BadMagic => "bad_magic",
            FaultKind::ReadError => "read_error",
            FaultKind::WriteError => "write_error",
            FaultKind::DescError => "desc_error",
            FaultKind::Hang => "hang",
            FaultKind::DropIrq => "drop_irq",
            FaultKind::Slow => "slow",
            FaultKind::Stuck => "stuck",
            FaultKind::StaleAddr => "stale_addr",
        }
    }

    /// Parses a control-channel name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// An armed fault.
#[derive(Clone, Debug)]
struct Pending {
    kind: FaultKind,
    /// Transfers to let pass untouched first.
    skip: u64,
    /// Transfers left; `None` = until cleared.
    remaining: Option<u64>,
}

/// The faults armed for future transfers.
#[derive(Clone, Debug)]
pub struct FaultQueue {
    pending: Vec<Pending>,
    slow_delay: Duration,
}

impl Default for FaultQueue {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
            slow_delay: Duration::from_millis(DEFAULT_SLOW_DELAY_MS),
        }
    }
}

/// The faults that apply to one transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferFaults {
    /// See [`FaultKind::CorruptData`].
    pub corrupt_data: bool,
    /// See [`FaultKind::BadMagic`].
    pub bad_magic: bool,
    /// See [`FaultKind::ReadError`].
    pub read_error: bool,
    /// See [`FaultKind::WriteError`].
    pub write_error: bool,
    /// See [`FaultKind::DescError`].
    pub desc_error: bool,
    /// See [`FaultKind::Hang`].
    pub hang: bool,
    /// See [`FaultKind::DropIrq`].
    pub drop_irq: bool,
    /// See [`FaultKind::Stuck`].
    pub stuck: bool,
    /// See [`FaultKind::Slow`]: the delay before the engine starts fetching.
    pub slow: Option<Duration>,
    /// See [`FaultKind::StaleAddr`].
    pub stale_addr: bool,
}

impl TransferFaults {
    /// How many faults apply.
    pub fn count(&self) -> u64 {
        [
            self.corrupt_data,
            self.bad_magic,
            self.read_error,
            self.write_error,
            self.desc_error,
            self.hang,
            self.drop_irq,
            self.stuck,
            self.slow.is_some(),
            self.stale_addr,
        ]
        .into_iter()
        .filter(|&b| b)
        .count() as u64
    }
}

impl FaultQueue {
    /// Arms `kind` for the next `count` transfers (0 = until cleared). Arming a kind already pending adds to
    /// its count. `delay` sets the `slow` delay.
    pub fn inject(&mut self, kind: FaultKind, count: u64, delay: Option<Duration>) {
        self.inject_after(kind, 0, count, delay);
    }

    /// As [`FaultQueue::inject`], the first `after` transfers passing untouched (a fault in the middle of a
    /// request made of several transfers). A kind already pending keeps its own start.
    pub fn inject_after(
        &mut self,
        kind: FaultKind,
        after: u64,
        count: u64,
        delay: Option<Duration>,
    ) {
        if let Some(d) = delay {
            self.slow_delay = d;
        }
        let remaining = (count != 0).then_some(count);
        match self.pending.iter_mut().find(|p| p.kind == kind) {
            Some(p) => {
                p.remaining = match (p.remaining, remaining) {
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    _ => None,
                }
            }
            None => self.pending.push(Pending {
                kind,
                skip: after,
                remaining,
            }),
        }
    }

    /// Disarms everything.
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    /// Names of the armed kinds, in the order they were armed.
    pub fn pending_names(&self) -> Vec<&'static str> {
        self.pending.iter().map(|p| p.kind.name()).collect()
    }

    /// Takes the faults for the transfer starting now and counts them down.
    pub fn take_for_transfer(&mut self) -> TransferFaults {
        let mut f = TransferFaults::default();
        for p in &mut self.pending {
            if p.skip > 0 {
                p.skip -= 1;
                continue;
            }
            match p.kind {
                FaultKind::CorruptData => f.corrupt_data = true,
                FaultKind::BadMagic => f.bad_magic = true,
                FaultKind::ReadError => f.read_error = true,
                FaultKind::WriteError => f.write_error = true,
                FaultKind::DescError => f.desc_error = true,
                FaultKind::Hang => f.hang = true,
                FaultKind::DropIrq => f.drop_irq = true,
                FaultKind::Slow => f.slow = Some(self.slow_delay),
                FaultKind::Stuck => f.stuck = true,
                FaultKind::StaleAddr => f.stale_addr = true,
            }
            if let Some(n) = &mut p.remaining {
                *n -= 1;
            }
        }
        self.pending.retain(|p| p.remaining != Some(0));
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_lets_transfers_pass_first() {
        let mut q = FaultQueue::default();
        q.inject_after(FaultKind::ReadError, 2, 1, None);
        assert!(!q.take_for_transfer().read_error);
        assert!(!q.take_for_transfer().read_error);
        assert!(q.take_for_transfer().read_error);
        assert!(!q.take_for_transfer().read_error);
        assert!(q.pending_names().is_empty());
    }

    #[test]
    fn counts_down_and_forever() {
        let mut q = FaultQueue::default();
        q.inject(FaultKind::BadMagic, 2, None);
        q.inject(FaultKind::DropIrq, 0, None);
        q.inject(FaultKind::Slow, 1, Some(Duration::from_millis(7)));
        assert_eq!(q.pending_names(), ["bad_magic", "drop_irq", "slow"]);
        let t = q.take_for_transfer();
        assert!(t.bad_magic && t.drop_irq && !t.hang);
        assert_eq!(t.slow, Some(Duration::from_millis(7)));
        assert_eq!(t.count(), 3);
        assert_eq!(q.pending_names(), ["bad_magic", "drop_irq"]);
        q.take_for_transfer();
        assert_eq!(q.pending_names(), ["drop_irq"]);
        for _ in 0..10 {
            assert!(q.take_for_transfer().drop_irq);
        }
        q.clear();
        assert_eq!(q.take_for_transfer(), TransferFaults::default());
    }

    #[test]
    fn arming_twice_adds_up() {
        let mut q = FaultQueue::default();
        q.inject(FaultKind::Hang, 1, None);
        q.inject(FaultKind::Hang, 1, None);
        assert!(q.take_for_transfer().hang);
        assert!(q.take_for_transfer().hang);
        assert!(!q.take_for_transfer().hang);
        assert_eq!(
            FaultKind::from_name("write_error"),
            Some(FaultKind::WriteError)
        );
        assert_eq!(FaultKind::from_name("nope"), None);
    }
}
