//! One XDMA engine's protocol, written once for both kernels: start a chain (program the SGDMA, arm or not,
//! set Run last), learn that it ended (interrupt or poll, then arm), judge it, and the only ways out of a
//! run: the engine stopped and shown idle, or the card wedged. The glue (6.18 `kmod/picoevb/engine.rs`,
//! 5.10 `kmod/picoevb-5.10/engine.c` through `rust/surface.rs`) only implements [`Platform`]: the engine's
//! register window, the gate, the completion the interrupt handler signals, the poll-mode write-back word,
//! a clock, sleep and the log.
//!
//! Latency first: every run has the engine write back its completed count to host memory (PG195's poll
//! mode), kept in the descriptor table's last slot ([`chain_slots`], [`writeback_offset`]). A small run
//! ([`pipeline::POLL_BYTES`]) is polled: the CPU spins on that word, which costs no register read, for at
//! most [`SPIN_US`], then reads the status once (the stop and error bits, and whether the engine is idle);
//! only a run still going then has its interrupt armed. The count in the word also spares every run the
//! completed-count read.

use crate::chain::Chain;
use crate::channel::{Channel, Regs32, Status, WriteBack};
use crate::errno::Errno;
use crate::pipeline::{self, Wake};
use crate::status;
use crate::xdma::{self, Dir};

/// Status reads a polled run gets before its interrupt is armed, where the glue keeps no write-back word:
/// each is a non-posted round trip over the link (about 1 us on Gen2 x1), so about 32 us of spinning, a
/// third of a 32 KiB H2C.
pub const POLL_READS: u32 = 32;

/// How long a polled run's write-back word is watched before its interrupt is armed. A 32 KiB H2C takes
/// about 90 us on Gen2 x1; the bench's emulated card takes longer in wall time, and a run that ends inside
/// the spin costs no interrupt and no register read but the one status read.
pub const SPIN_US: u64 = 200;

/// Descriptors of a table of `table_len` slots that chains may use: the last slot holds the write-back word.
pub const fn chain_slots(table_len: usize) -> usize {
    table_len - 1
}

/// Where in a table of `table_len` slots the engine's write-back word is (bytes from its start).
pub const fn writeback_offset(table_len: usize) -> usize {
    chain_slots(table_len) * xdma::DESC_SIZE
}

/// Interrupt sources the engine reports to us: the end of the chain and every error.
pub const INT_MASK: u32 = xdma::STAT_DESC_STOPPED | xdma::STAT_DESC_COMPLETED | xdma::STAT_ERRORS;

/// Control word that starts a chain: Run plus logging of every status bit (as NVIDIA's driver).
pub const CTRL_START: u32 = xdma::CTRL_RUN | xdma::CTRL_IE_ALL;

/// How long a stopped engine may take to read idle before the card is wedged, and the pause between reads.
pub const STOP_TIMEOUT_US: u64 = 100_000;
/// The pause between two status reads while waiting for a stopped engine.
pub const STOP_POLL_US: u32 = 1_000;

/// How long a chain of `bytes` may take: far above the Gen2 x1 ceiling (~400 MB/s) even under emulation,
/// short enough that a lost interrupt is reported in seconds, not never.
pub fn timeout_ms(bytes: u64) -> u32 {
    (2000 + bytes / 4096).min(60_000) as u32
}

/// How a wait for an engine's completion ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    Completed,
    TimedOut,
    /// A fatal signal: the engine may still run and must be stopped before the pages go.
    Killed,
}

/// What the engine protocol reports to the kernel log; the glue words it (with the engine's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Every identifier reads all ones: the card left the bus.
    Vanished,
    /// No completion within `ms`; the engine is reset.
    Timeout { ms: u32 },
    /// The engine ended with error bits (`status::describe` names the first).
    Failed { status: u32 },
    /// Fewer (or more) descriptors completed than the chain has.
    Short { completed: u32, count: u32 },
    /// The engine still reads busy after the stop: the card is about to be wedged.
    StillBusy,
    /// The engine stayed busy in a read of the stream window: the stream source was disabled so that the
    /// read ends (the window then reads zeros); its holders must enable it again.
    SourceStopped,
    /// Letting fetching go again after a stop failed (only once the registers are gone).
    ReleaseFailed(Errno),
}

