//! The agent core over a scripted card, through the lifetime events an operator meets: a box without a
//! bitstream, a reprogram that cannot or need not happen, and a stop while a card is off the bus.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use gdr_agent::access::Caller;
use gdr_agent::card::ports::{
    Aer, LoadError, Loader, Node, NodeError, Pci, PciError, SelfTester, Sleep,
};
use gdr_agent::card::{Design, Stage};
use gdr_agent::config::{Config, Target};
use gdr_agent::daemon::{Agent, AgentError, Change, World};
use gdr_agent::health::Health;
use gdr_agent::selftest::{Measurement, SelfTestError};
use picoevb_abi::{ABI_VERSION, AbiInfo};

#[derive(Default)]
struct Bus {
    present: bool,
    design: u32,
    log: Vec<String>,
    /// The loader waits until this is false.
    hold_program: bool,
    aer: Option<Aer>,
    /// The self-test waits until this is false.
    hold_selftest: bool,
    /// On the bus, but its registers read all ones (the driver's ABI_INFO fails).
    dead: bool,
    /// The next `abi_info` (a health check's) takes this long; `in_check` says it is under way.
    slow_read: Option<Duration>,
    in_check: bool,
}

#[derive(Clone, Default)]
struct Fake(Arc<(Mutex<Bus>, Condvar)>);

impl Fake {
    fn bus(&self) -> std::sync::MutexGuard<'_, Bus> {
        self.0.0.lock().unwrap()
    }
    fn release(&self) {
        let mut b = self.bus();
        (b.hold_program, b.hold_selftest) = (false, false);
        self.0.1.notify_all();
    }
}

impl Pci for Fake {
    fn list(&self) -> Result<Vec<String>, PciError> {
        Ok(if self.bus().present {
            vec!["0000:01:00.0".into()]
        } else {
            vec![]
        })
    }
    fn driver(&self, _: &str) -> Option<String> {
        self.bus().present.then(|| "picoevb".into())
    }
    fn remove(&self, bdf: &str) -> Result<(), PciError> {
        let mut b = self.bus();
        b.log.push(format!("remove {bdf}"));
        b.present = false;
        Ok(())
    }
    fn rescan(&self) -> Result<(), PciError> {
        let mut b = self.bus();
        b.log.push("rescan".into());
        b.present = true;
        Ok(())
    }
    fn link(&self, _: &str) -> Option<(String, u32)> {
        Some(("5.0 GT/s PCIe".into(), 1))
    }
    fn aer_errors(&self, _: &str) -> Option<Aer> {
        self.bus().aer
    }
}

impl Node for Fake {
    fn abi_info(&self, node: &Path) -> Result<AbiInfo, NodeError> {
        let fails = |op, errno| NodeError {
            node: node.to_path_buf(),
            source: gdr_client::Error::Os { op, errno },
        };
        let slow = self.bus().slow_read.take();
        if let Some(d) = slow {
            self.bus().in_check = true;
            self.0.1.notify_all();
            std::thread::sleep(d);
            self.bus().in_check = false;
        }
        let b = self.bus();
        if !b.present {
            return Err(fails("open", libc::ENODEV));
        }
        if b.dead {
            return Err(fails("ABI_INFO", libc::EIO));
        }
        Ok(AbiInfo {
            abi_version: ABI_VERSION,
            design_version: b.design,
            build_hash: if b.design == 0 { 0 } else { 0xd00d },
            ..Default::default()
        })
    }
}

impl Loader for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn image_role(&self, _: Target) -> &'static str {
        "model-update"
    }
    fn program(&self, _: &gdr_agent::manifest::Image, _: Target) -> Result<String, LoadError> {
        let mut b = self.bus();
        b.log.push("program".into());
        while b.hold_program {
            b = self.0.1.wait(b).unwrap();
        }
        b.design = 0x0100_0000;
        Ok(String::new())
    }
}

