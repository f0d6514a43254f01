//! A private dbus-daemon for the agent's integration tests (Debian's dbus-daemon with a session-style
//! config that includes the shipped policy file).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A private bus; killed on drop.
pub struct Bus {
    child: Child,
    pub address: String,
    pub dir: PathBuf,
}

impl Bus {
    /// Stops the bus daemon now (the agent loses its connection).
    #[allow(dead_code)] // not every test file that includes this module uses it
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn dbus_daemon() -> Option<PathBuf> {
    let find = || {
        ["/usr/bin/dbus-daemon", "/bin/dbus-daemon"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    };
    if let Some(p) = find() {
        return Some(p);
    }
    // CI machines start bare; bench/test.sh runs as root, so install Debian's dbus-daemon there.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && Path::new("/usr/bin/apt-get").exists() {
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let install = [
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            "dbus-daemon",
        ];
        if !apt(&install) {
            // A fresh machine may have no package lists yet.
            apt(&["update", "-qq"]);
            apt(&install);
        }
    }
    find()
}

pub fn start_bus(name: &str) -> Option<Bus> {
    static DAEMON: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let Some(daemon) = DAEMON.get_or_init(dbus_daemon).clone() else {
        eprintln!(
            "SKIPPED {name}: dbus-daemon not found and not installable here (apt-get install dbus-daemon)"
        );
        return None;
    };
    // A call that never gets a reply would hang the test run: fail it instead.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(120));
        eprintln!("D-Bus test timed out after 120 s");
        std::process::exit(1);
    });
    let dir = std::env::temp_dir().join(format!("gdr-dbus-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/org.gdr.Agent1.conf");
    let conf = dir.join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
  </policy>
  <include>{}</include>
</busconfig>
"#,
            dir.display(),
            policy.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(daemon)
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--nopidfile", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("dbus-daemon starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        !line.trim().is_empty(),
        "dbus-daemon printed no address (bad policy file?)"
    );
    Some(Bus {
        child,
        address: line.trim().to_string(),
        dir,
    })
}