/// What the protocol needs of a kernel, for one engine. The register window is the XDMA BAR (every error
/// an errno: ENODEV once the registers are gone); the rest is the card's gate and the engine's completion.
pub trait Platform: Regs32<Error = Errno> {
    /// Which engine this is.
    fn dir(&self) -> Dir;
    /// Removal has begun: the request ends with ENODEV.
    fn gone(&self) -> bool;
    /// An engine of the card could not be shown idle: no chain starts again until unbind.
    fn wedged(&self) -> bool;
    /// Whether the card has left the bus (every identifier reads all ones); marks it gone if so.
    fn vanished(&self) -> bool;
    /// Wedges the card: no chain starts again, bus mastering off, logged.
    fn wedge(&self);
    /// Runs `program` with the gate held, so removal either sees the run started or prevents it: ENODEV
    /// once gone, EIO once wedged (`program` not called), else what `program` returns.
    fn gated(&self, program: &mut dyn FnMut() -> Result<(), Errno>) -> Result<(), Errno>;
    /// The status bits gathered for the run in flight (interrupt handler and polls).
    fn status(&self) -> u32;
    /// Adds status bits a poll read (read-to-clear).
    fn add_status(&self, bits: u32);
    /// Before a run: forget the previous run's status and re-arm the completion.
    fn rearm(&self);
    /// Waits up to `ms` for the completion (the interrupt handler, or removal's wake-up).
    fn wait(&self, ms: u32) -> Waited;
    /// Bus address of this engine's write-back word ([`writeback_offset`] into its table), or None where
    /// the glue keeps none: then a poll reads the status register and the count is read too.
    fn writeback_addr(&self) -> Option<u64>;
    /// The write-back word now (its raw value, read as the device writes it: volatile).
    fn writeback(&self) -> u32;
    /// Zeroes the write-back word, before a run starts.
    fn clear_writeback(&self);
    /// Ends a read a C2H engine may be blocked in that only the card's side can end: in the stream window
    /// it waits for the source's next record, and a stopped engine finishes the descriptor it is in.
    /// Disables the stream source (a disabled source reads as zeros at once) and says whether the card has
    /// one. Asked of C2H only (`stop`): the checker never holds an H2C write back.
    fn unblock(&self) -> bool;
    /// A monotonic clock in microseconds.
    fn now_us(&self) -> u64;
    /// Sleeps about `us` microseconds.
    fn sleep_us(&self, us: u32);
    /// Logs `event` for this engine.
    fn log(&self, event: Event);
}

/// A chain started on an engine. Every way out goes through [`Run::finish`] or [`Run::cancel`], which
/// return only once the engine was shown idle, or after wedging the card; until then the glue keeps the
/// descriptor table and the host pages.
#[derive(Debug)]
pub struct Run {
    chain: Chain,
    wake: Wake,
    completed: bool,
    /// The wait ended on a fatal signal: the run is stopped unjudged (EINTR).
    killed: bool,
    /// The engine writes back its completed count.
    writeback: bool,
    /// Its interrupt mask was set (at start or by [`arm`]): the end clears it. Between runs it is 0.
    armed: bool,
    /// Timed by the card's clock: the performance monitor was armed before Run.
    card_time: bool,
}

impl Run {
    /// Starts a chain: refused with EIO on a wedged card before `build` writes the table (a wedged engine
    /// may still fetch descriptors), then `build` fills the table, and the engine is programmed; with
    /// `card_time` its performance monitor is armed first ([`Run::card_ns`]).
    pub fn start<P: Platform + ?Sized>(
        p: &P,
        wake: Wake,
        card_time: bool,
        build: impl FnOnce() -> Result<Chain, Errno>,
    ) -> Result<Run, Errno> {
        if p.wedged() {
            return Err(Errno::EIO);
        }
        let chain = build()?;
        p.rearm();
        let armed = wake == Wake::Irq;
        program(p, &chain, armed, card_time)?;
        Ok(Run {
            chain,
            wake,
            completed: false,
            killed: false,
            writeback: p.writeback_addr().is_some(),
            armed,
            card_time,
        })
    }