impl SelfTester for Fake {
    fn run(&self, _: &Path) -> Result<Measurement, SelfTestError> {
        let mut b = self.bus();
        while b.hold_selftest {
            b = self.0.1.wait(b).unwrap();
        }
        Ok(Measurement {
            memory: "host".into(),
            path: "host".into(),
            memory_note: "scripted".into(),
            bytes: 4096,
            h2c_mbps: 1.0,
            c2h_mbps: 1.0,
            duration_us: 1,
            mismatches: 0,
            first_mismatch: None,
        })
    }
}

struct NoSleep;
impl Sleep for NoSleep {
    fn sleep(&self, _: Duration) {}
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gdr-lifecycle-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An agent over `fake` with one card of `loader`; `manifest` writes a bitstream manifest into `d`.
fn agent(
    d: &Path,
    fake: &Fake,
    loader: &str,
    manifest: bool,
) -> (Arc<Agent>, Arc<Mutex<Vec<Change>>>) {
    agent_with(d, fake, loader, manifest, "")
}

/// As `agent`, with `extra` tables in the config.
fn agent_with(
    d: &Path,
    fake: &Fake,
    loader: &str,
    manifest: bool,
    extra: &str,
) -> (Arc<Agent>, Arc<Mutex<Vec<Change>>>) {
    if manifest {
        let image = b"model image";
        std::fs::write(d.join("u.img"), image).unwrap();
        std::fs::write(
            d.join("manifest.json"),
            format!(
                r#"{{"schema":1,"version":"1.0.0","id_block":{{"design_version":"0x01000000","build_hash":"0xd00d"}},
                   "files":[{{"name":"u.img","role":"model-update","sha256":"{}"}}]}}"#,
                gdr_agent::manifest::sha256_hex(image)
            ),
        )
        .unwrap();
    }
    let port = if loader == "model" {
        format!("port = \"{}/port\"\n", d.display())
    } else {
        String::new()
    };
    let path = d.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "[agent]\nbitstream_dir = \"{d}\"\nstate_dir = \"{d}/state\"\nmetrics_file = \"\"\n\
             [retry]\nattempts = 2\nbackoff_ms = 0\nmax_backoff_ms = 0\nbind_timeout_s = 1\n{extra}\n\
             [[card]]\ndevice = \"{d}/picoevb0\"\nloader = \"{loader}\"\n{port}",
            d = d.display()
        ),
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    let world = World {
        pci: Arc::new(fake.clone()),
        node: Arc::new(fake.clone()),
        sleep: Arc::new(NoSleep),
        loader: Some(Arc::new(fake.clone())),
        tester: Some(Arc::new(fake.clone())),
    };
    let a = Agent::new(&path, config, world);
    let changes = Arc::new(Mutex::new(Vec::new()));
    let c = changes.clone();
    a.subscribe(move |ch| c.lock().unwrap().push(ch));
    (a, changes)
}

