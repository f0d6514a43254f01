//! Command line of `gdr-bench` (clap): `run` boots the bench guest, `appliance` the emulated appliance,
//! `relay` serves only the guest<->model RPC relay. Each parses into the [`RunArgs`] the runner takes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::machine::{Arch, Iommu};

/// The host side of the bench: builds the guest initramfs, starts the PicoEVB model and QEMU (inside the
/// bench chroot), relays the guest's RPC to the model, and judges the guest console.
#[derive(Debug, Parser)]
#[command(name = "gdr-bench", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Boot the bench guest (busybox initramfs) and run the guest program in MODE.
    Run(RunCmd),
    /// Boot the emulated appliance (bench/appliance.sh): systemd from BASE (a throwaway snapshot; the file
    /// is never written), the per-run LAYER disk that base/layer-init copies in, each card's model control
    /// socket on the virtio-serial port org.gdr.model.cardN; the layer's test unit runs SCENARIO and prints
    /// TEST lines, judged as a suite run's are.
    Appliance(ApplianceCmd),
    /// Only the guest<->model RPC relay, for a QEMU started by hand with -serial unix:SOCK.
    Relay {
        /// The socket QEMU's second serial port connects to.
        #[arg(long, value_name = "SOCK")]
        listen: PathBuf,
        /// The model's control socket.
        #[arg(long, value_name = "CTL")]
        control: PathBuf,
    },
}

/// Flags both boots take.
#[derive(Debug, Args)]
pub struct Common {
    /// Bench chroot (QEMU 11 inside; busybox at DIR/usr/bin/busybox).
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Guest kernel (x86_64: bzImage; arm64: Image).
    #[arg(long, value_name = "PATH")]
    kernel: PathBuf,
    /// picoevb-model binary.
    #[arg(long, value_name = "PATH")]
    model: PathBuf,
    /// Sockets, logs and the initramfs (default: a fresh /tmp/gdr-bench-*).
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// Whole-run limit from QEMU start, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    timeout: u64,
    /// Guest RAM in MB.
    #[arg(long = "memory", value_name = "MB", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(128..))]
    memory_mb: u32,
    /// PicoEVB cards, one model each; RPC reaches card 0.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::run::MAX_CARDS)))]
    cards: u32,
    /// Tell the model to inject fault F into the next N engine runs (0: all) before boot.
    #[arg(long, value_name = "F[:N]")]
    inject: Vec<String>,
    /// Keep the run directory even on success.
    #[arg(long)]
    keep: bool,
    /// Extra kernel command line.
    #[arg(
        long,
        value_name = "ARGS",
        default_value = "",
        allow_hyphen_values = true
    )]
    append: String,
    /// Extra model argument (repeatable), e.g. --model-arg=--design --model-arg=reference.
    #[arg(long = "model-arg", value_name = "ARG", allow_hyphen_values = true)]
    model_args: Vec<String>,
    /// Repository root (default: where gdr-bench was built from).
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// Guest architecture: x86_64 (q35) or arm64 (virt, GICv3 ITS).
    #[arg(long, value_name = "ARCH", default_value = "x86_64", value_parser = Arch::parse)]
    arch: Arch,
    /// IOMMU translating the card's DMA: none, virtio (virtio-iommu), intel (x86_64, caching mode) or
    /// smmuv3 (arm64; QEMU 11 refuses it for vfio-user, see docs).
    #[arg(long, value_name = "KIND", default_value = "none", value_parser = Iommu::parse)]
    iommu: Iommu,
    /// Static busybox for the guest (default: ROOT/usr/bin/busybox, an x86_64 one).
    #[arg(long, value_name = "PATH")]
    busybox: Option<PathBuf>,
    /// QEMU's -cpu instead of the architecture's (x86_64: max,la57=off; arm64: max,pauth-impdef=on). Linux
    /// 4.x on arm64 does not boot on QEMU's max: cortex-a76 (ARMv8.2, as Xavier's Carmel).
    #[arg(long, value_name = "MODEL", value_parser = parse_cpu)]
    cpu: Option<String>,
}

/// A QEMU CPU model with its options: letters, digits and `-_.,=` only, so it stays one argument.
fn parse_cpu(s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,=".contains(c))
    {
        Ok(s.to_string())
    } else {
        Err(format!(
            "--cpu {s:?}: expected a QEMU CPU model such as cortex-a76 (letters, digits, -_.,=)"
        ))
    }
}

