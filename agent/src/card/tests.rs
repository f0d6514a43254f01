//! The state machine against a scripted card: no bus, no hardware.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use picoevb_abi::{ABI_VERSION, AbiInfo};

use super::ports::{Events, LoadError, Loader, Node, NodeError, Pci, PciError, SelfTester, Sleep};
use super::*;
use crate::config::{CardConfig, Config, LoaderKind, Target};
use crate::manifest::{Identity, Image, ImageFile, Manifest, sha256_hex};
use crate::selftest::Measurement;

const GOOD: Identity = Identity {
    design_version: 0x0100_0000,
    build_hash: 0x8169_0a8c,
};
const GOLDEN: Identity = Identity {
    design_version: 0x0009_0000,
    build_hash: 1,
};

/// One simulated card and bus.
#[derive(Default)]
struct World {
    present: bool,
    bound: bool,
    design: Identity,
    abi: u32,
    /// The next `n` programs are corrupted in transit (the FPGA falls back to golden).
    corrupt_programs: u32,
    /// Rescans that find nothing before the card comes back.
    lost_rescans: u32,
    /// The next `n` list() calls see no card.
    hidden: u32,
    log: Vec<String>,
    selftest_fails: bool,
    /// The self-test child finds the card RAM held by an application.
    selftest_busy: bool,
    /// The next `n` opens of the node are refused (udev has not applied the rules yet).
    node_denied: u32,
    /// While programming: the off-bus record that must exist, and whether it did.
    journal: Option<PathBuf>,
    journal_seen: bool,
    /// The next `n` removes report a failure (a helper call that timed out) but take the function off.
    remove_times_out: u32,
    /// Set while programming (the agent is told to stop mid-operation).
    stop_on_program: Option<Arc<AtomicBool>>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<World>>);

impl Fake {
    fn w(&self) -> std::sync::MutexGuard<'_, World> {
        self.0.lock().unwrap()
    }
}

impl Pci for Fake {
    fn list(&self) -> Result<Vec<String>, PciError> {
        let mut w = self.w();
        if w.hidden > 0 {
            w.hidden -= 1;
            return Ok(vec![]);
        }
        Ok(if w.present {
            vec!["0000:01:00.0".into()]
        } else {
            vec![]
        })
    }
    fn driver(&self, _: &str) -> Option<String> {
        let w = self.w();
        (w.present && w.bound).then(|| "picoevb".into())
    }
    fn remove(&self, bdf: &str) -> Result<(), PciError> {
        let mut w = self.w();
        w.log.push(format!("remove {bdf}"));
        w.present = false;
        w.bound = false;
        if w.remove_times_out > 0 {
            w.remove_times_out -= 1;
            return Err(PciError::Privileged(
                std::io::Error::from_raw_os_error(libc::EAGAIN).into(),
            ));
        }
        Ok(())
    }
    fn rescan(&self) -> Result<(), PciError> {
        let mut w = self.w();
        w.log.push("rescan".into());
        if w.lost_rescans > 0 {
            w.lost_rescans -= 1;
        } else {
            w.present = true;
            w.bound = true;
        }
        Ok(())
    }
    fn link(&self, _: &str) -> Option<(String, u32)> {
        Some(("5.0 GT/s PCIe".into(), 1))
    }
    fn aer_errors(&self, _: &str) -> Option<super::ports::Aer> {
        Some(Default::default())
    }
}