fn wait_stage(a: &Agent, want: Stage) {
    let t0 = Instant::now();
    while a.status(0).unwrap().stage != want {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "card0 never {want}: {}",
            a.status(0).unwrap().summary()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn card(design: u32) -> Fake {
    let f = Fake::default();
    f.bus().present = true;
    f.bus().design = design;
    f
}

#[test]
fn a_box_without_a_bitstream_serves_the_reference_design() {
    let d = dir("nobitstream");
    let f = card(0);
    let (a, changes) = agent(&d, &f, "none", false);
    a.start();
    wait_stage(&a, Stage::Ready);
    let s = a.status(0).unwrap();
    assert_eq!(s.design, Design::Reference);
    assert!(s.last_selftest.unwrap().passed);
    assert!(f.bus().log.is_empty(), "{:?}", f.bus().log);
    // Nothing to program on a ready card: refused, and nobody's fd is revoked.
    let e = a.reprogram(0).unwrap_err();
    assert!(
        matches!(e, AgentError::InvalidArgument(ref m) if m.contains("nothing to program")),
        "{e}"
    );
    assert!(
        !changes
            .lock()
            .unwrap()
            .iter()
            .any(|c| matches!(c, Change::Revoked(0, _)))
    );
    assert_eq!(a.status(0).unwrap().stage, Stage::Ready);
}

#[test]
fn a_reprogram_refused_for_want_of_a_manifest_revokes_nothing() {
    let d = dir("nomanifest");
    let f = card(0x0100_0000);
    let (a, changes) = agent(&d, &f, "model", true);
    a.start();
    wait_stage(&a, Stage::Ready);
    std::fs::remove_file(d.join("manifest.json")).unwrap();
    assert!(matches!(a.reprogram(0), Err(AgentError::Failed(_))));
    assert!(
        !changes
            .lock()
            .unwrap()
            .iter()
            .any(|c| matches!(c, Change::Revoked(0, _)))
    );
    assert_eq!(a.status(0).unwrap().stage, Stage::Ready);
}

#[test]
fn a_stop_while_the_card_is_off_the_bus_waits_and_brings_it_back() {
    let d = dir("stop");
    let f = card(0x0009_0000);
    f.bus().hold_program = true;
    let (a, _) = agent(&d, &f, "model", true);
    a.start();
    wait_stage(&a, Stage::Program);
    while f.bus().log.last().map(String::as_str) != Some("program") {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!f.bus().present);
    let releaser = {
        let f = f.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            f.release();
        })
    };
    let t0 = Instant::now();
    let late = a.shutdown(Duration::from_secs(10));
    releaser.join().unwrap();
    assert!(late.is_empty(), "the operation finished within the limit");
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "shutdown did not wait"
    );
    assert!(f.bus().present, "card left off the bus: {:?}", f.bus().log);
    assert!(!d.join("state/card0-offbus.json").exists());
}

