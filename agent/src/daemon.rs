//! The agent as a whole: one [`Machine`] per configured card, each run on its own thread; operations
//! (self-test, reprogram, LEDs, open) that the D-Bus layer calls; reload; the health tick that gates the
//! watchdog. Knows nothing of D-Bus: the bus layer subscribes to changes with [`Agent::subscribe`].

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, TryLockError};
use std::time::{Duration, Instant};

use crate::access::Caller;
use crate::card::journal;
use crate::card::machine::Machine;
use crate::card::ports::{Events, Loader, Node, Pci, RealSleep, SelfTester, Sleep};
use crate::card::{CardStatus, Stage};
use crate::config::{Config, ConfigError, LoaderKind};
use crate::health::{self, Baseline, Health};
use crate::loader::model::ModelLoader;
use crate::loader::openocd::OpenocdLoader;
use crate::manifest::Manifest;
use crate::progress::Beat;
use crate::selftest::runner::ChildTester;
use crate::selftest::{self, SelfTestResult, history};
use crate::sys::helper::Helper;

/// The card operations that stopped making progress: (card index, what and for how long).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stalled(pub Vec<(usize, String)>);

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, (i, why)) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str("; ")?;
            }
            write!(f, "card{i}: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Stalled {}

/// Why an operation was refused or failed. The D-Bus layer maps each to one error name.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentError {
    NoSuchCard(u32),
    NotReady(String),
    Busy(String),
    AccessDenied(String),
    InvalidArgument(String),
    InvalidConfig(ConfigError),
    Failed(String),
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::NoSuchCard(i) => write!(f, "no card {i} in the configuration"),
            AgentError::NotReady(m)
            | AgentError::Busy(m)
            | AgentError::AccessDenied(m)
            | AgentError::InvalidArgument(m)
            | AgentError::Failed(m) => f.write_str(m),
            AgentError::InvalidConfig(e) => write!(f, "{e} (the running configuration is kept)"),
        }
    }
}

/// What happened to a card, for subscribers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Its status changed.
    Status(usize),
    /// Its open fds stopped or are about to stop working, and why. Sent after its stage left `ready`,
    /// so no `Open` succeeds between this and the card being ready again.
    Revoked(usize, &'static str),
}

type Listener = Box<dyn Fn(Change) + Send + Sync>;

/// One card's slot.
struct Slot {
    status: Arc<Mutex<CardStatus>>,
    /// Held by whatever operation owns the card (bring-up, self-test, reprogram), and briefly by the
    /// health check.
    busy: Mutex<()>,
    /// The health check holds `busy` now: an operation waits for it rather than being refused.
    checking: AtomicBool,
    /// That operation's heartbeat (see `progress`).
    beat: Beat,
    /// When a non-root caller last started a reprogram (`[admin] reprogram_interval_s`).
    last_reprogram: Mutex<Option<Instant>>,
    /// Who was handed an fd of the card since it was last brought up.
    holders: Mutex<Vec<(Holder, Vec<u32>)>>,
    health: Mutex<Baseline>,
}

/// A caller `Open` handed the card's fd to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub uid: u32,
    /// 0 where the bus did not say.
    pub pid: u32,
    /// Seconds since the Unix epoch.
    pub since: u64,
}

/// How long an operation waits for a health check that holds the card (a check is a few register and
/// sysfs reads; this bounds a wedged one).
const HEALTH_CHECK_WAIT: Duration = Duration::from_secs(10);

/// Clears a flag when dropped.
struct Flag<'a>(&'a AtomicBool);

impl Drop for Flag<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// An operation's hold on a card: ends its heartbeat, then lets go of the card.
struct Held<'a> {
    _busy: MutexGuard<'a, ()>,
    beat: &'a Beat,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.beat.end();
    }
}

/// The sysfs, node and sleep implementations the agent runs on (tests substitute them).
pub struct World {
    pub pci: Arc<dyn Pci>,
    pub node: Arc<dyn Node>,
    pub sleep: Arc<dyn Sleep>,
    /// Loader for every card; None = build from the config (model/openocd).
    pub loader: Option<Arc<dyn Loader>>,
    pub tester: Option<Arc<dyn SelfTester>>,
}