    /// After [`Run::wait`] of a run started with `card_time`: how long the engine ran, from Run to the
    /// chain's last descriptor, by the card's clock (the performance monitor's cycles, two register reads);
    /// None for a run not timed or not completed. Read before [`Run::finish`], which the caller runs
    /// whatever this returns.
    pub fn card_ns<P: Platform + ?Sized>(&self, p: &P) -> Option<Result<u64, Errno>> {
        if !self.card_time || !self.completed || self.killed {
            return None;
        }
        let cycles = Channel::new(p, p.dir()).perf_cycles();
        Some(cycles.map(|c| c.saturating_mul(xdma::AXI_CLOCK_NS)))
    }

    /// The chain this run moves.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// Waits until the chain ended or its timeout passed (or removal woke us, or a fatal signal came). A
    /// polled run still going after [`SPIN_US`] of its write-back word (or [`POLL_READS`] status reads
    /// without one) gets its interrupt armed.
    pub fn wait<P: Platform + ?Sized>(&mut self, p: &P) {
        if self.wake == Wake::Poll {
            // After the word shows the end, the first status read normally shows it too.
            let ended = if self.writeback {
                spin(p, self.chain.count) && poll(p, POLL_READS)
            } else {
                poll(p, POLL_READS)
            };
            if ended {
                self.completed = true;
                return;
            }
            self.armed = true;
            if arm(p).is_err() {
                return;
            }
        }
        match p.wait(timeout_ms(self.chain.bytes)) {
            Waited::Completed => self.completed = true,
            Waited::TimedOut => {}
            Waited::Killed => self.killed = true,
        }
    }

    /// Judges the run (after [`Run::wait`]) and ends it: the bytes moved, or why not.
    pub fn finish<P: Platform + ?Sized>(self, p: &P) -> Result<u64, Errno> {
        // Killed: not judged (the process is dying), but stopped like any other run.
        let judged = if self.killed {
            Err(if p.gone() {
                Errno::ENODEV
            } else {
                Errno::EINTR
            })
        } else {
            outcome(p, &self.chain, self.completed, self.writeback)
        };
        end(p, judged, self.armed)?;
        Ok(self.chain.bytes)
    }

    /// Stops the run without judging it (the request failed elsewhere): Ok if the engine was shown idle,
    /// else the card is wedged and the error says so.
    pub fn cancel<P: Platform + ?Sized>(self, p: &P) -> Result<(), Errno> {
        halt(p)
    }
}

/// Moves `len` bytes in as few chains as the table allows: `build(done)` builds the chain that starts
/// `done` bytes in. Each chain is waited for (polled if it is small and the engine writes back, else by
/// interrupt) and ended before the next is built. With `card_time`, returns the engines' run time by the
/// card's clock, summed over the chains ([`Run::card_ns`]); else 0.
pub fn transfer<P: Platform + ?Sized>(
    p: &P,
    len: u64,
    card_time: bool,
    mut build: impl FnMut(u64) -> Result<Chain, Errno>,
) -> Result<u64, Errno> {
    let (mut done, mut ns) = (0, 0u64);
    while done < len {
        // Without a write-back word a poll reads registers: then every chain sleeps on its interrupt.
        let wake = match p.writeback_addr() {
            Some(_) => pipeline::wake_for(len - done),
            None => Wake::Irq,
        };
        let mut run = Run::start(p, wake, card_time, || build(done))?;
        run.wait(p);
        let t = run.card_ns(p);
        done += run.finish(p)?;
        ns = ns.saturating_add(t.transpose()?.unwrap_or(0));
    }
    Ok(ns)
}