#[test]
fn a_stop_that_runs_out_of_time_rescans_and_leaves_the_record_for_the_next_start() {
    let d = dir("stop-late");
    let f = card(0x0009_0000);
    f.bus().hold_program = true;
    let (a, _) = agent(&d, &f, "model", true);
    a.start();
    wait_stage(&a, Stage::Program);
    while f.bus().log.last().map(String::as_str) != Some("program") {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(a.shutdown(Duration::from_millis(200)), [0]);
    assert_eq!(f.bus().log, ["remove 0000:01:00.0", "program", "rescan"]);
    assert!(d.join("state/card0-offbus.json").exists());

    // The next start finds the record and brings the card up. (A new bus: the first agent's thread
    // stays blocked in its loader, as in a process that was killed.)
    let g = Fake::default();
    g.bus().design = 0x0100_0000;
    let (b, _) = agent(&d, &g, "model", true);
    b.start();
    wait_stage(&b, Stage::Ready);
    assert_eq!(g.bus().log, ["rescan"], "brought back, not reprogrammed");
    assert!(!d.join("state/card0-offbus.json").exists());
}

/// Whether `Open` (as root) hands out card0 now; `d/picoevb0` stands in for the node.
fn opens(a: &Agent) -> Result<(), AgentError> {
    a.open(0, &Caller::default()).map(drop)
}

#[test]
fn revoked_goes_out_after_the_card_left_ready_so_no_open_sees_the_dying_card() {
    let d = dir("revoke-order");
    let f = card(0x0100_0000);
    let (a, changes) = agent(&d, &f, "model", true);
    std::fs::write(d.join("picoevb0"), b"").unwrap();
    // What Open and Stage say at the moment each Revoked goes out.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (weak, s) = (Arc::downgrade(&a), seen.clone());
    a.subscribe(move |c| {
        if let (Change::Revoked(..), Some(a)) = (c, weak.upgrade()) {
            s.lock()
                .unwrap()
                .push((a.status(0).unwrap().stage, opens(&a).is_ok()));
        }
    });
    a.start();
    wait_stage(&a, Stage::Ready);
    opens(&a).unwrap();
    assert_eq!(a.reprogram(0).unwrap(), Stage::Ready);
    assert_eq!(*seen.lock().unwrap(), [(Stage::Pending, false)]);
    assert!(
        changes
            .lock()
            .unwrap()
            .contains(&Change::Revoked(0, "reprogramming"))
    );
    opens(&a).unwrap();
}

#[test]
fn an_operation_waits_for_a_health_check_under_way_instead_of_being_refused_busy() {
    let d = dir("check-wait");
    let f = card(0x0100_0000);
    let (a, _) = agent(&d, &f, "model", true);
    std::fs::write(d.join("picoevb0"), b"").unwrap();
    a.start();
    wait_stage(&a, Stage::Ready);
    // Wait for the bring-up to let go of the card (the status is ready a moment before).
    a.selftest(0).unwrap();
    f.bus().slow_read = Some(Duration::from_millis(1500));
    let checker = a.clone();
    let tick = std::thread::spawn(move || checker.health_tick());
    {
        let mut b = f.bus();
        while !b.in_check {
            b = f.0.1.wait(b).unwrap();
        }
    }
    // The periodic check holds the card now: a reprogram (or self-test) must wait for it, not fail.
    assert_eq!(a.reprogram(0), Ok(Stage::Ready));
    assert_eq!(a.selftest(0).map(|r| r.passed), Ok(true));
    tick.join().unwrap();
}

#[test]
fn a_card_that_stops_answering_is_failed_at_the_next_health_check_and_not_handed_out() {
    let d = dir("dead");
    let f = card(0x0100_0000);
    let (a, changes) = agent(&d, &f, "model", true);
    std::fs::write(d.join("picoevb0"), b"").unwrap();
    a.start();
    wait_stage(&a, Stage::Ready);
    a.health_tick();
    assert_eq!(a.status(0).unwrap().health, Health::Ok);
    opens(&a).unwrap();
    f.bus().dead = true;
    a.health_tick();
    let s = a.status(0).unwrap();
    assert_eq!(s.health, Health::Failed, "{}", s.message);
    assert!(!s.healthy);
    assert!(
        s.message.contains("device does not answer"),
        "{}",
        s.message
    );
    assert!(
        matches!(opens(&a), Err(AgentError::NotReady(ref m)) if m.contains("unhealthy")),
        "{:?}",
        opens(&a)
    );
    assert!(
        changes
            .lock()
            .unwrap()
            .contains(&Change::Revoked(0, "the card failed its health check"))
    );
    assert_eq!(a.progress(), Ok(()), "one card's fault is not the daemon's");
    // It answers again (a glitch, a replug): served again.
    f.bus().dead = false;
    a.health_tick();
    assert_eq!(a.status(0).unwrap().health, Health::Ok);
    opens(&a).unwrap();
}

#[test]
fn an_aer_burst_degrades_then_fails_that_card_and_never_the_daemon() {
    let d = dir("aer");
    let f = card(0x0100_0000);
    f.bus().aer = Some(Aer::default());
    let (a, _) = agent(&d, &f, "model", true);
    std::fs::write(d.join("picoevb0"), b"").unwrap();
    a.start();
    wait_stage(&a, Stage::Ready);
    a.health_tick();
    assert_eq!(a.status(0).unwrap().health, Health::Ok);
    f.bus().aer = Some(Aer {
        correctable: 40,
        uncorrectable: 0,
    });
    a.health_tick();
    let s = a.status(0).unwrap();
    assert_eq!(s.health, Health::Degraded, "{}", s.message);
    assert!(
        s.message.contains("40 new correctable AER error(s)"),
        "{}",
        s.message
    );
    assert!(
        s.summary().ends_with("ready, health degraded"),
        "{}",
        s.summary()
    );
    opens(&a).expect("a degraded card is still served");
    // The verdict stays while no new error comes (until a passing self-test or a reprogram).
    a.health_tick();
    assert_eq!(a.status(0).unwrap().health, Health::Degraded);
    f.bus().aer = Some(Aer {
        correctable: 40,
        uncorrectable: 1,
    });
    a.health_tick();
    assert_eq!(a.status(0).unwrap().health, Health::Failed);
    assert!(opens(&a).is_err());
    assert_eq!(a.progress(), Ok(()));
    assert!(a.selftest(0).unwrap().passed);
    a.health_tick();
    assert_eq!(a.status(0).unwrap().health, Health::Ok);
}

#[test]
fn an_operation_that_stops_making_progress_is_reported_for_the_watchdog() {
    let d = dir("stall");
    let f = card(0x0100_0000);
    f.bus().hold_selftest = true;
    let (a, _) = agent_with(
        &d,
        &f,
        "model",
        true,
        "[selftest]\ntimeout_s = 1\n[health]\nstall_s = 2",
    );
    a.start();
    wait_stage(&a, Stage::SelfTest);
    assert_eq!(a.progress(), Ok(()));
    std::thread::sleep(Duration::from_millis(2500));
    let e = a.progress().unwrap_err();
    assert_eq!(e.0.len(), 1, "{e}");
    assert!(
        e.to_string().starts_with("card0: bring-up silent for 2 s"),
        "{e}"
    );
    f.release();
    wait_stage(&a, Stage::Ready);
    assert_eq!(a.progress(), Ok(()));
}

#[test]
fn narrowing_access_on_reload_revokes_the_holders_that_lost_it() {
    let d = dir("narrow");
    let f = card(0x0100_0000);
    let access = "[access]\nusers = [\"0\", \"4242\"]\ngroups = []";
    let (a, changes) = agent_with(&d, &f, "none", false, access);
    std::fs::write(d.join("picoevb0"), b"").unwrap();
    a.start();
    wait_stage(&a, Stage::Ready);
    let me = std::process::id();
    let alice = Caller {
        uid: 4242,
        gids: vec![],
        pid: Some(me),
    };
    a.open(0, &alice).unwrap();
    let h = a.holders(0).unwrap();
    assert_eq!((h.len(), h[0].uid, h[0].pid), (1, 4242, me), "{h:?}");
    // A reload that keeps everyone's access revokes nothing.
    a.reload().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !changes
            .lock()
            .unwrap()
            .iter()
            .any(|c| matches!(c, Change::Revoked(..)))
    );
    // Without uid 4242: its fd is revoked (the card leaves the bus and comes back), and it may not
    // Open again.
    let config = std::fs::read_to_string(d.join("agent.toml")).unwrap();
    std::fs::write(
        d.join("agent.toml"),
        config.replace("\"0\", \"4242\"", "\"0\""),
    )
    .unwrap();
    a.reload().unwrap();
    let t0 = Instant::now();
    while !changes
        .lock()
        .unwrap()
        .contains(&Change::Revoked(0, "access narrowed"))
    {
        assert!(t0.elapsed() < Duration::from_secs(10), "no Revoked");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_stage(&a, Stage::Ready);
    assert_eq!(f.bus().log, ["remove 0000:01:00.0", "rescan"]);
    assert!(a.holders(0).unwrap().is_empty());
    assert!(matches!(
        a.open(0, &alice),
        Err(AgentError::AccessDenied(_))
    ));
    opens(&a).unwrap();
}

#[test]
fn reprograms_by_anyone_but_root_are_rate_limited() {
    let d = dir("rate");
    let f = card(0x0100_0000);
    let (a, _) = agent_with(
        &d,
        &f,
        "model",
        true,
        "[admin]\nreprogram_interval_s = 3600",
    );
    a.start();
    wait_stage(&a, Stage::Ready);
    assert_eq!(a.reprogram_for(0, 4242).unwrap(), Stage::Ready);
    let e = a.reprogram_for(0, 4242).unwrap_err();
    assert!(
        matches!(e, AgentError::Busy(ref m) if m.contains("reprogram_interval_s is 3600 s")),
        "{e}"
    );
    assert_eq!(
        a.status(0).unwrap().stage,
        Stage::Ready,
        "refused, not failed"
    );
    assert_eq!(
        a.reprogram_for(0, 0).unwrap(),
        Stage::Ready,
        "root is not limited"
    );
}