/// The running agent.
pub struct Agent {
    config_path: PathBuf,
    config: RwLock<Config>,
    manifest: RwLock<Option<Manifest>>,
    manifest_error: RwLock<String>,
    slots: Vec<Slot>,
    world: World,
    listeners: RwLock<Vec<Listener>>,
    extend_usec: Mutex<u64>,
    stopping: Arc<AtomicBool>,
}

/// A card machine's events: relayed to subscribers, and a heartbeat of its operation.
struct Relay {
    agent: std::sync::Weak<Agent>,
    index: usize,
}

impl Events for Relay {
    fn changed(&self, index: usize) {
        if let Some(a) = self.agent.upgrade() {
            a.slots[index].beat.beat();
            a.emit(Change::Status(index));
        }
    }
    fn extend_timeout(&self, usec: u64) {
        if let Some(a) = self.agent.upgrade() {
            a.slots[self.index].beat.extend(Duration::from_micros(usec));
            *a.extend_usec.lock().unwrap_or_else(|e| e.into_inner()) = usec;
            let _ = crate::notify::notify(&format!("EXTEND_TIMEOUT_USEC={usec}"));
        }
    }
}

impl Agent {
    /// An agent for `config`; loads the manifest from its bitstream directory.
    pub fn new(config_path: &Path, config: Config, world: World) -> Arc<Self> {
        let (manifest, manifest_error) = match Manifest::load(&config.agent.bitstream_dir) {
            Ok(m) => (Some(m), String::new()),
            Err(e) => (None, e.to_string()),
        };
        let slots = (0..config.cards.len())
            .map(|i| Slot {
                status: Arc::new(Mutex::new(CardStatus::new(i))),
                busy: Mutex::new(()),
                checking: AtomicBool::new(false),
                beat: Beat::default(),
                holders: Mutex::new(Vec::new()),
                last_reprogram: Mutex::new(None),
                health: Mutex::new(Baseline::default()),
            })
            .collect();
        Arc::new(Self {
            config_path: config_path.to_path_buf(),
            config: RwLock::new(config),
            manifest: RwLock::new(manifest),
            manifest_error: RwLock::new(manifest_error),
            slots,
            world,
            listeners: RwLock::new(Vec::new()),
            extend_usec: Mutex::new(0),
            stopping: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The real world: sysfs under /sys, the privileged helper from the config.
    pub fn real_world(config: &Config) -> World {
        let helper = Helper {
            socket: config.agent.helper_socket.clone(),
            // A remove or rescan is quick, but the helper is socket-activated: on a loaded box (the
            // emulated appliance under TCG) starting it alone can take tens of seconds.
            timeout: Duration::from_secs(120),
        };
        World {
            pci: Arc::new(crate::sys::pci::SysfsPci {
                root: "/sys".into(),
                helper,
            }),
            node: Arc::new(crate::sys::node::DevNode),
            sleep: Arc::new(RealSleep),
            loader: None,
            tester: None,
        }
    }

    /// Calls `f` on every change, from whichever thread made it.
    pub fn subscribe(&self, f: impl Fn(Change) + Send + Sync + 'static) {
        self.listeners
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    fn emit(&self, c: Change) {
        if let Change::Status(i) = c {
            let s = self
                .status(i as u32)
                .map(|s| s.summary())
                .unwrap_or_default();
            log::info!("{s}{}", self.message_suffix(i));
        }
        for l in self
            .listeners
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            l(c);
        }
    }

    fn message_suffix(&self, i: usize) -> String {
        let s = self.slots[i]
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if s.stage != Stage::Failed && !s.message.is_empty() {
            format!(": {}", s.message)
        } else {
            String::new()
        }
    }

    pub fn config(&self) -> Config {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn card_count(&self) -> usize {
        self.slots.len()
    }

    fn slot(&self, i: u32) -> Result<&Slot, AgentError> {
        self.slots.get(i as usize).ok_or(AgentError::NoSuchCard(i))
    }

    pub fn status(&self, i: u32) -> Result<CardStatus, AgentError> {
        Ok(self
            .slot(i)?
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    pub fn statuses(&self) -> Vec<CardStatus> {
        (0..self.slots.len() as u32)
            .filter_map(|i| self.status(i).ok())
            .collect()
    }

    fn tester(&self, config: &Config) -> Arc<dyn SelfTester> {
        if let Some(t) = &self.world.tester {
            return t.clone();
        }
        Arc::new(ChildTester {
            program: config.agent.selftest_program.clone(),
            bytes: config.selftest.bytes,
            memory: config.selftest.memory,
            timeout: Duration::from_secs(config.selftest.timeout_s),
        })
    }

    fn machine(self: &Arc<Self>, i: usize) -> Machine {
        let config = self.config();
        let card = config.cards[i].clone();
        let helper = Helper {
            socket: config.agent.helper_socket.clone(),
            timeout: Duration::from_secs(45 * 60),
        };
        let loader: Option<Arc<dyn Loader>> = match (&self.world.loader, card.loader) {
            (_, LoaderKind::None) => None,
            (Some(l), _) => Some(l.clone()),
            (None, LoaderKind::Model) => Some(Arc::new(ModelLoader {
                port: card.port.clone().unwrap_or_default(),
                timeout: Duration::from_secs(120),
            })),
            (None, LoaderKind::Openocd) => Some(Arc::new(OpenocdLoader {
                helper,
                serial: card.jtag_serial.clone(),
            })),
        };
        let manifest = self
            .manifest
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Machine {
            index: i,
            card,
            tester: self.tester(&config),
            config,
            manifest,
            pci: self.world.pci.clone(),
            node: self.world.node.clone(),
            loader,
            events: Arc::new(Relay {
                agent: Arc::downgrade(self),
                index: i,
            }),
            sleep: self.world.sleep.clone(),
            status: self.slots[i].status.clone(),
            stop: self.stopping.clone(),
        }
    }

    /// Whether some card is programmed from the manifest (none is with `loader = "none"` everywhere).
    fn needs_manifest(&self) -> bool {
        self.config()
            .cards
            .iter()
            .any(|c| c.loader != LoaderKind::None)
    }

    /// Starts every card's bring-up on its own thread.
    pub fn start(self: &Arc<Self>) {
        if self.needs_manifest()
            && self
                .manifest
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
        {
            log::error!(
                "{}",
                self.manifest_error
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
            );
        }
        for i in 0..self.slots.len() {
            let me = Arc::clone(self);
            std::thread::Builder::new()
                .name(format!("card{i}"))
                .spawn(move || {
                    let _busy = me.hold_wait(i, "bring-up");
                    let m = me.machine(i);
                    if m.manifest.is_none() && m.card.loader != LoaderKind::None {
                        let e = me
                            .manifest_error
                            .read()
                            .unwrap_or_else(|e| e.into_inner())
                            .clone();
                        m.bring_up(false);
                        let mut s = me.slots[i].status.lock().unwrap_or_else(|e| e.into_inner());
                        // The machine can only say that the manifest is missing; say why.
                        if s.failed_stage == Some(Stage::Identify) {
                            s.message = format!("no bitstream manifest: {e}");
                            drop(s);
                            me.emit(Change::Status(i));
                        }
                        return;
                    }
                    m.bring_up(false);
                })
                .expect("spawning a card thread");
        }
    }

    /// Every card ready or failed.
    pub fn settled(&self) -> bool {
        self.statuses().iter().all(|s| s.stage.settled())
    }

    /// Takes card `i` for operation `what`, or says it is busy. A health check in progress is waited
    /// for (it is short): a caller must not be refused because the periodic check happened to run.
    fn hold(&self, i: u32, what: &'static str) -> Result<Held<'_>, AgentError> {
        let slot = self.slot(i)?;
        let deadline = Instant::now() + HEALTH_CHECK_WAIT;
        let busy = loop {
            match slot.busy.try_lock() {
                Ok(g) => break g,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock)
                    if slot.checking.load(Ordering::SeqCst) && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(TryLockError::WouldBlock) => {
                    let s = self.status(i).map(|s| s.stage).unwrap_or(Stage::Pending);
                    return Err(AgentError::Busy(format!("card{i} is busy ({s})")));
                }
            }
        };
        slot.beat.start(what, self.config().stall());
        Ok(Held {
            _busy: busy,
            beat: &slot.beat,
        })
    }

    /// Takes card `i` for operation `what`, waiting for the one running.
    fn hold_wait(&self, i: usize, what: &'static str) -> Held<'_> {
        let slot = &self.slots[i];
        let busy = slot.busy.lock().unwrap_or_else(|e| e.into_inner());
        slot.beat.start(what, self.config().stall());
        Held {
            _busy: busy,
            beat: &slot.beat,
        }
    }

    /// Whether every card operation makes progress; else which is hung.
    pub fn progress(&self) -> Result<(), Stalled> {
        let cards: Vec<(usize, String)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.beat.stalled().map(|why| (i, why)))
            .collect();
        if cards.is_empty() {
            Ok(())
        } else {
            Err(Stalled(cards))
        }
    }

    /// Runs the self-test now (the card must be ready or failed at the self-test).
    pub fn selftest(self: &Arc<Self>, i: u32) -> Result<SelfTestResult, AgentError> {
        let _busy = self.hold(i, "self-test")?;
        let s = self.status(i)?;
        if !(s.stage == Stage::Ready || s.failed_stage == Some(Stage::SelfTest)) {
            return Err(AgentError::NotReady(format!(
                "card{i} is {}; reprogram it first",
                s.summary()
            )));
        }
        let m = self.machine(i as usize);
        let r = m.selftest();
        if r.reason == selftest::BUSY {
            return Err(AgentError::Busy(format!("card{i}: {}", selftest::BUSY)));
        }
        let stage = if r.passed {
            Stage::Ready
        } else {
            Stage::Failed
        };
        {
            let mut st = self.slots[i as usize]
                .status
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            st.stage = stage;
            st.failed_stage = (!r.passed).then_some(Stage::SelfTest);
            st.message = r.reason.clone();
        }
        if r.passed {
            // A passing test starts the AER verdict afresh (see `health::Baseline`).
            self.slots[i as usize]
                .health
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .aer_verdict = None;
        }
        self.emit(Change::Status(i as usize));
        Ok(r)
    }

    /// Self-test transfers of each size in `sizes` (bytes), without recording them in the history.
    pub fn bench(
        self: &Arc<Self>,
        i: u32,
        sizes: &[u32],
    ) -> Result<Vec<SelfTestResult>, AgentError> {
        let _busy = self.hold(i, "bench")?;
        let s = self.status(i)?;
        if s.stage != Stage::Ready {
            return Err(AgentError::NotReady(format!("card{i} is {}", s.summary())));
        }
        let config = self.config();
        let ram = picoevb_regs::pci::FPGA_RAM_SIZE;
        if let Some(bad) = sizes
            .iter()
            .find(|&&b| b == 0 || b % 4 != 0 || u64::from(b) > ram)
        {
            return Err(AgentError::InvalidArgument(format!(
                "size {bad} is not a multiple of 4 in 4..={ram}"
            )));
        }
        if sizes.is_empty() || sizes.len() > 64 {
            return Err(AgentError::InvalidArgument("give 1 to 64 sizes".into()));
        }
        let node = config.cards[i as usize].device.clone();
        let tester = ChildTester {
            program: config.agent.selftest_program.clone(),
            bytes: 0,
            memory: config.selftest.memory,
            timeout: Duration::from_secs(config.selftest.timeout_s),
        };
        let mut results = Vec::with_capacity(sizes.len());
        for &b in sizes {
            let now = selftest::now();
            let r = match tester.run_bytes(&node, b.into()) {
                Ok(m) => selftest::judge(now, m, &config.selftest),
                Err(selftest::SelfTestError::Busy) => {
                    return Err(AgentError::Busy(format!("card{i}: {}", selftest::BUSY)));
                }
                Err(e) => SelfTestResult::error(now, e.to_string()),
            };
            self.slots[i as usize].beat.beat();
            results.push(r);
        }
        Ok(results)
    }

    /// The last `count` self-test results of card `i`, oldest first.
    pub fn history(&self, i: u32, count: u32) -> Result<Vec<SelfTestResult>, AgentError> {
        self.slot(i)?;
        let h = history::read(&history::path(&self.config().agent.state_dir, i as usize));
        let skip = h.len().saturating_sub(count as usize);
        Ok(h[skip..].to_vec())
    }

    /// Programs card `i` again and runs the whole bring-up; open fds are revoked first. A card whose
    /// design is kept (`loader = "none"`) has nothing to program: a ready one is left alone, a failed
    /// one is brought up again as it is (never taken off the bus, so nothing is revoked).
    pub fn reprogram(self: &Arc<Self>, i: u32) -> Result<Stage, AgentError> {
        self.reprogram_for(i, 0)
    }

    /// `reprogram` on behalf of `uid`: anyone but root is held to `[admin] reprogram_interval_s`
    /// between reprogram calls on a card (each reprogram revokes every application's fds).
    pub fn reprogram_for(self: &Arc<Self>, i: u32, uid: u32) -> Result<Stage, AgentError> {
        let _busy = self.hold(i, "reprogram")?;
        let interval = Duration::from_secs(self.config().admin.reprogram_interval_s);
        if uid != 0 {
            let mut last = self.slots[i as usize]
                .last_reprogram
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(t) = *last
                && t.elapsed() < interval
            {
                return Err(AgentError::Busy(format!(
                    "card{i} was reprogrammed {} s ago; [admin] reprogram_interval_s is {} s",
                    t.elapsed().as_secs(),
                    interval.as_secs()
                )));
            }
            *last = Some(Instant::now());
        }
        let card = self.config().cards[i as usize].clone();
        if card.loader == LoaderKind::None {
            let s = self.status(i)?;
            if s.stage == Stage::Ready {
                return Err(AgentError::InvalidArgument(format!(
                    "card{i} has loader 'none': there is nothing to program (its design is kept)"
                )));
            }
            return Ok(self.machine(i as usize).bring_up(false));
        }
        // Refused before anything is revoked: a missing or broken manifest leaves the card as it is.
        let manifest = Manifest::load(&self.config().agent.bitstream_dir)
            .map_err(|e| AgentError::Failed(e.to_string()))?;
        // Out of `ready` first, so no Open succeeds after the signal and before the card is back.
        self.revoke(i as usize, "reprogramming");
        *self.manifest.write().unwrap_or_else(|e| e.into_inner()) = Some(manifest);
        *self.slots[i as usize]
            .health
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Baseline::default();
        Ok(self.machine(i as usize).bring_up(true))
    }

    fn ready_node(&self, i: u32) -> Result<PathBuf, AgentError> {
        let s = self.status(i)?;
        if s.stage != Stage::Ready {
            return Err(AgentError::NotReady(format!(
                "card{i} is not ready: {}",
                s.summary()
            )));
        }
        if s.health == Health::Failed {
            return Err(AgentError::NotReady(format!(
                "card{i} is unhealthy: {}",
                s.message
            )));
        }
        Ok(self.config().cards[i as usize].device.clone())
    }

    /// LEDs: bit set = lit.
    pub fn set_leds(&self, i: u32, lit: u32) -> Result<(), AgentError> {
        if lit > 7 {
            return Err(AgentError::InvalidArgument(format!(
                "LED mask {lit} is above 7 (three LEDs)"
            )));
        }
        let node = self.ready_node(i)?;
        let d =
            gdr_client::Device::open_path(&node).map_err(|e| AgentError::Failed(e.to_string()))?;
        d.set_leds(lit)
            .map_err(|e| AgentError::Failed(e.to_string()))
    }

    /// The card's fd for `caller`, after the access check; the caller joins the holder table.
    pub fn open(&self, i: u32, caller: &Caller) -> Result<OwnedFd, AgentError> {
        let uid = caller.uid;
        crate::access::check(&self.config().access, uid, &caller.gids)
            .map_err(|e| AgentError::AccessDenied(e.to_string()))?;
        let node = self.ready_node(i)?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&node)
            .map_err(|e| AgentError::Failed(format!("{}: {e}", node.display())))?;
        log::info!("card{i}: fd handed to {}", crate::access::user_name(uid));
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let holder = Holder {
            uid,
            pid: caller.pid.unwrap_or(0),
            since,
        };
        self.slots[i as usize]
            .holders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((holder, caller.gids.clone()));
        Ok(f.into())
    }

    /// Who holds card `i`'s fds: callers `Open` served since the card was last brought up whose process
    /// still runs (an fd passed on to another process is not seen).
    pub fn holders(&self, i: u32) -> Result<Vec<Holder>, AgentError> {
        let mut h = self
            .slot(i)?
            .holders
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        h.retain(|(x, _)| x.pid == 0 || Path::new(&format!("/proc/{}", x.pid)).exists());
        Ok(h.iter().map(|(x, _)| *x).collect())
    }

    /// Takes card `i` out of `ready`, signals `Revoked(why)` and forgets its holders: their fds are about
    /// to stop working. Callers hold the card.
    fn revoke(&self, i: usize, why: &'static str) {
        {
            let mut s = self.slots[i]
                .status
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            s.stage = Stage::Pending;
            s.failed_stage = None;
            s.message = format!("{why}: fds revoked");
            s.health = Health::Unknown;
            s.healthy = false;
        }
        self.emit(Change::Status(i));
        self.emit(Change::Revoked(i, why));
        self.slots[i]
            .holders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Revokes every fd of card `i` (the driver's answer to a removal: ENODEV) by taking the function
    /// off the bus and bringing it up again, through the same record and rescan that finish an
    /// interrupted bring-up.
    fn relink(self: &Arc<Self>, i: usize, why: &'static str) -> Result<Stage, AgentError> {
        let _busy = self.hold(i as u32, "revoke")?;
        let bdf = self.status(i as u32)?.pci;
        if bdf.is_empty() || self.status(i as u32)?.stage != Stage::Ready {
            return Ok(self.status(i as u32)?.stage);
        }
        self.revoke(i, why);
        let record = journal::path(&self.config().agent.state_dir, i);
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let op = journal::OffBus {
            op: "revoke".into(),
            pci: bdf.clone(),
            since,
        };
        journal::record(&record, &op).map_err(|e| AgentError::Failed(e.to_string()))?;
        if let Err(e) = self.world.pci.remove(&bdf) {
            log::warn!("card{i}: remove for revocation: {e} (the bring-up rescans)");
        }
        Ok(self.machine(i).bring_up(false))
    }

    /// Re-reads the config file: applied whole, or refused whole (the running config stays). A holder
    /// the new `[access]` no longer allows loses its fd: the card's fds are revoked (on a thread of its
    /// own; the card comes back for those still allowed to Open it again).
    pub fn reload(self: &Arc<Self>) -> Result<(), AgentError> {
        let new = Config::load(&self.config_path).map_err(AgentError::InvalidConfig)?;
        if new.cards != self.config().cards {
            return Err(AgentError::InvalidArgument(
                "the [[card]] tables changed: restart the agent to apply them (nothing was changed)".into(),
            ));
        }
        let access = new.access.clone();
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = new;
        log::info!("configuration reloaded from {}", self.config_path.display());
        for (i, slot) in self.slots.iter().enumerate() {
            let lost: Vec<u32> = slot
                .holders
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|(h, gids)| crate::access::check(&access, h.uid, gids).is_err())
                .map(|(h, _)| h.uid)
                .collect();
            if lost.is_empty() {
                continue;
            }
            log::info!("card{i}: [access] no longer allows uid(s) {lost:?}: revoking its fds");
            let me = Arc::clone(self);
            std::thread::spawn(move || {
                if let Err(e) = me.relink(i, "access narrowed") {
                    log::error!("card{i}: revocation after reload failed: {e}");
                }
            });
        }
        Ok(())
    }

    /// Checks every ready card that no operation holds, and degrades, fails or restores it. A card's
    /// verdict is signalled (status change; `Revoked` when it fails) and never withholds the watchdog.
    pub fn health_tick(&self) {
        let config = self.config();
        for (i, slot) in self.slots.iter().enumerate() {
            // A card in an operation is checked next time.
            let Ok(busy) = slot.busy.try_lock() else {
                continue;
            };
            slot.checking.store(true, Ordering::SeqCst);
            // The card is let go before the flag clears (a tuple drops in order), so an operation that
            // saw the check never finds the card taken with the flag down.
            let _held = (busy, Flag(&slot.checking));
            let st = slot
                .status
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if st.stage != Stage::Ready {
                continue;
            }
            let mut base = slot.health.lock().unwrap_or_else(|e| e.into_inner());
            let v = health::check(
                &*self.world.pci,
                &*self.world.node,
                &st,
                &config.cards[i].device,
                &mut base,
            );
            let message = v.problems.join("; ");
            if v.health == st.health && message == st.message {
                continue;
            }
            {
                let mut s = slot.status.lock().unwrap_or_else(|e| e.into_inner());
                s.health = v.health;
                s.healthy = v.health == Health::Ok;
                s.message = message.clone();
            }
            match v.health {
                Health::Failed => log::error!("card{i}: health failed: {message}"),
                Health::Degraded => log::warn!("card{i}: health degraded: {message}"),
                _ => log::info!("card{i}: healthy"),
            }
            self.emit(Change::Status(i));
            if v.health == Health::Failed && st.health != Health::Failed {
                self.emit(Change::Revoked(i, "the card failed its health check"));
                slot.holders
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
            }
        }
    }

    /// `STATUS=` text.
    pub fn status_text(&self) -> String {
        if self.slots.is_empty() {
            return "no cards configured".into();
        }
        self.statuses()
            .iter()
            .map(CardStatus::summary)
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Writes the metrics file (if configured).
    pub fn write_metrics(&self) {
        let path = self.config().agent.metrics_file;
        if path.as_os_str().is_empty() {
            return;
        }
        if let Err(e) =
            crate::atomic::write(&path, crate::metrics::render(&self.statuses()).as_bytes())
        {
            log::warn!("{e}");
        }
    }

    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Stops: no new stage starts, and every running operation gets up to `limit` to finish (a card
    /// being programmed is rescanned before its operation returns). A card still off the bus when
    /// `limit` runs out gets a rescan here, and its record stays for the next start to finish the job.
    /// Returns the cards that were still busy.
    pub fn shutdown(&self, limit: Duration) -> Vec<usize> {
        self.stop();
        let deadline = Instant::now() + limit;
        let mut late = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            loop {
                match slot.busy.try_lock() {
                    Ok(_) | Err(TryLockError::Poisoned(_)) => break,
                    Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(TryLockError::WouldBlock) => {
                        late.push(i);
                        break;
                    }
                }
            }
        }
        let state_dir = self.config().agent.state_dir;
        for &i in &late {
            let record = journal::path(&state_dir, i);
            if journal::read(&record).is_some() {
                log::warn!(
                    "card{i}: still off the bus at stop: rescanning (the next start finishes it)"
                );
                if let Err(e) = self.world.pci.rescan() {
                    log::error!("card{i}: rescan at stop failed: {e}");
                }
            } else {
                log::warn!("card{i}: its operation did not finish within {limit:?} of the stop");
            }
        }
        late
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}