/// Programs the chain and sets Run, last, under the gate; with `irq` its interrupt is armed. An error means
/// Run was not written: nothing runs. No stale status is read first: every run's status was read-to-clear
/// when it ended (interrupt handler, poll or `stop`), and Run's rising edge clears bits [23:1] anyway.
///
/// Every address is written for every run, never assumed kept: a reset of the function behind the
/// driver's back (sysfs `reset`) zeroes them, and a stale zero would send the engine's descriptor fetch
/// and write-back to bus address 0. The interrupt mask of an unarmed run is not written: between runs it
/// is 0 (every armed run's end clears it, `stop` clears it, and 0 is its reset value), so a reset leaves
/// it as the driver expects.
fn program<P: Platform + ?Sized>(
    p: &P,
    c: &Chain,
    irq: bool,
    card_time: bool,
) -> Result<(), Errno> {
    let wb = p.writeback_addr();
    p.gated(&mut || {
        let ch = Channel::new(p, p.dir());
        ch.set_chain(c.first, c.first_adj)?;
        // Written for every timed run, never assumed kept (a function reset zeroes it, as the addresses).
        if card_time {
            ch.perf_arm()?;
        }
        if irq {
            ch.set_int_mask(INT_MASK)?;
            ch.irq_enable(true)?;
        }
        let mut ctrl = CTRL_START;
        if let Some(addr) = wb {
            p.clear_writeback();
            ch.set_writeback(addr)?;
            ctrl |= xdma::CTRL_POLLMODE_WB;
        }
        // The glue's MMIO write orders the descriptor writes (and the zeroed write-back word) in coherent
        // memory before it.
        ch.control(ctrl)
    })
}

/// Arms the interrupt of a polled run that is still busy. The channel interrupt is the status masked by the
/// enable mask (PG195; the model: `status & int_mask`), so a run that ends between the last poll and this
/// write still interrupts.
fn arm<P: Platform + ?Sized>(p: &P) -> Result<(), Errno> {
    let ch = Channel::new(p, p.dir());
    ch.set_int_mask(INT_MASK)?;
    ch.irq_enable(true)
}

/// Watches the write-back word of an unarmed run for up to [`SPIN_US`]: whether the engine wrote back
/// `count` completed descriptors or an error. It reads no register: the status read that follows tells
/// how the run ended.
fn spin<P: Platform + ?Sized>(p: &P, count: usize) -> bool {
    let start = p.now_us();
    loop {
        if WriteBack(p.writeback()).ended(count) {
            return true;
        }
        if p.now_us().saturating_sub(start) >= SPIN_US {
            return false;
        }
        core::hint::spin_loop();
    }
}

/// Reads the status of an unarmed run up to `reads` times: whether it ended (stopped, or an error bit),
/// every bit the reads cleared kept.
fn poll<P: Platform + ?Sized>(p: &P, reads: u32) -> bool {
    let ch = Channel::new(p, p.dir());
    for _ in 0..reads {
        let s = match ch.take_status() {
            // All ones: the card may be gone; the armed wait and its timeout decide.
            Ok(s) if !s.unreachable() => s,
            _ => return false,
        };
        p.add_status(s.0 & !xdma::STAT_BUSY);
        if s.ended() {
            // Busy as last read: `end` needs it to tell whether the engine is idle.
            p.add_status(s.0 & xdma::STAT_BUSY);
            return true;
        }
    }
    false
}

/// `e`, unless the card has left the bus (removal, or every identifier reads all ones): then ENODEV. An
/// engine of a vanished card reads busy for ever and its completed count as all ones, which is removal,
/// not an engine fault.
fn removal_or<P: Platform + ?Sized>(p: &P, e: Errno) -> Errno {
    if p.gone() || p.vanished() {
        Errno::ENODEV
    } else {
        e
    }
}

/// What the run came to, judged before the engine is stopped (the completed count is taken while Run is
/// still set: from the write-back word where the engine wrote it, else from its register).
fn outcome<P: Platform + ?Sized>(
    p: &P,
    c: &Chain,
    completed: bool,
    writeback: bool,
) -> Result<(), Errno> {
    if p.gone() {
        // Removal is stopping the engines; `end` still waits for this one to be idle.
        return Err(Errno::ENODEV);
    }
    if !completed {
        if p.vanished() {
            p.log(Event::Vanished);
            return Err(Errno::ENODEV);
        }
        p.log(Event::Timeout {
            ms: timeout_ms(c.bytes),
        });
        return Err(Errno::ETIMEDOUT);
    }
    let st = p.status();
    if let Err(e) = status::outcome(st) {
        // A card that left the bus mid-run reads all ones, error bits included: that is removal.
        if p.vanished() {
            p.log(Event::Vanished);
            return Err(Errno::ENODEV);
        }
        p.log(Event::Failed { status: st });
        return Err(e);
    }
    // The word is written before the engine's stop is seen (status or interrupt); a count it does not show
    // is read from the register, which also decides a short run.
    let n = if writeback && WriteBack(p.writeback()).completed(c.count) {
        c.count as u32
    } else {
        Channel::new(p, p.dir()).completed_count()?
    };
    if n as usize != c.count {
        p.log(Event::Short {
            completed: n,
            count: c.count as u32,
        });
        return Err(removal_or(p, Errno::EIO));
    }
    Ok(())
}

