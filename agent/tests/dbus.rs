//! The D-Bus API against a real dbus-daemon (a private bus this test starts, with the shipped policy file
//! included so a malformed one fails here), the agent core on a scripted card, and the real client crate
//! and gdrctl on the other side. No mock of D-Bus.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::start_bus;
use gdr_agent::card::ports::{Node, Pci, SelfTester, Sleep};
use gdr_agent::config::Config;
use gdr_agent::daemon::{Agent, World};
use gdr_agent::selftest::Measurement;
use gdr_client::Error;
use picoevb_abi::{ABI_VERSION, AbiInfo};

/// A card that is present, bound and right.
#[derive(Default)]
struct Card {
    design: u32,
}

#[derive(Clone)]
struct Fake(Arc<Mutex<Card>>);

impl Pci for Fake {
    fn list(&self) -> Result<Vec<String>, String> {
        Ok(vec!["0000:01:00.0".into()])
    }
    fn driver(&self, _: &str) -> Option<String> {
        Some("picoevb".into())
    }
    fn remove(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn rescan(&self) -> Result<(), String> {
        Ok(())
    }
    fn link(&self, _: &str) -> Option<(String, u32)> {
        Some(("5.0 GT/s PCIe".into(), 1))
    }
    fn aer_errors(&self, _: &str) -> Option<gdr_agent::card::ports::Aer> {
        None
    }
}

impl Node for Fake {
    fn abi_info(&self, _: &Path) -> Result<AbiInfo, String> {
        Ok(AbiInfo {
            abi_version: ABI_VERSION,
            design_version: self.0.lock().unwrap().design,
            build_hash: 0xd00d,
            ..Default::default()
        })
    }
}

impl gdr_agent::card::ports::Loader for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn image_role(&self, _: gdr_agent::config::Target) -> &'static str {
        "model-update"
    }
    fn program(
        &self,
        _: &gdr_agent::manifest::Image,
        _: gdr_agent::config::Target,
    ) -> Result<String, String> {
        self.0.lock().unwrap().design = 0x0100_0000;
        Ok(String::new())
    }
}