#[derive(Debug, Args)]
pub struct RunCmd {
    #[command(flatten)]
    common: Common,
    /// Kernel module to insmod, in the order given (repeatable, at least one).
    #[arg(long = "module", value_name = "KO", required = true)]
    modules: Vec<PathBuf>,
    /// Static gdr-guest-tests binary.
    #[arg(long, value_name = "BIN")]
    guest: PathBuf,
    /// What the guest program does: the suite, a loopback, the ioctl fuzzer, the registration-cache bench
    /// (ioctl times, cache on vs off) or the performance report (run the model with --timing).
    #[arg(long, value_enum, default_value = "suite")]
    mode: Mode,
    /// Extra guest program arguments, split on whitespace (e.g. "--seed 5 --filter dma::"; repeatable).
    #[arg(long = "guest-args", value_name = "ARGS", allow_hyphen_values = true)]
    guest_args: Vec<String>,
    /// Succeed only if the guest reports at least one failed test (proves the suite can fail).
    #[arg(long)]
    expect_failures: bool,
}

#[derive(Debug, Args)]
pub struct ApplianceCmd {
    #[command(flatten)]
    common: Common,
    /// The cached Debian base image (bench/appliance/image.sh).
    #[arg(long, value_name = "IMG")]
    base: PathBuf,
    /// The per-run layer disk (bench/appliance/layer.sh).
    #[arg(long, value_name = "IMG")]
    layer: PathBuf,
    /// The scenario the layer's test unit runs: letters, digits, - and _.
    #[arg(long, default_value = "main", value_parser = scenario)]
    scenario: String,
}

fn scenario(s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?}: letters, digits, - and _ only"))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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
    /// QEMU's -cpu, if not the architecture's.
    pub cpu: Option<String>,
    /// `Some` for `gdr-bench appliance`: boot the appliance image instead of the initramfs.
    pub appliance: Option<Appliance>,
}

/// The repository this binary was built from: bench/harness/../..
fn default_repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Common {
    fn into_run(self) -> RunArgs {
        RunArgs {
            root: self.root,
            kernel: self.kernel,
            modules: Vec::new(),
            guest: PathBuf::new(),
            model: self.model,
            mode: Mode::Suite,
            guest_args: Vec::new(),
            run_dir: self.run_dir,
            timeout: Duration::from_secs(self.timeout),
            memory_mb: self.memory_mb,
            cards: self.cards,
            inject: self.inject,
            expect_failures: false,
            keep: self.keep,
            append: self.append,
            model_args: self.model_args,
            repo: self.repo.unwrap_or_else(default_repo),
            arch: self.arch,
            iommu: self.iommu,
            busybox: self.busybox,
            cpu: self.cpu,
            appliance: None,
        }
    }
}

impl RunCmd {
    /// The runner's arguments; refuses an IOMMU the architecture has not.
    pub fn into_run(self) -> Result<RunArgs, String> {
        self.common.iommu.check(self.common.arch)?;
        Ok(RunArgs {
            modules: self.modules,
            guest: self.guest,
            mode: self.mode,
            guest_args: self
                .guest_args
                .iter()
                .flat_map(|a| a.split_whitespace().map(String::from))
                .collect(),
            expect_failures: self.expect_failures,
            ..self.common.into_run()
        })
    }
}

impl ApplianceCmd {
    /// The runner's arguments for an appliance boot.
    pub fn into_run(self) -> Result<RunArgs, String> {
        self.common.iommu.check(self.common.arch)?;
        Ok(RunArgs {
            appliance: Some(Appliance {
                base: self.base,
                layer: self.layer,
                scenario: self.scenario,
            }),
            ..self.common.into_run()
        })
    }
}

/// `gdr-bench SUB ARGS` (SUB `run` or `appliance`) as the runner gets it (tests).
#[cfg(test)]
fn parse_sub(sub: &str, a: &[String]) -> Result<RunArgs, String> {
    let argv = ["gdr-bench", sub]
        .into_iter()
        .map(String::from)
        .chain(a.iter().cloned());
    match Cli::try_parse_from(argv)
        .map_err(|e| e.to_string())?
        .command
    {
        Command::Run(r) => r.into_run(),
        Command::Appliance(r) => r.into_run(),
        other => panic!("{other:?}"),
    }
}

/// `gdr-bench run ARGS` as the runner gets it (tests).
#[cfg(test)]
pub(crate) fn parse_run(a: &[String]) -> Result<RunArgs, String> {
    parse_sub("run", a)
}

/// `gdr-bench appliance ARGS` as the runner gets it (tests).
#[cfg(test)]
pub(crate) fn parse_appliance(a: &[String]) -> Result<RunArgs, String> {
    parse_sub("appliance", a)
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