/// The one way out of a judged run: the engine is stopped and shown idle before the caller may unpin its
/// pages or rewrite the table. An engine that cannot be shown idle wedges the card and the request fails
/// with EIO (ENODEV if the card is gone): the caller keeps its pages pinned until unbind.
fn end<P: Platform + ?Sized>(p: &P, judged: Result<(), Errno>, armed: bool) -> Result<(), Errno> {
    let idle = match judged {
        Ok(()) => clear_run(p, armed) || stop(p),
        Err(_) => stop(p),
    };
    if idle {
        return judged;
    }
    p.wedge();
    Err(if judged == Err(Errno::ENODEV) {
        Errno::ENODEV
    } else {
        removal_or(p, Errno::EIO)
    })
}

/// Stops a run nobody judges: Ok if shown idle, else the card is wedged and the error says so.
pub fn halt<P: Platform + ?Sized>(p: &P) -> Result<(), Errno> {
    if stop(p) {
        return Ok(());
    }
    p.wedge();
    Err(removal_or(p, Errno::EIO))
}

/// After a completed chain: clears Run and, if the run was `armed`, the interrupt mask; whether the engine
/// is idle. The status that told us the chain ended (read-to-clear, bit 0 the live busy bit) already shows
/// it when busy was clear then: a stopped engine starts again only on a rising edge of Run. Otherwise it
/// is read again.
fn clear_run<P: Platform + ?Sized>(p: &P, armed: bool) -> bool {
    let seen_idle = !Status(p.status()).busy();
    let ch = Channel::new(p, p.dir());
    let idle = || -> Result<bool, Errno> {
        ch.clear_run()?;
        if armed {
            ch.set_int_mask(0)?;
        }
        Ok(seen_idle || !ch.status()?.busy())
    };
    idle().unwrap_or(false)
}

/// Stops the engine the way PG195 and NVIDIA's teardown do: clear Run, mask and disable its interrupt,
/// halt descriptor fetching, wait up to [`STOP_TIMEOUT_US`] for busy to drop (if it does not, once more
/// after [`Platform::unblock`] ended a read blocked on the stream source), let fetching go and clear
/// the status. Whether the engine was shown idle (false if busy stayed set, or the registers could not be
/// reached; all ones, a card that left the bus, reads busy).
pub fn stop<P: Platform + ?Sized>(p: &P) -> bool {
    let ch = Channel::new(p, p.dir());
    let quiesce = || -> Result<(), Errno> {
        ch.clear_run()?;
        ch.set_int_mask(0)?;
        ch.irq_enable(false)?;
        ch.halt_fetch(true)
    };
    if quiesce().is_err() {
        return false;
    }
    let mut idle = wait_idle(p, &ch);
    if !idle && p.dir() == Dir::C2h && p.unblock() {
        p.log(Event::SourceStopped);
        idle = wait_idle(p, &ch);
    }
    // Let fetching go again and drop the stopped run's status, for the next run.
    if let Err(e) = ch
        .halt_fetch(false)
        .and_then(|()| ch.take_status().map(|_| ()))
    {
        p.log(Event::ReleaseFailed(e));
    }
    if !idle {
        p.log(Event::StillBusy);
    }
    idle
}

/// Reads the status until busy drops, sleeping [`STOP_POLL_US`] between reads, for [`STOP_TIMEOUT_US`]
/// after the first read (one read after the deadline decides).
fn wait_idle<P: Platform + ?Sized>(p: &P, ch: &Channel<'_, P>) -> bool {
    let start = p.now_us();
    loop {
        match ch.status() {
            Ok(s) if !s.busy() => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
        if p.now_us().saturating_sub(start) > STOP_TIMEOUT_US {
            return false;
        }
        p.sleep_us(STOP_POLL_US);
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
