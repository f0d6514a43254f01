//! One validation of one card, as an application would do it: the card's status and its fd from the agent
//! (`gdr_client::Agent`), the link from sysfs, then every measurement through the fd (`gdr_client::Device`).

use gdr_client::api::CardStatus;
use gdr_client::{Agent, Device};

use super::dma::{self, Direction};
use super::judge::{self, IdExpect, NoExpectation};
use super::link::{self, Link};
use super::options::Options;
use super::report::{Check, Report};
use crate::manifest::{Identity, Manifest};

/// Why validation could not run at all (exit 2): no agent, no such card, not ready, access denied, the
/// card RAM held by an application.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CouldNotRun {
    #[error("card{card} status: {source}")]
    Status {
        card: u32,
        source: gdr_client::Error,
    },
    /// `stage`: where the agent says the card is.
    #[error("card{card} ({stage}) could not be opened: {source}")]
    Open {
        card: u32,
        stage: &'static str,
        source: gdr_client::Error,
    },
    /// An application holds the card RAM.
    #[error("{}", crate::selftest::BUSY)]
    Busy,
    #[error("RAM_OWNER: {0}")]
    Claim(#[source] gdr_client::Error),
    #[error("CARD_INFO: {0}")]
    CardInfo(#[source] gdr_client::Error),
    #[error("the driver reports {0} bytes of card RAM")]
    RamSize(u64),
}

/// What the agent says of the card's design: its loader and the manifest's ID block (0: none loaded).
#[derive(Clone, Debug, PartialEq, Eq)]
struct AgentDesign {
    loader: String,
    expected_version: u32,
    expected_hash: u32,
}

impl From<&CardStatus> for AgentDesign {
    fn from(s: &CardStatus) -> Self {
        AgentDesign {
            loader: s.loader.clone(),
            expected_version: s.expected_version,
            expected_hash: s.expected_hash,
        }
    }
}

/// What the ID block is compared with: `--manifest DIR`, else the manifest the agent loaded.
fn id_expect(opts: &Options, agent: &AgentDesign) -> Result<IdExpect, NoExpectation> {
    if let Some(dir) = &opts.manifest {
        let m = Manifest::load(dir)?;
        return Ok(IdExpect {
            expected: m.expected,
            golden: m.golden,
            source: dir.join("manifest.json").display().to_string(),
        });
    }
    if agent.loader == "none" {
        return Err(NoExpectation::LoaderNone);
    }
    if agent.expected_version == 0 {
        return Err(NoExpectation::NoManifest);
    }
    Ok(IdExpect {
        expected: Identity {
            design_version: agent.expected_version,
            build_hash: agent.expected_hash,
        },
        golden: None,
        source: "the agent's manifest".into(),
    })
}

/// A card opened for measuring, as an application opens it: the agent's status, the fd, the live
/// ABI_INFO, and the card RAM (claimed for this fd, its size).
pub struct Claimed {
    pub status: CardStatus,
    pub dev: Device,
    pub info: Result<picoevb_abi::AbiInfo, gdr_client::Error>,
    pub ram: usize,
}

/// Opens card `card` through the agent and claims its RAM: never over an application's data (the RAM is
/// ours until the fd closes, or nothing runs).
pub fn claim(agent: &Agent, card: u32) -> Result<Claimed, CouldNotRun> {
    let status = agent
        .status(card)
        .map_err(|source| CouldNotRun::Status { card, source })?;
    let dev = agent.open(card).map_err(|source| CouldNotRun::Open {
        card,
        stage: status.stage.name(),
        source,
    })?;
    match dev.claim_ram() {
        Ok(true) => {}
        Ok(false) => return Err(CouldNotRun::Busy),
        Err(e) => return Err(CouldNotRun::Claim(e)),
    }
    let info = dev.abi_info();
    let ram = match &info {
        Ok(i) => i.fpga_ram_size,
        Err(_) => {
            dev.card_info()
                .map_err(CouldNotRun::CardInfo)?
                .fpga_ram_size
        }
    };
    let ram = usize::try_from(ram)
        .ok()
        .filter(|r| (4096..=1 << 30).contains(r))
        .ok_or(CouldNotRun::RamSize(ram))?;
    Ok(Claimed {
        status,
        dev,
        info,
        ram,
    })
}

/// Runs every check on `opts.card`.
pub fn run(agent: &Agent, opts: &Options) -> Result<Report, CouldNotRun> {
    let Claimed {
        status,
        dev,
        info,
        ram,
    } = claim(agent, opts.card)?;
    let pci = status.pci.clone();
    let mut checks = Vec::new();

    let l = Link::read(&opts.sysfs, &pci);
    checks.push(link::judge(l.as_ref(), opts.thresholds.link, &pci));

    let live = info.as_ref().map(|i| Identity {
        design_version: i.design_version,
        build_hash: i.build_hash,
    });
    let want = id_expect(opts, &AgentDesign::from(&status));
    checks.push(judge::id_block(live, want.as_ref()));

    checks.extend(measure(&dev, ram, opts));
    checks.push(judge::gpu_path(gpu(&dev, ram), &opts.thresholds));
    Ok(Report::new(opts.card, pci, checks))
}

/// The host-memory DMA checks.
fn measure(dev: &impl dma::Dma, ram: usize, opts: &Options) -> Vec<Check> {
    let t = &opts.thresholds;
    let integrity = dma::integrity(dev, ram, (1 << 20) + 3);
    let bw = |dir| dma::bandwidth(dev, dir, ram, opts.iterations);
    let (h2c, c2h, rt) = (
        bw(Direction::H2c),
        bw(Direction::C2h),
        bw(Direction::RoundTrip),
    );
    let lat = dma::latency(
        dev,
        Direction::RoundTrip,
        opts.latency_bytes.min(ram),
        opts.latency_samples,
    );
    vec![
        judge::integrity(integrity.as_ref()),
        judge::bandwidth("h2c-bandwidth", h2c.as_ref(), t.min_h2c_mbps),
        judge::bandwidth("c2h-bandwidth", c2h.as_ref(), t.min_c2h_mbps),
        judge::bandwidth("round-trip", rt.as_ref(), t.min_round_trip_mbps),
        judge::latency(
            lat.as_ref().map(|l| l.wall_ns.as_slice()),
            opts.latency_bytes.min(ram),
            t.max_latency_us,
        ),
    ]
}

/// CUDA memory through the card as the self-test moves it (the path CUDA and the driver support), or why
/// there is no CUDA here.
fn gpu(dev: &Device, ram: usize) -> judge::GpuRun {
    if let Some(why) = crate::selftest::gpu::unavailable() {
        return Err(why);
    }
    Ok(crate::selftest::child::cuda(dev, ram / 4))
}

#[cfg(test)]
mod tests {
    use super::super::dma::tests::FakeCard;
    use super::super::report::Verdict;
    use super::*;

    fn quick() -> Options {
        let mut o = Options::default();
        o.thresholds.min_h2c_mbps = 100.0;
        o.iterations = 2;
        o.latency_samples = 5;
        o
    }

    #[test]
    fn a_good_card_passes_every_dma_check() {
        // The fake moves 500 MB/s of DMA time; wall-clock latency on a host is far below the ceiling.
        let card = FakeCard::new(65536);
        let mut o = quick();
        o.thresholds.max_latency_us = 1e6;
        let cs = measure(&card, 65536, &o);
        let names: Vec<_> = cs.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "dma-integrity",
                "h2c-bandwidth",
                "c2h-bandwidth",
                "round-trip",
                "latency"
            ]
        );
        assert!(cs.iter().all(|c| c.verdict == Verdict::Pass), "{cs:#?}");
    }

    #[test]
    fn corruption_and_a_slow_card_fail_their_checks() {
        let mut card = FakeCard::new(65536);
        card.corrupt = Some(100);
        card.ns_per_byte = 20; // 50 MB/s
        let cs = measure(&card, 65536, &quick());
        let v = |n| cs.iter().find(|c| c.name == n).unwrap().verdict;
        assert_eq!(v("dma-integrity"), Verdict::Fail);
        assert_eq!(v("h2c-bandwidth"), Verdict::Fail);
        assert_eq!(Report::new(0, String::new(), cs).exit_code(), 1);
    }

    #[test]
    fn the_id_expectation_comes_from_the_agent_or_a_manifest() {
        let o = Options::default();
        let design = |loader: &str, expected_version, expected_hash| AgentDesign {
            loader: loader.into(),
            expected_version,
            expected_hash,
        };
        let s = design("model", 0x0100_0000, 7);
        let w = id_expect(&o, &s).unwrap();
        assert_eq!(w.expected.build_hash, 7);
        assert_eq!(w.source, "the agent's manifest");
        let none = design("none", 0, 0);
        assert!(matches!(
            id_expect(&o, &none),
            Err(NoExpectation::LoaderNone)
        ));
        let unloaded = design("model", 0, 0);
        assert!(matches!(
            id_expect(&o, &unloaded),
            Err(NoExpectation::NoManifest)
        ));
        let o = Options {
            manifest: Some("/nonexistent".into()),
            ..Options::default()
        };
        let e = id_expect(&o, &none).unwrap_err();
        assert!(matches!(e, NoExpectation::Manifest(_)), "{e}");
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    /// The words `gdrctl validate` prints and puts in its JSON `error` (exit 2).
    #[test]
    fn could_not_run_says_why() {
        let e = CouldNotRun::Open {
            card: 7,
            stage: "pending",
            source: gdr_client::Error::NoSuchCard("card7".into()),
        };
        assert_eq!(
            e.to_string(),
            "card7 (pending) could not be opened: no such card: card7"
        );
        let e = CouldNotRun::Status {
            card: 7,
            source: gdr_client::Error::AgentNotRunning,
        };
        assert!(
            e.to_string()
                .starts_with("card7 status: the gdr agent is not running")
        );
        assert_eq!(CouldNotRun::Busy.to_string(), crate::selftest::BUSY);
        assert_eq!(
            CouldNotRun::RamSize(12).to_string(),
            "the driver reports 12 bytes of card RAM"
        );
    }
}
