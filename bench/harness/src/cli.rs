//! Command line of `gdr-bench run`.

use std::path::PathBuf;
use std::time::Duration;

use crate::machine::{Arch, Iommu};

pub const USAGE: &str = "\
usage: gdr-bench run --root DIR --kernel BZIMAGE --module KO [--module KO...] --guest BIN --model BIN
                     [--mode suite|loopback|fuzz|bench|perf] [--guest-args \"ARGS\"] [--run-dir DIR] [--timeout SECS]
                     [--memory MB] [--cards N] [--inject FAULT[:COUNT]]... [--expect-failures] [--keep]
                     [--append \"KERNEL ARGS\"] [--model-arg ARG]... [--repo DIR]
                     [--arch x86_64|arm64] [--iommu none|virtio|intel|smmuv3] [--busybox PATH]

  --root DIR          bench chroot (QEMU 11 inside; busybox at DIR/usr/bin/busybox)
  --kernel PATH       guest kernel (x86_64: bzImage; arm64: Image)
  --module PATH       kernel module to insmod, in the order given (repeatable)
  --guest PATH        static gdr-guest-tests binary
  --model PATH        picoevb-model binary
  --mode MODE         suite (default), loopback, fuzz, bench (ioctl times, registration cache on vs off) or
                      perf (the performance report; run the model with --timing), passed to the guest program
  --guest-args ARGS   extra guest program arguments, split on whitespace (e.g. \"--seed 5 --filter dma::\")
  --run-dir DIR       sockets, logs and the initramfs (default: a fresh /tmp/gdr-bench-*)
  --timeout SECS      whole-run limit from QEMU start (default 900)
  --memory MB         guest RAM (default 1024)
  --cards N           PicoEVB cards, one model each (default 1, at most 4); RPC reaches card 0
  --inject F[:N]      tell the model to inject fault F into the next N engine runs (0: all) before boot
  --expect-failures   succeed only if the guest reports at least one failed test (proves the suite can fail)
  --keep              keep the run directory even on success
  --append ARGS       extra kernel command line
  --model-arg ARG     extra model argument (repeatable), e.g. --model-arg=--design --model-arg=reference
  --repo DIR          repository root (default: where gdr-bench was built from)
  --arch ARCH         guest architecture: x86_64 (q35, default) or arm64 (virt, GICv3 ITS)
  --iommu KIND        IOMMU translating the card's DMA: none (default), virtio (virtio-iommu), intel
                      (x86_64, caching mode) or smmuv3 (arm64; QEMU 11 refuses it for vfio-user, see docs)
  --busybox PATH      static busybox for the guest (default: ROOT/usr/bin/busybox, an x86_64 one)

       gdr-bench appliance --root DIR --kernel BZIMAGE --model BIN --base IMG --layer IMG [--scenario NAME]
                     [--run-dir DIR] [--timeout SECS] [--memory MB] [--cards N] [--inject FAULT[:COUNT]]...
                     [--keep] [--append \"KERNEL ARGS\"] [--model-arg ARG]... [--repo DIR]
  boots the emulated appliance (bench/appliance.sh): systemd from IMG (a throwaway snapshot; the file is
  never written), the per-run LAYER disk that base/layer-init copies in, each card's model control socket on
  the virtio-serial port org.gdr.model.cardN; the layer's test unit runs scenario NAME (default main) and
  prints TEST lines, judged as a suite run's are

       gdr-bench relay --listen SOCK --control CTL
  only the guest<->model RPC relay, for a QEMU started by hand with -serial unix:SOCK";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Suite,
    Loopback,
    Fuzz,
    Bench,
    Perf,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Suite => "suite",
            Mode::Loopback => "loopback",
            Mode::Fuzz => "fuzz",
            Mode::Bench => "bench",
            Mode::Perf => "perf",
        }
    }
}

/// The emulated appliance's disks and the scenario its test unit runs.
#[derive(Debug)]
pub struct Appliance {
    /// The cached Debian base image (bench/appliance/image.sh), booted as a snapshot.
    pub base: PathBuf,
    /// The per-run layer disk (bench/appliance/layer.sh).
    pub layer: PathBuf,
    pub scenario: String,
}

#[derive(Debug)]
pub struct RunArgs {
    pub root: PathBuf,
    pub kernel: PathBuf,
    pub modules: Vec<PathBuf>,
    pub guest: PathBuf,
    pub model: PathBuf,
    pub mode: Mode,
    pub guest_args: Vec<String>,
    pub run_dir: Option<PathBuf>,
    pub timeout: Duration,
    pub memory_mb: u32,
    /// PicoEVB cards: one model and one vfio-user function each (`/dev/picoevb0`, `1`, ...).
    pub cards: u32,
    pub inject: Vec<String>,
    pub expect_failures: bool,
    pub keep: bool,
    pub append: String,
    pub model_args: Vec<String>,
    pub repo: PathBuf,
    pub arch: Arch,
    pub iommu: Iommu,
    pub busybox: Option<PathBuf>,
    /// `Some` for `gdr-bench appliance`: boot the appliance image instead of the initramfs.
    pub appliance: Option<Appliance>,
}

/// The repository this binary was built from: bench/harness/../..
fn default_repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Parses the arguments after `run`. Accepts `--flag value` and `--flag=value`.
pub fn parse_run(args: &[String]) -> Result<RunArgs, String> {
    parse(args, false)
}

/// Parses the arguments after `appliance`.
pub fn parse_appliance(args: &[String]) -> Result<RunArgs, String> {
    parse(args, true)
}

fn parse(args: &[String], appliance: bool) -> Result<RunArgs, String> {
    let (mut root, mut kernel, mut guest, mut model) = (None, None, None, None);
    let (mut base, mut layer, mut scenario) = (None, None, None);
    let mut a = RunArgs {
        root: PathBuf::new(),
        kernel: PathBuf::new(),
        modules: Vec::new(),
        guest: PathBuf::new(),
        model: PathBuf::new(),
        mode: Mode::Suite,
        guest_args: Vec::new(),
        run_dir: None,
        timeout: Duration::from_secs(900),
        memory_mb: 1024,
        cards: 1,
        inject: Vec::new(),
        expect_failures: false,
        keep: false,
        append: String::new(),
        model_args: Vec::new(),
        repo: default_repo(),
        arch: Arch::X86_64,
        iommu: Iommu::None,
        busybox: None,
        appliance: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        match flag {
            "--module" | "--guest" | "--mode" | "--guest-args" | "--expect-failures"
                if appliance =>
            {
                return Err(format!(
                    "{flag}: not for the appliance (its layer carries the modules and the test unit)"
                ));
            }
            "--root" => root = Some(PathBuf::from(value()?)),
            "--kernel" => kernel = Some(PathBuf::from(value()?)),
            "--module" => a.modules.push(PathBuf::from(value()?)),
            "--guest" => guest = Some(PathBuf::from(value()?)),
            "--model" => model = Some(PathBuf::from(value()?)),
            "--mode" => {
                a.mode = match value()?.as_str() {
                    "suite" => Mode::Suite,
                    "loopback" => Mode::Loopback,
                    "fuzz" => Mode::Fuzz,
                    "bench" => Mode::Bench,
                    "perf" => Mode::Perf,
                    m => {
                        return Err(format!(
                            "--mode {m}: expected suite, loopback, fuzz, bench or perf"
                        ));
                    }
                }
            }
            "--guest-args" => a
                .guest_args
                .extend(value()?.split_whitespace().map(String::from)),
            "--run-dir" => a.run_dir = Some(PathBuf::from(value()?)),
            "--timeout" => {
                let v = value()?;
                let s: u64 = v.parse().map_err(|e| format!("--timeout {v}: {e}"))?;
                a.timeout = Duration::from_secs(s);
            }
            "--cards" => {
                let v = value()?;
                a.cards = v.parse().map_err(|e| format!("--cards {v}: {e}"))?;
                if !(1..=crate::run::MAX_CARDS).contains(&a.cards) {
                    return Err(format!("--cards {v}: 1 to {}", crate::run::MAX_CARDS));
                }
            }
            "--memory" => {
                let v = value()?;
                a.memory_mb = v.parse().map_err(|e| format!("--memory {v}: {e}"))?;
                if a.memory_mb < 128 {
                    return Err("--memory: at least 128 MB".into());
                }
            }
            "--inject" => a.inject.push(value()?),
            "--expect-failures" => a.expect_failures = true,
            "--keep" => a.keep = true,
            "--append" => a.append = value()?,
            "--model-arg" => a.model_args.push(value()?),
            "--repo" => a.repo = PathBuf::from(value()?),
            "--arch" => a.arch = Arch::parse(&value()?)?,
            "--iommu" => a.iommu = Iommu::parse(&value()?)?,
            "--busybox" => a.busybox = Some(PathBuf::from(value()?)),
            "--base" if appliance => base = Some(PathBuf::from(value()?)),
            "--layer" if appliance => layer = Some(PathBuf::from(value()?)),
            "--scenario" if appliance => scenario = Some(value()?),
            _ => return Err(format!("unknown argument {arg:?}")),
        }
        if inline.is_some() && matches!(flag, "--expect-failures" | "--keep") {
            return Err(format!("{flag} takes no value"));
        }
    }
    let need = |v: Option<PathBuf>, f: &str| v.ok_or_else(|| format!("{f} is required"));
    a.root = need(root, "--root")?;
    a.kernel = need(kernel, "--kernel")?;
    a.model = need(model, "--model")?;
    if appliance {
        let scenario = scenario.unwrap_or_else(|| "main".into());
        if scenario.is_empty()
            || !scenario
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "--scenario {scenario:?}: letters, digits, - and _ only"
            ));
        }
        a.appliance = Some(Appliance {
            base: need(base, "--base")?,
            layer: need(layer, "--layer")?,
            scenario,
        });
        return Ok(a);
    }
    a.guest = need(guest, "--guest")?;
    if a.modules.is_empty() {
        return Err("at least one --module is required".into());
    }
    a.iommu.check(a.arch)?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_all_flags() {
        let a = parse_run(&args(
            "--root /r --kernel /k --module a.ko --module=b.ko --guest /g --model /m --mode loopback \
             --timeout 60 --memory 512 --inject corrupt_data:0 --expect-failures --keep \
             --model-arg=-v --run-dir /tmp/x",
        ))
        .unwrap();
        assert_eq!(
            a.modules,
            vec![PathBuf::from("a.ko"), PathBuf::from("b.ko")]
        );
        assert_eq!(
            (a.mode, a.timeout.as_secs(), a.memory_mb),
            (Mode::Loopback, 60, 512)
        );
        assert_eq!(a.inject, vec!["corrupt_data:0"]);
        assert!(a.expect_failures && a.keep);
        assert_eq!(a.model_args, vec!["-v"]);
        assert_eq!(a.run_dir, Some(PathBuf::from("/tmp/x")));
    }

    #[test]
    fn every_mode_round_trips() {
        let base = "--root /r --kernel /k --module a.ko --guest /g --model /m --mode";
        for m in [
            Mode::Suite,
            Mode::Loopback,
            Mode::Fuzz,
            Mode::Bench,
            Mode::Perf,
        ] {
            let a = parse_run(&args(&format!("{base} {}", m.as_str()))).unwrap();
            assert_eq!(a.mode, m);
        }
        assert_eq!(
            parse_run(&args(&format!("{base}=bench --guest-args=--iterations")))
                .unwrap()
                .mode
                .as_str(),
            "bench"
        );
        let e = parse_run(&args(&format!("{base} turbo"))).unwrap_err();
        assert!(e.contains("bench"), "{e}");
    }

    #[test]
    fn guest_args_split_and_required_flags() {
        let mut v = args("--root /r --kernel /k --module a.ko --guest /g --model /m --guest-args");
        v.push("--seed 5  --filter dma::".into());
        assert_eq!(
            parse_run(&v).unwrap().guest_args,
            args("--seed 5 --filter dma::")
        );
        assert!(
            parse_run(&args("--root /r"))
                .unwrap_err()
                .contains("required")
        );
        assert!(parse_run(&args("--bogus")).is_err());
    }

    #[test]
    fn arch_and_iommu() {
        let base = "--root /r --kernel /k --module a.ko --guest /g --model /m";
        let a = parse_run(&args(base)).unwrap();
        assert_eq!(
            (a.arch, a.iommu, a.busybox),
            (Arch::X86_64, Iommu::None, None)
        );
        let a = parse_run(&args(&format!(
            "{base} --arch arm64 --iommu virtio --busybox /bb"
        )))
        .unwrap();
        assert_eq!((a.arch, a.iommu), (Arch::Arm64, Iommu::Virtio));
        assert_eq!(a.busybox, Some(PathBuf::from("/bb")));
        let e = parse_run(&args(&format!("{base} --arch arm64 --iommu intel"))).unwrap_err();
        assert!(e.contains("x86_64"), "{e}");
    }

    #[test]
    fn appliance_flags() {
        let base = "--root /r --kernel /k --model /m --base /b.img --layer /l.img";
        let a = parse_appliance(&args(&format!("{base} --scenario tests --cards 2"))).unwrap();
        let ap = a.appliance.unwrap();
        assert_eq!(
            (ap.base, ap.layer, ap.scenario.as_str(), a.cards),
            (PathBuf::from("/b.img"), PathBuf::from("/l.img"), "tests", 2)
        );
        assert_eq!(
            parse_appliance(&args(base))
                .unwrap()
                .appliance
                .unwrap()
                .scenario,
            "main"
        );
        for bad in ["--scenario ../x", "--module a.ko", "--expect-failures"] {
            assert!(
                parse_appliance(&args(&format!("{base} {bad}"))).is_err(),
                "{bad}"
            );
        }
        assert!(
            parse_appliance(&args("--root /r --kernel /k --model /m --base /b"))
                .unwrap_err()
                .contains("--layer")
        );
        // The bench run knows no appliance flags.
        assert!(parse_run(&args("--root /r --base /b")).is_err());
    }
}