impl Node for Fake {
    fn abi_info(&self, node: &Path) -> Result<AbiInfo, NodeError> {
        let mut w = self.w();
        let refused = |errno| NodeError {
            node: node.to_path_buf(),
            source: gdr_client::Error::Os { op: "open", errno },
        };
        if !w.bound {
            return Err(refused(libc::ENODEV));
        }
        if w.node_denied > 0 {
            w.node_denied -= 1;
            return Err(refused(libc::EACCES));
        }
        Ok(AbiInfo {
            abi_version: w.abi,
            design_version: w.design.design_version,
            build_hash: w.design.build_hash,
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
    fn program(&self, image: &Image, _: Target) -> Result<String, LoadError> {
        let mut w = self.w();
        w.log.push(format!("program {}", image.name()));
        assert!(
            !w.present,
            "programmed while the function was still on the bus"
        );
        if let Some(j) = w.journal.clone() {
            w.journal_seen = j.exists();
        }
        if let Some(stop) = &w.stop_on_program {
            stop.store(true, Ordering::SeqCst);
        }
        if w.corrupt_programs > 0 {
            w.corrupt_programs -= 1;
            w.design = GOLDEN;
        } else {
            w.design = GOOD;
        }
        Ok("loaded".into())
    }
}

impl SelfTester for Fake {
    fn run(&self, _: &Path) -> Result<Measurement, crate::selftest::SelfTestError> {
        let w = self.w();
        if w.selftest_busy {
            return Err(crate::selftest::SelfTestError::Busy);
        }
        Ok(Measurement {
            memory: "host".into(),
            path: "host".into(),
            memory_note: "test".into(),
            bytes: 4096,
            h2c_mbps: 10.0,
            c2h_mbps: 10.0,
            duration_us: 1,
            mismatches: u64::from(w.selftest_fails),
            first_mismatch: w.selftest_fails.then_some(crate::selftest::Mismatch {
                offset: 4,
                expected: 1,
                got: 0,
            }),
        })
    }
}

#[derive(Default)]
struct Recorder {
    stages: Mutex<Vec<Stage>>,
    extended: Mutex<u32>,
    status: Mutex<Option<Arc<Mutex<CardStatus>>>>,
}

impl Events for Recorder {
    fn changed(&self, _: usize) {
        let st = self.status.lock().unwrap().clone().unwrap();
        let stage = st.lock().unwrap().stage;
        let mut v = self.stages.lock().unwrap();
        if v.last() != Some(&stage) {
            v.push(stage);
        }
    }
    fn extend_timeout(&self, _: u64) {
        *self.extended.lock().unwrap() += 1;
    }
}

struct NoSleep;
impl Sleep for NoSleep {
    fn sleep(&self, _: std::time::Duration) {}
}

fn machine(fake: &Fake, dir: &Path) -> (Machine, Arc<Recorder>) {
    let image = b"model image";
    std::fs::write(dir.join("update.img"), image).unwrap();
    let manifest = Manifest {
        version: "1.0.0".into(),
        expected: GOOD,
        golden: Some(GOLDEN),
        files: vec![ImageFile {
            path: dir.join("update.img"),
            role: "model-update".into(),
            sha256: sha256_hex(image),
        }],
    };
    let mut config = Config::default();
    config.agent.state_dir = dir.to_path_buf();
    let card = CardConfig {
        pci: "auto".into(),
        device: "/dev/picoevb0".into(),
        loader: LoaderKind::Model,
        port: Some("/dev/null".into()),
        jtag_serial: None,
        target: Target::Flash,
    };
    let status = Arc::new(Mutex::new(CardStatus::new(0)));
    let rec = Arc::new(Recorder::default());
    *rec.status.lock().unwrap() = Some(status.clone());
    let m = Machine {
        index: 0,
        card,
        config,
        manifest: Some(manifest),
        pci: Arc::new(fake.clone()),
        node: Arc::new(fake.clone()),
        loader: Some(Arc::new(fake.clone())),
        tester: Arc::new(fake.clone()),
        events: rec.clone(),
        sleep: Arc::new(NoSleep),
        status,
        stop: Arc::new(AtomicBool::new(false)),
    };
    (m, rec)
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gdr-machine-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn card(design: Identity) -> Fake {
    let f = Fake::default();
    {
        let mut w = f.w();
        w.present = true;
        w.bound = true;
        w.design = design;
        w.abi = ABI_VERSION;
    }
    f
}

#[test]
fn a_card_with_the_right_design_is_not_programmed() {
    let f = card(GOOD);
    let d = tmp("right");
    let (m, rec) = machine(&f, &d);
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert!(f.w().log.is_empty(), "{:?}", f.w().log);
    assert_eq!(
        *rec.stages.lock().unwrap(),
        [
            Stage::Pending,
            Stage::Discover,
            Stage::Identify,
            Stage::Bind,
            Stage::SelfTest,
            Stage::Ready
        ]
    );
    let s = m.status.lock().unwrap();
    assert_eq!(s.link_width, 1);
    assert!(s.last_selftest.as_ref().unwrap().passed);
    assert_eq!(
        crate::selftest::history::read(&d.join("selftest-card0.jsonl")).len(),
        1
    );
}

#[test]
fn a_wrong_design_is_programmed_with_remove_and_rescan_around_it() {
    let f = card(GOLDEN);
    let d = tmp("wrong");
    let (m, rec) = machine(&f, &d);
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert_eq!(
        f.w().log,
        ["remove 0000:01:00.0", "program update.img", "rescan"]
    );
    assert!(rec.stages.lock().unwrap().contains(&Stage::Program));
    assert_eq!(
        *rec.extended.lock().unwrap(),
        1,
        "EXTEND_TIMEOUT_USEC while programming"
    );
    assert_eq!(m.status.lock().unwrap().design_version, GOOD.design_version);
}

#[test]
fn a_node_udev_has_not_opened_yet_is_waited_for_after_rescan() {
    let f = card(GOLDEN);
    f.w().node_denied = 5;
    let (m, _) = machine(&f, &tmp("udev"));
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert_eq!(
        f.w().log,
        ["remove 0000:01:00.0", "program update.img", "rescan"],
        "no second program"
    );
}

#[test]
fn a_node_udev_has_not_opened_yet_at_boot_is_waited_for_not_reprogrammed() {
    let f = card(GOOD);
    f.w().node_denied = 5;
    let (m, _) = machine(&f, &tmp("boot-race"));
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert!(f.w().log.is_empty(), "reprogrammed: {:?}", f.w().log);
}

#[test]
fn an_unbound_card_is_programmed() {
    let f = card(GOOD);
    f.w().bound = false;
    let (m, _) = machine(&f, &tmp("unbound"));
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert_eq!(f.w().log.len(), 3);
}

#[test]
fn fallback_to_golden_is_detected_retried_and_reported() {
    let f = card(GOLDEN);
    f.w().corrupt_programs = 1;
    let (m, _) = machine(&f, &tmp("fallback1"));
    assert_eq!(m.bring_up(false), Stage::Ready, "the second try succeeds");

    let f = card(GOLDEN);
    f.w().corrupt_programs = 99;
    let (m, _) = machine(&f, &tmp("fallback"));
    assert_eq!(m.bring_up(false), Stage::Failed);
    let s = m.status.lock().unwrap();
    assert_eq!(s.failed_stage, Some(Stage::Program));
    assert!(s.fell_back_to_golden);
    assert!(s.message.contains("golden design 0.9.0"), "{}", s.message);
    assert!(s.message.contains("MultiBoot fallback"), "{}", s.message);
    assert_eq!(
        f.w()
            .log
            .iter()
            .filter(|l| l.starts_with("program"))
            .count(),
        3
    );
}

#[test]
fn a_slow_rescan_is_retried_and_a_dead_one_fails_plainly() {
    let f = card(GOLDEN);
    f.w().lost_rescans = 1;
    let (m, _) = machine(&f, &tmp("slow"));
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert_eq!(f.w().log.iter().filter(|l| *l == "rescan").count(), 2);

    let f = card(GOLDEN);
    f.w().lost_rescans = 99;
    let (m, _) = machine(&f, &tmp("dead"));
    assert_eq!(m.bring_up(false), Stage::Failed);
    let s = m.status.lock().unwrap();
    assert_eq!(s.failed_stage, Some(Stage::Relink));
    assert!(s.message.contains("did not come back"), "{}", s.message);
    assert!(s.message.contains("after 3 tries"), "{}", s.message);
}

#[test]
fn discovery_retries_then_names_what_it_found() {
    let f = card(GOOD);
    f.w().hidden = 2;
    let (m, _) = machine(&f, &tmp("disc"));
    assert_eq!(m.bring_up(false), Stage::Ready, "found on the third look");

    let f = Fake::default();
    let (m, _) = machine(&f, &tmp("absent"));
    assert_eq!(m.bring_up(false), Stage::Failed);
    let s = m.status.lock().unwrap();
    assert_eq!(s.failed_stage, Some(Stage::Discover));
    assert!(s.message.contains("found: none"), "{}", s.message);
}

#[test]
fn a_wrong_abi_major_fails_at_bind() {
    let f = card(GOOD);
    f.w().abi = 2 << 16;
    let (m, _) = machine(&f, &tmp("abi"));
    assert_eq!(m.bring_up(false), Stage::Failed);
    let s = m.status.lock().unwrap();
    assert_eq!(s.failed_stage, Some(Stage::Bind));
    assert!(s.message.contains("driver ABI 2.0"), "{}", s.message);
}

#[test]
fn a_failed_selftest_fails_the_card_and_reprogram_is_forced() {
    let f = card(GOOD);
    f.w().selftest_fails = true;
    let (m, _) = machine(&f, &tmp("st"));
    assert_eq!(m.bring_up(false), Stage::Failed);
    assert_eq!(m.status.lock().unwrap().failed_stage, Some(Stage::SelfTest));
    f.w().selftest_fails = false;
    assert_eq!(m.bring_up(true), Stage::Ready);
    assert_eq!(
        f.w().log[1],
        "program update.img",
        "forced although the design was right"
    );
}

/// The self-test never runs over an application's data: a card whose RAM is held comes up Ready, with the
/// test skipped and nothing recorded, instead of failing. Fails if BUSY is judged as a failed self-test.
#[test]
fn a_held_card_skips_the_selftest_and_is_not_failed() {
    let f = card(GOOD);
    f.w().selftest_busy = true;
    let d = tmp("st-busy");
    let (m, _) = machine(&f, &d);
    assert_eq!(m.bring_up(false), Stage::Ready);
    let s = m.status.lock().unwrap();
    assert_eq!(s.failed_stage, None);
    assert!(
        s.last_selftest.is_none(),
        "a test that did not run was recorded"
    );
}

#[test]
fn a_damaged_image_is_never_programmed() {
    let f = card(GOLDEN);
    let d = tmp("damaged");
    let (m, _) = machine(&f, &d);
    std::fs::write(d.join("update.img"), b"other bytes").unwrap();
    assert_eq!(m.bring_up(false), Stage::Failed);
    assert!(f.w().log.is_empty());
    let s = m.status.lock().unwrap();
    assert_eq!(s.failed_stage, Some(Stage::Program));
    assert!(s.message.contains("sha256"), "{}", s.message);
}

const REFERENCE: Identity = Identity {
    design_version: 0,
    build_hash: 0,
};

/// A card whose design is kept (`loader = "none"`), on a box without a bitstream (no manifest).
fn keeping(fake: &Fake, dir: &Path) -> (Machine, Arc<Recorder>) {
    let (mut m, rec) = machine(fake, dir);
    m.card.loader = LoaderKind::None;
    m.card.port = None;
    m.loader = None;
    m.manifest = None;
    (m, rec)
}

#[test]
fn without_a_bitstream_the_reference_design_is_kept_tested_and_served() {
    let f = card(REFERENCE);
    let d = tmp("keep-ref");
    let (m, rec) = keeping(&f, &d);
    assert_eq!(
        m.bring_up(false),
        Stage::Ready,
        "{}",
        m.status.lock().unwrap().message
    );
    assert!(f.w().log.is_empty(), "never programmed: {:?}", f.w().log);
    let s = m.status.lock().unwrap().clone();
    assert_eq!(s.design, Design::Reference);
    assert_eq!(s.loader, "none");
    assert_eq!((s.expected_version, s.expected_hash), (0, 0));
    assert!(s.last_selftest.as_ref().unwrap().passed, "self-tested");
    assert_eq!(
        *rec.stages.lock().unwrap(),
        [
            Stage::Pending,
            Stage::Discover,
            Stage::Identify,
            Stage::SelfTest,
            Stage::Ready
        ]
    );
    // A reprogram of a failed card (a forced bring-up) still never programs it.
    assert_eq!(m.bring_up(true), Stage::Ready);
    assert!(f.w().log.is_empty(), "{:?}", f.w().log);
}

#[test]
fn without_a_bitstream_any_gdr_design_is_kept_even_beside_a_manifest() {
    let f = card(GOLDEN);
    let (mut m, _) = keeping(&f, &tmp("keep-gdr"));
    let (with_manifest, _) = machine(&f, &tmp("keep-gdr-m"));
    m.manifest = with_manifest.manifest.clone();
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert!(f.w().log.is_empty(), "{:?}", f.w().log);
    let s = m.status.lock().unwrap();
    assert_eq!(s.design, Design::Gdr);
    assert_eq!(s.design_version, GOLDEN.design_version);
}

#[test]
fn without_a_bitstream_a_driver_still_binding_is_waited_for_not_failed() {
    let f = card(REFERENCE);
    f.w().node_denied = 2;
    let (m, _) = keeping(&f, &tmp("keep-race"));
    assert_eq!(m.bring_up(false), Stage::Ready);
    let f = card(REFERENCE);
    f.w().abi = 2 << 16;
    let (m, _) = keeping(&f, &tmp("keep-abi"));
    assert_eq!(m.bring_up(false), Stage::Failed);
    assert!(m.status.lock().unwrap().message.contains("driver ABI 2.0"));
}

#[test]
fn removal_is_recorded_before_the_card_leaves_the_bus_and_cleared_once_back() {
    let f = card(GOLDEN);
    let d = tmp("journal");
    let record = journal::path(&d, 0);
    f.w().journal = Some(record.clone());
    let (m, _) = machine(&f, &d);
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert!(f.w().journal_seen, "no off-bus record while programming");
    assert!(!record.exists(), "record left behind once the card is back");
}

#[test]
fn a_card_an_interrupted_run_left_off_the_bus_is_rescanned_and_brought_up() {
    // The previous agent removed the function, programmed, and died before the rescan.
    let f = card(GOOD);
    {
        let mut w = f.w();
        w.present = false;
        w.bound = false;
    }
    let d = tmp("recover");
    let record = journal::path(&d, 0);
    journal::record(
        &record,
        &journal::OffBus {
            op: "program".into(),
            pci: "0000:01:00.0".into(),
            since: 1,
        },
    )
    .unwrap();
    let (m, _) = machine(&f, &d);
    assert_eq!(
        m.bring_up(false),
        Stage::Ready,
        "{}",
        m.status.lock().unwrap().message
    );
    assert_eq!(f.w().log, ["rescan"], "rescanned, not reprogrammed");
    assert!(!record.exists());

    // Without a record the card is not looked for behind the bus's back.
    let f = card(GOOD);
    f.w().present = false;
    let (m, _) = machine(&f, &tmp("no-record"));
    assert_eq!(m.bring_up(false), Stage::Failed);
    assert!(f.w().log.is_empty());

    // A record that cannot be read still gets the bus rescanned.
    let f = card(GOOD);
    f.w().present = false;
    let d = tmp("bad-record");
    std::fs::write(journal::path(&d, 0), "{").unwrap();
    let (m, _) = machine(&f, &d);
    assert_eq!(m.bring_up(false), Stage::Ready);
    assert!(!journal::path(&d, 0).exists());
}

#[test]
fn a_stop_during_programming_still_brings_the_card_back_then_starts_nothing_new() {
    let f = card(GOLDEN);
    let d = tmp("stop");
    let (m, _) = machine(&f, &d);
    f.w().stop_on_program = Some(m.stop.clone());
    // The first rescan finds nothing: the relink must keep trying although the agent stops.
    f.w().lost_rescans = 1;
    assert_eq!(m.bring_up(false), Stage::Failed);
    assert_eq!(
        f.w().log,
        [
            "remove 0000:01:00.0",
            "program update.img",
            "rescan",
            "rescan"
        ],
        "the removed function is rescanned although the agent stops"
    );
    assert!(f.w().present && f.w().bound);
    assert!(!journal::path(&d, 0).exists());
    let s = m.status.lock().unwrap();
    assert_eq!(s.failed_stage, Some(Stage::SelfTest));
    assert!(s.message.contains("stopping"), "{}", s.message);
}

#[test]
fn a_remove_that_timed_out_but_happened_is_rescanned_and_tried_again() {
    let f = card(GOLDEN);
    f.w().remove_times_out = 1;
    let d = tmp("remove-timeout");
    let (m, _) = machine(&f, &d);
    assert_eq!(
        m.bring_up(false),
        Stage::Ready,
        "{}",
        m.status.lock().unwrap().message
    );
    assert_eq!(
        f.w().log,
        [
            "remove 0000:01:00.0",
            "rescan",
            "remove 0000:01:00.0",
            "program update.img",
            "rescan"
        ]
    );
    assert!(!journal::path(&d, 0).exists());
}
