//! `gdr-bench run`: initramfs, model, RPC relay, QEMU, console, checks, cleanup.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use gdr_model_control::{Done, Request, StateReply};

use crate::cli::{Appliance, RunArgs};
use crate::console::{Console, Kind};
use crate::procs::Group;
use crate::{appliance, control, initramfs, relay, report};

/// How long the model gets to create its sockets.
const MODEL_START: Duration = Duration::from_secs(15);
/// How long QEMU gets to exit after the guest printed INIT DONE and powered off.
const POWEROFF: Duration = Duration::from_secs(30);
/// Print a progress note when the console has been quiet this long.
const QUIET_NOTE: Duration = Duration::from_secs(60);

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM only set a flag: the main loop then stops QEMU and the model, which live in their own
/// process groups and would not see a terminal's ^C.
fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

fn note(msg: &str) {
    println!("[gdr-bench] {msg}");
    let _ = std::io::stdout().flush();
}

/// The last `n` lines of a file, for evidence.
fn tail_of(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

fn is_socket(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

fn absolute(p: &Path, what: &str) -> Result<PathBuf, String> {
    std::fs::canonicalize(p).map_err(|e| format!("{what} {}: {e}", p.display()))
}

/// Paths of one run; all under the run directory, which the chroot sees at the same path.
struct RunDir {
    dir: PathBuf,
    created: bool,
}

impl RunDir {
    fn new(given: Option<&Path>) -> Result<Self, String> {
        let (dir, created) = match given {
            Some(d) => (d.to_path_buf(), false),
            None => {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                (
                    std::env::temp_dir().join(format!("gdr-bench-{}-{secs}", std::process::id())),
                    true,
                )
            }
        };
        std::fs::create_dir_all(&dir).map_err(|e| format!("run dir {}: {e}", dir.display()))?;
        let dir = absolute(&dir, "run dir")?;
        for s in ["vfio.sock", "ctl.sock", "rpc.sock"] {
            let _ = std::fs::remove_file(dir.join(s));
        }
        for i in 1..MAX_CARDS {
            let _ = std::fs::remove_file(dir.join(sock("vfio", i)));
            let _ = std::fs::remove_file(dir.join(sock("ctl", i)));
        }
        Ok(RunDir { dir, created })
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Most cards one run can have (one root port and one model each).
pub const MAX_CARDS: u32 = 4;

/// Socket (or log) name of card `i`: card 0 keeps the plain names (`vfio.sock`, `ctl.sock`).
fn sock(kind: &str, i: u32) -> String {
    if i == 0 {
        format!("{kind}.sock")
    } else {
        format!("{kind}{i}.sock")
    }
}

/// Faults the models injected in this run, over all cards; `None` if one did not answer.
fn model_faults(run: &RunDir, cards: u32) -> Option<u64> {
    let state = Request::State {};
    (0..cards)
        .map(|i| {
            control::call_ok::<StateReply>(&run.path(&sock("ctl", i)), &state)
                .ok()
                .map(|s| s.faults_injected)
        })
        .sum()
}

fn start_model(a: &RunArgs, run: &RunDir, i: u32) -> Result<Group, String> {
    let log_name = if i == 0 {
        "model.log".to_string()
    } else {
        format!("model{i}.log")
    };
    let (vfio, ctl) = (run.path(&sock("vfio", i)), run.path(&sock("ctl", i)));
    let log = File::create(run.path(&log_name)).map_err(|e| format!("{log_name}: {e}"))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let mut model = Group::spawn(
        "model",
        Command::new(&a.model)
            .arg("--socket")
            .arg(&vfio)
            .arg("--control")
            .arg(&ctl)
            .args(&a.model_args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2),
    )
    .map_err(|e| e.to_string())?;
    let end = Instant::now() + MODEL_START;
    while !(is_socket(&vfio) && is_socket(&ctl)) {
        if let Some(st) = model.try_wait() {
            let log = tail_of(&run.path(&log_name), 20).join("\n");
            return Err(format!(
                "model exited ({st}) before creating its sockets:\n{log}"
            ));
        }
        if Instant::now() >= end {
            return Err(format!(
                "model created no sockets within {} s",
                MODEL_START.as_secs()
            ));
        }
        thread::sleep(Duration::from_millis(50));
    }
    Ok(model)
}

fn qemu_command(a: &RunArgs, repo: &Path, run: &RunDir, root: &Path) -> Command {
    let mb = a.memory_mb;
    let p = |n: &str| run.path(n).display().to_string();
    let (arch, iommu) = (a.arch, a.iommu);
    let append = format!(
        "console={} panic=-1 loglevel=6 {} {} {}",
        arch.console(),
        arch.kernel_args(),
        iommu.append(),
        a.append
    )
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ");
    let mut c = Command::new(repo.join("bench/in-root.sh"));
    c.arg(root).arg(arch.qemu());
    c.args([
        "-accel",
        "tcg",
        "-cpu",
        a.cpu.as_deref().unwrap_or(arch.cpu()),
        "-smp",
        "2",
        "-m",
        &mb.to_string(),
    ]);
    c.args([
        "-object",
        &format!("memory-backend-memfd,id=mem,size={mb}M,share=on"),
    ]);
    c.args(["-machine", &arch.machine(iommu)]);
    c.args(["-nodefaults", "-nographic", "-no-reboot"]);
    c.args([
        "-serial",
        "stdio",
        "-serial",
        &format!("unix:{}", p("rpc.sock")),
    ]);
    match &a.appliance {
        None => {
            c.args([
                "-kernel",
                &p(arch.kernel_name()),
                "-initrd",
                &p("initramfs.cpio"),
                "-append",
                &append,
            ]);
            if let Some(dev) = iommu.device() {
                c.args(["-device", dev]);
            }
        }
        Some(ap) => {
            let append = format!("{append} {}", appliance::cmdline(ap));
            c.args(["-kernel", &p(arch.kernel_name()), "-append", &append]);
            c.args(appliance::qemu_args(
                &p("base.img"),
                &p("layer.img"),
                |i| p(&sock("ctl", i)),
                a.cards,
            ));
        }
    }
    // One root port and one vfio-user function per card, in card order (card 0 enumerates first).
    for i in 0..a.cards {
        let vfio = serde_json::json!({
            "driver": "vfio-user-pci",
            "bus": format!("rp{i}"),
            "socket": {"path": p(&sock("vfio", i)), "type": "unix"},
        });
        c.args([
            "-device",
            &format!("pcie-root-port,id=rp{i},bus=pcie.0,chassis={}", i + 1),
        ]);
        c.args(["-device", &vfio.to_string()]);
    }
    c.env("GDR_RUN", &run.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    c
}

/// Reads QEMU's stdout (the guest console), saves it to `log` and sends it on line by line.
fn console_reader(mut out: impl Read + Send + 'static, mut log: File) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut pending = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let _ = log.write_all(&buf[..n]);
            pending.extend_from_slice(&buf[..n]);
            while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                if tx
                    .send(String::from_utf8_lossy(&line).into_owned())
                    .is_err()
                {
                    return;
                }
            }
        }
        if !pending.is_empty() {
            let _ = tx.send(String::from_utf8_lossy(&pending).into_owned());
        }
    });
    rx
}

/// Feeds console lines to the parser until INIT DONE and QEMU's exit, the timeout, or a signal.
fn watch(
    rx: &mpsc::Receiver<String>,
    console: &mut Console,
    timeout: Duration,
    facts: &mut report::RunFacts,
) {
    let start = Instant::now();
    let deadline = start + timeout;
    let mut last_echo = Instant::now();
    let mut done_at: Option<Instant> = None;
    loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            facts.interrupted = true;
            note("interrupted: stopping QEMU and the model");
            break;
        }
        let now = Instant::now();
        let limit = done_at.map_or(deadline, |d| (d + POWEROFF).min(deadline));
        if now >= limit {
            if done_at.is_some() {
                note("QEMU did not exit after the guest powered off; killing it");
            } else {
                facts.timed_out = true;
                note(&format!(
                    "TIMEOUT after {} s; killing QEMU",
                    timeout.as_secs()
                ));
            }
            break;
        }
        match rx.recv_timeout((limit - now).min(Duration::from_secs(1))) {
            Ok(line) => {
                let kind = console.feed(&line);
                let text = console.lines.last().map(String::as_str).unwrap_or_default();
                match kind {
                    Kind::Guest | Kind::Init => println!("{text}"),
                    Kind::Splat => println!("KERNEL SPLAT: {text}"),
                    Kind::Other => continue,
                }
                last_echo = Instant::now();
                if console.done && done_at.is_none() {
                    done_at = Some(Instant::now());
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if last_echo.elapsed() >= QUIET_NOTE {
                    let last = console.lines.last().cloned().unwrap_or_default();
                    note(&format!(
                        "{} s, {} console lines; last: {last}",
                        start.elapsed().as_secs(),
                        console.lines.len()
                    ));
                    last_echo = Instant::now();
                }
            }
            // QEMU closed its stdout: it has exited.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    facts.elapsed_s = start.elapsed().as_secs();
}

/// Writes the bench's initramfs into the run dir; returns the module file names, in load order.
fn bench_initramfs(a: &RunArgs, busybox: PathBuf, run: &RunDir) -> Result<Vec<String>, String> {
    let mut guest_args = vec![a.mode.as_str().to_string()];
    guest_args.extend(a.guest_args.iter().cloned());
    let spec = initramfs::Spec {
        busybox,
        modules: a.modules.clone(),
        guest: a.guest.clone(),
        guest_args,
    };
    initramfs::write(&spec, &run.path("initramfs.cpio"))?;
    Ok(a.modules
        .iter()
        .map(|m| {
            m.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect())
}

/// Puts the appliance's disks where QEMU, inside the chroot, sees them: the run dir. The base image is
/// hard-linked (QEMU only reads it: `snapshot=on` sends writes to a temporary overlay), the small layer copied.
fn appliance_disks(ap: &Appliance, run: &RunDir) -> Result<(), String> {
    let base = run.path("base.img");
    let _ = std::fs::remove_file(&base);
    std::fs::hard_link(&ap.base, &base).map_err(|e| {
        format!(
            "--base {}: cannot link it into the run dir ({e}); keep the run dir on the image's file system",
            ap.base.display()
        )
    })?;
    std::fs::copy(&ap.layer, run.path("layer.img"))
        .map_err(|e| format!("--layer {}: {e}", ap.layer.display()))?;
    Ok(())
}

/// Runs the bench; returns whether it passed. Errors are setup failures (bad paths, model would not start).
pub fn run(a: &RunArgs) -> Result<bool, String> {
    catch_signals();
    let root = absolute(&a.root, "--root")?;
    let busybox = a
        .busybox
        .clone()
        .unwrap_or_else(|| root.join("usr/bin/busybox"));
    let repo = absolute(&a.repo, "--repo")?;
    let in_root = repo.join("bench/in-root.sh");
    for (p, what) in [
        (&busybox, "busybox in the chroot"),
        (&in_root, "bench/in-root.sh"),
    ] {
        if !p.is_file() {
            return Err(format!("{what} not found at {}", p.display()));
        }
    }
    let run = RunDir::new(a.run_dir.as_deref())?;
    note(&format!("run dir {}", run.dir.display()));

    // The kernel is copied in so QEMU, inside the chroot, sees it wherever it came from.
    std::fs::copy(&a.kernel, run.path(a.arch.kernel_name()))
        .map_err(|e| format!("--kernel {}: {e}", a.kernel.display()))?;
    let modules = match &a.appliance {
        Some(ap) => {
            appliance_disks(ap, &run)?;
            Vec::new()
        }
        None => bench_initramfs(a, busybox, &run)?,
    };

    let mut models = Vec::new();
    for i in 0..a.cards {
        models.push(start_model(a, &run, i)?);
    }
    note(&format!("model up ({} card(s))", a.cards));
    for spec in &a.inject {
        control::call_ok::<Done>(&run.path("ctl.sock"), &control::inject_request(spec)?)?;
        note(&format!("injected {spec}"));
    }
    let listener =
        UnixListener::bind(run.path("rpc.sock")).map_err(|e| format!("rpc.sock: {e}"))?;
    let relay = relay::spawn(listener, run.path("ctl.sock"), run.path("rpc.log"));

    let qemu_err = File::create(run.path("qemu.log")).map_err(|e| format!("qemu.log: {e}"))?;
    let mut cmd = qemu_command(a, &repo, &run, &root);
    cmd.stderr(qemu_err);
    let mut qemu = Group::spawn("qemu", &mut cmd).map_err(|e| e.to_string())?;
    note(&format!("QEMU started (timeout {} s)", a.timeout.as_secs()));
    let stdout = qemu.child_mut().stdout.take().ok_or("no QEMU stdout")?;
    let console_log =
        File::create(run.path("console.log")).map_err(|e| format!("console.log: {e}"))?;
    let rx = console_reader(stdout, console_log);

    let mut console = Console::default();
    let mut facts = report::RunFacts::default();
    watch(&rx, &mut console, a.timeout, &mut facts);
    // Asked while QEMU still holds the models (they exit when it disconnects).
    facts.faults_injected = model_faults(&run, a.cards);

    qemu.stop();
    // The model exits when QEMU disconnects; give it a moment, then make sure.
    for model in &mut models {
        if model.wait_for(Duration::from_secs(5)).is_none() {
            model.stop();
        }
    }
    // Drain what QEMU wrote before it died.
    while let Ok(line) = rx.try_recv() {
        console.feed(&line);
    }
    if relay.is_finished()
        && let Ok(Ok(n)) = relay.join()
    {
        note(&format!("{n} RPC request(s) relayed"));
    }
    facts.qemu_stderr = tail_of(&run.path("qemu.log"), 10);
    facts.model_log = tail_of(&run.path("model.log"), 10);
    // The chroot-side mount point of the run dir: empty once QEMU's mount namespace is gone.
    if let Ok(rel) = run.dir.strip_prefix("/") {
        let _ = std::fs::remove_dir(root.join(rel));
    }

    let checks = report::checks(&console, &modules, &facts, a.appliance.is_some());
    println!("{}", report::figures(&console, &facts));
    let ok = report::print(&console, &checks, a.expect_failures);
    if run.created && ok && !a.keep {
        let _ = std::fs::remove_dir_all(&run.dir);
    } else {
        note(&format!(
            "logs in {} (console.log, model.log, qemu.log, rpc.log)",
            run.dir.display()
        ));
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The QEMU command for a bench run with these arguments in run dir /tmp/run: the command, its
    /// arguments, and the arguments joined by spaces.
    fn command_for(argline: &str) -> (Command, Vec<String>, String) {
        let a = crate::cli::parse_run(
            &argline
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let run = RunDir {
            dir: PathBuf::from("/tmp/run"),
            created: false,
        };
        let c = qemu_command(&a, Path::new("/repo"), &run, Path::new("/r"));
        let args: Vec<String> = c
            .get_args()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        (c, args, joined)
    }

    #[test]
    fn qemu_command_line() {
        let (c, args, joined) = command_for(
            "--root /r --kernel /k --module a.ko --guest /g --model /m --memory 512 --append quiet",
        );
        assert_eq!(c.get_program(), "/repo/bench/in-root.sh");
        assert_eq!(&args[..2], ["/r", "qemu-system-x86_64"]);
        assert!(joined.contains("-m 512 -object memory-backend-memfd,id=mem,size=512M,share=on"));
        assert!(joined.contains("-serial stdio -serial unix:/tmp/run/rpc.sock"));
        assert!(joined.contains("-append console=ttyS0 panic=-1 loglevel=6 no_timer_check quiet"));
        let dev: serde_json::Value = serde_json::from_str(args.last().unwrap()).unwrap();
        assert_eq!(dev["socket"]["path"], "/tmp/run/vfio.sock");
        assert_eq!(dev["driver"], "vfio-user-pci");
        assert!(
            c.get_envs()
                .any(|(k, v)| k == "GDR_RUN" && v == Some(std::ffi::OsStr::new("/tmp/run")))
        );
        assert!(!joined.contains("iommu"));
    }

    #[test]
    fn cpu_is_the_architectures_unless_given() {
        let base = "--root /r --kernel /k --module a.ko --guest /g --model /m --arch arm64";
        let (_, _, joined) = command_for(base);
        assert!(joined.contains("-cpu max,pauth-impdef=on "), "{joined}");
        let (_, _, joined) = command_for(&format!("{base} --cpu cortex-a76"));
        assert!(joined.contains("-cpu cortex-a76 "), "{joined}");
        for bad in ["--cpu=", "--cpu=a76;reboot", "--cpu=a b"] {
            let mut v: Vec<String> = base.split_whitespace().map(String::from).collect();
            v.push(bad.into());
            let e = crate::cli::parse_run(&v).err().unwrap_or_default();
            assert!(e.contains("QEMU CPU model"), "{bad}: {e}");
        }
    }

    #[test]
    fn arm64_behind_virtio_iommu() {
        let (_, args, joined) = command_for(
            "--root /r --kernel /k --module a.ko --guest /g --model /m --arch arm64 --iommu virtio",
        );
        assert_eq!(&args[..2], ["/r", "qemu-system-aarch64"]);
        assert!(joined.contains("-machine virt,gic-version=3,memory-backend=mem "));
        assert!(joined.contains("-kernel /tmp/run/Image"));
        assert!(joined.contains("-append console=ttyAMA0 panic=-1 loglevel=6 iommu.strict=1 -"));
        let iommu = args.iter().position(|s| s == "virtio-iommu-pci").unwrap();
        let card = args
            .iter()
            .position(|s| s.contains("vfio-user-pci"))
            .unwrap();
        assert!(iommu < card, "the IOMMU must exist before the card");
    }

    #[test]
    fn tail_keeps_last_lines() {
        let p = std::env::temp_dir().join(format!("gdr-tail-{}", std::process::id()));
        std::fs::write(&p, "1\n2\n3\n").unwrap();
        assert_eq!(tail_of(&p, 2), vec!["2", "3"]);
        assert_eq!(tail_of(&p, 9).len(), 3);
        std::fs::remove_file(&p).unwrap();
    }
}