impl SelfTester for Fake {
    fn run(&self, _: &Path) -> Result<Measurement, String> {
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

fn config_text(dir: &Path, access: &str) -> String {
    format!(
        r#"[agent]
bitstream_dir = "{d}"
state_dir = "{d}/state"
metrics_file = ""

[access]
{access}

[[card]]
device = "{d}/picoevb0"
loader = "model"
port = "{d}/port"
"#,
        d = dir.display()
    )
}

fn agent(dir: &Path, design: u32) -> Arc<Agent> {
    let image = b"model image";
    std::fs::write(dir.join("u.img"), image).unwrap();
    std::fs::write(dir.join("picoevb0"), b"not a card").unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        format!(
            r#"{{"schema":1,"version":"1.0.0","id_block":{{"design_version":"0x01000000","build_hash":"0xd00d"}},
               "files":[{{"name":"u.img","role":"model-update","sha256":"{}"}}]}}"#,
            gdr_agent::manifest::sha256_hex(image)
        ),
    )
    .unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(&path, config_text(dir, r#"users = ["root", "nobody"]"#)).unwrap();
    let mut config = Config::load(&path).unwrap();
    // The test's own uid must be allowed.
    // SAFETY: getuid has no preconditions.
    config
        .access
        .users
        .push(unsafe { libc::getuid() }.to_string());
    std::fs::write(
        &path,
        config_text(
            dir,
            &format!("users = [\"root\", \"{}\"]", config.access.users[2]),
        ),
    )
    .unwrap();
    let fake = Fake(Arc::new(Mutex::new(Card { design })));
    let world = World {
        pci: Arc::new(fake.clone()),
        node: Arc::new(fake.clone()),
        sleep: Arc::new(NoSleep),
        loader: Some(Arc::new(fake.clone())),
        tester: Some(Arc::new(fake)),
    };
    Agent::new(&path, config, world)
}

fn wait_settled(c: &gdr_client::Agent) {
    for _ in 0..200 {
        if c.settled().unwrap() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the card never settled");
}

fn gdrctl(bus: &str, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_gdrctl"))
        .args(["--bus", bus])
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_agent_on_a_real_bus() {
    let Some(bus) = start_bus("api") else { return };
    let dir = bus.dir.join("agent");
    std::fs::create_dir_all(&dir).unwrap();
    let a = agent(&dir, 0x0009_0000);
    let _conn = gdr_agent::dbus::serve(&a, Some(&bus.address)).expect("serving on the private bus");
    let c = gdr_client::Agent::at(&bus.address).unwrap();

    // Signals: subscribe before anything happens.
    let conn = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .build()
        .unwrap();
    let proxy = zbus::blocking::Proxy::new(
        &conn,
        gdr_client::BUS_NAME,
        gdr_client::card_path(0),
        gdr_client::CARD_IFACE,
    )
    .unwrap();
    let mut states = proxy.receive_signal("StateChanged").unwrap();

    a.start();
    wait_settled(&c);
    assert_eq!(c.cards().unwrap(), [0]);
    let s = c.status(0).unwrap();
    assert_eq!(
        (s.stage.as_str(), s.design_version),
        ("ready", 0x0100_0000),
        "{s:?}"
    );
    let stage: String = proxy.get_property("Stage").unwrap();
    assert_eq!(stage, "ready");
    // The wrong design was programmed: the signals told every stage on the way.
    let mut seen = Vec::new();
    while !seen.iter().any(|s: &String| s == "ready") {
        let m = states.next().unwrap();
        let (stage, _msg): (String, String) = m.body().deserialize().unwrap();
        seen.push(stage);
    }
    assert!(seen.contains(&"program".to_string()), "{seen:?}");

    // Open hands over the node's fd after the credential check.
    let dev = c.open(0).unwrap();
    let fd_ino = std::fs::metadata(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dev)
    ))
    .unwrap()
    .ino();
    assert_eq!(
        fd_ino,
        std::fs::metadata(dir.join("picoevb0")).unwrap().ino()
    );
    // A program the application starts must not inherit the card.
    // SAFETY: F_GETFD on an fd this test owns.
    let fd_flags = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&dev), libc::F_GETFD) };
    assert!(
        fd_flags >= 0 && fd_flags & libc::FD_CLOEXEC != 0,
        "fd flags {fd_flags:#x}: not close-on-exec"
    );

    // Self-test over the bus, its history, and bad arguments.
    let t: serde_json::Value = serde_json::from_str(&c.selftest(0).unwrap()).unwrap();
    assert_eq!(t["passed"], true);
    let h: serde_json::Value = serde_json::from_str(&c.history(0, 10).unwrap()).unwrap();
    assert_eq!(
        h.as_array().unwrap().len(),
        2,
        "bring-up and the one just run"
    );
    assert!(
        matches!(c.set_leds(0, 9), Err(Error::Agent { ref name, .. }) if name.ends_with("InvalidArgument"))
    );
    assert!(matches!(c.status(7), Err(Error::NoSuchCard(_))));

    // gdrctl through the same bus.
    let (code, out, err) = gdrctl(&bus.address, &["--json", "status"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["stage"], "ready");
    let (code, out, _) = gdrctl(&bus.address, &["status"]);
    assert_eq!(code, 0);
    assert!(out.contains("card0: ready"), "{out}");

    // Reprogram revokes (signal) and comes back ready.
    let mut revoked = proxy.receive_signal("Revoked").unwrap();
    c.reprogram(0).unwrap();
    assert!(revoked.next().is_some());
    assert_eq!(c.status(0).unwrap().stage, "ready");

    // A malformed config is refused with file, line and key; the running one stays.
    let path = dir.join("agent.toml");
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, good.replace("[access]", "[access]\nuserz = 1")).unwrap();
    match c.reload() {
        Err(Error::Agent { name, message }) => {
            assert_eq!(name, "org.gdr.Agent1.Error.InvalidConfig");
            assert!(
                message.contains("agent.toml:7: access.userz: unknown field"),
                "{message}"
            );
        }
        other => panic!("reload of a bad file: {other:?}"),
    }
    assert!(c.open(0).is_ok(), "the old config still allows us");

    // Two tiers: an application ([access]) that is not an administrator ([admin]) opens the card but
    // may not reprogram it, self-test it or reload the config.
    let app_only = format!(
        "{}\n[admin]\nusers = []\ngroups = []\n",
        config_text(&dir, r#"users = ["root"]"#)
    );
    std::fs::write(&path, &app_only).unwrap();
    c.reload().unwrap();
    assert!(c.open(0).is_ok());
    match c.reprogram(0) {
        Err(Error::AccessDenied(m)) => assert!(m.contains("is not in [admin] users"), "{m}"),
        other => panic!("reprogram by an application: {other:?}"),
    }
    let (code, _, err) = gdrctl(&bus.address, &["selftest", "0"]);
    assert_eq!(code, 4, "administration needs [admin]: {err}");
    let r = c.reload();
    assert!(matches!(r, Err(Error::AccessDenied(_))), "{r:?}");

    // A config without us (applied as SIGHUP would): Open is refused with a clear error, no fd, and the
    // fds we hold are revoked (signal first, then the card comes back).
    std::fs::write(
        &path,
        app_only.replace(r#"users = ["root"]"#, "users = []\ngroups = []"),
    )
    .unwrap();
    a.reload().unwrap();
    assert!(
        revoked.next().is_some(),
        "no Revoked for a narrowed [access]"
    );
    wait_settled(&c);
    match c.open(0) {
        Err(Error::AccessDenied(m)) => assert!(m.contains("is not in [access] users"), "{m}"),
        other => panic!("open by a stranger: {other:?}"),
    }
    assert_eq!(
        c.status(0).unwrap().stage,
        "ready",
        "reading stays open to all"
    );
}

#[test]
fn clients_say_plainly_when_the_agent_is_not_running() {
    let Some(bus) = start_bus("absent") else {
        return;
    };
    let c = gdr_client::Agent::at(&bus.address).unwrap();
    assert_eq!(c.cards().unwrap_err(), Error::AgentNotRunning);
    let (code, out, err) = gdrctl(&bus.address, &["status"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("the gdr agent is not running"), "{err}");
    let (code, out, _) = gdrctl(&bus.address, &["--json", "status"]);
    assert_eq!(code, 3);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["exit"],
        3
    );
    let (code, _, _) = gdrctl(&bus.address, &["frobnicate"]);
    assert_eq!(code, 2, "usage error");
}

/// An agent that takes every call and never answers.
struct Wedged;

#[zbus::interface(name = "org.gdr.Agent1.Card")]
impl Wedged {
    async fn open(&self) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
        std::future::pending().await
    }
}

#[test]
fn a_wedged_agent_times_the_call_out_instead_of_blocking_the_application() {
    let Some(bus) = start_bus("wedged") else {
        return;
    };
    let _agent = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name(gdr_client::BUS_NAME)
        .unwrap()
        .serve_at(gdr_client::card_path(0), Wedged)
        .unwrap()
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let address = bus.address.clone();
    std::thread::spawn(move || {
        let c =
            gdr_client::Agent::at_with_timeout(&address, Some(Duration::from_millis(500))).unwrap();
        let _ = tx.send(c.open(0).map(|_| ()));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("Open still blocked 20 s after a 0.5 s timeout");
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    assert_eq!(r.unwrap_err().code(), -9);
}
