//! `gdrctl`: the operator's view of the agent, over its typed D-Bus API (gdr-client's proxies).
//! `--json` prints the API's own values (`gdr_client::api`) as JSON wherever a command prints data.

use std::process::ExitCode;
use std::str::FromStr;

use clap::{Parser, Subcommand};
use gdr_client::api::{CardStatus, SelfTest, Stage, version_string};
use gdr_client::{Agent, Error};
use serde_json::json;

const EXIT_STATUS: &str = "Exit status: 0 ok; 1 the operation ran and failed (a failed self-test, a failed card); \
2 usage; 3 the agent is not running; 4 access denied; 5 any other error.";

#[derive(Parser)]
#[command(
    name = "gdrctl",
    version,
    about = "Ask the gdr agent about its PicoEVB cards, test and reprogram them",
    after_help = EXIT_STATUS
)]
struct Cli {
    /// Print JSON on stdout instead of text (errors too: {"error", "exit"}).
    #[arg(long, global = true)]
    json: bool,
    /// Talk to the agent on this bus instead of the system bus (default: $GDR_BUS_ADDRESS).
    #[arg(long, global = true, value_name = "ADDRESS")]
    bus: Option<String>,
    /// The card: its index (0, card0) or its PCI address (0000:01:00.0, 01:00.0). Default: card 0
    /// (status: every card).
    #[arg(short, long, global = true)]
    card: Option<CardSel>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// State of every card (or of one).
    Status {
        /// The card, as --card takes it.
        #[arg(value_name = "CARD")]
        at: Option<CardSel>,
    },
    /// Run the loopback self-test now.
    Selftest {
        /// The card, as --card takes it.
        #[arg(value_name = "CARD")]
        at: Option<CardSel>,
    },
    /// Self-test transfers at several sizes.
    Bench {
        /// The card, as --card takes it.
        #[arg(value_name = "CARD")]
        at: Option<CardSel>,
        /// Bytes per transfer, comma-separated (multiples of 4).
        #[arg(long, value_delimiter = ',', default_value = "4096,16384,65536")]
        sizes: Vec<u32>,
    },
    /// How long one small transfer takes: P50, P99, P99.9 and max per operation and size, wall time,
    /// host memory through an fd from the agent (the card RAM claimed while it runs).
    Latency {
        /// The card, as --card takes it.
        #[arg(value_name = "CARD")]
        at: Option<CardSel>,
        /// Bytes per transfer, comma-separated; K suffix for KiB (at most the card RAM).
        #[arg(long, value_delimiter = ',', value_parser = size_arg,
              default_value = "64,256,1K,4K,16K,64K")]
        sizes: Vec<usize>,
        /// Operations, comma-separated.
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "h2c,c2h,h2c2h"
        )]
        ops: Vec<gdr_agent::latency::Op>,
        /// Transfers timed per operation and size (after two warm-ups).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        samples: u32,
    },
    /// The card's stream source into a ring the driver fills (ABI 1.6), read with no system call per
    /// slot: every record checked (length, CRC, sequence), every loss accounted for. Exit 1 if a record
    /// is bad or a gap is not explained by the drops counted. Restarts the card's source, which every
    /// holder of the card shares.
    Stream {
        /// The card, as --card takes it.
        #[arg(value_name = "CARD")]
        at: Option<CardSel>,
        /// Bytes per record, a multiple of 8 from 24 to 4096.
        #[arg(long, default_value_t = 4096)]
        record_size: u32,
        /// 8 ns ticks between two records at the source; 0 makes one whenever the engine asks.
        #[arg(long, default_value_t = 0)]
        period_ticks: u32,
        /// Slots in the ring.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(2..=1 << 20))]
        slots: u32,
        /// Records per slot.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
        records_per_slot: u32,
        /// Most slots the driver fills per chain (0: half the ring).
        #[arg(long, default_value_t = 16)]
        chain: u32,
        /// Slots to read.
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
        total: u64,
        /// What the driver does when this reader falls a ring behind: wait for it, or overwrite the oldest
        /// slots (each counted).
        #[arg(long, value_enum, default_value = "back-pressure")]
        policy: PolicyArg,
        /// The ring in host memory pinned as a surface, filled through its handle as GPU memory would be,
        /// read as a GPU consumer reads it (back-pressure only).
        #[arg(long, conflicts_with = "to_card")]
        surface: bool,
        /// The other way: records written into a ring the driver empties into the card's checker, whose
        /// counters must show every one good and in sequence (back-pressure only).
        #[arg(long)]
        to_card: bool,
    },
    /// The last self-test results, oldest first.
    History {
        /// The card, as --card takes it.
        #[arg(value_name = "CARD")]
        at: Option<CardSel>,
        /// How many.
        #[arg(short, default_value_t = 10)]
        n: u32,
    },
    /// Light LEDs: `leds [CARD] MASK`, bit 0 = A, 1 = B, 2 = C (0..7).
    Leds {
        #[arg(num_args = 1..=2, required = true, value_name = "[CARD] MASK")]
        args: Vec<String>,
    },
    /// Program the FPGA again (open fds are revoked); shows the stages as they pass.
    Reprogram {
        /// The card, as --card takes it.
        #[arg(value_name = "CARD")]
        at: Option<CardSel>,
        /// No progress lines on stderr.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Re-read /etc/gdr/agent.toml (all or nothing).
    Reload,
    /// gdrctl's version and the agent's.
    Version,
    /// Check the card against what a PicoEVB should do: link, ID block, DMA integrity, bandwidth both ways
    /// and round trip, small-transfer latency, GPU path. Exit 0 passed, 1 a check failed, 2 could not run
    /// (docs/agent.md, "gdrctl validate").
    Validate(gdr_agent::validate::options::ValidateArgs),
}

/// `gdrctl stream --policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PolicyArg {
    BackPressure,
    DropOldest,
}

/// A card named on the command line.
#[derive(Clone, Debug, PartialEq)]
enum CardSel {
    Index(u32),
    Pci(String),
}

impl FromStr for CardSel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.contains(':') {
            let ok = s
                .split([':', '.'])
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit()));
            return if ok && s.contains('.') {
                Ok(CardSel::Pci(s.to_ascii_lowercase()))
            } else {
                Err(format!("'{s}' is not a PCI address (0000:01:00.0)"))
            };
        }
        s.trim_start_matches("card")
            .parse()
            .map(CardSel::Index)
            .map_err(|_| format!("'{s}' is neither a card index nor a PCI address"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    match run(cli) {
        Ok(code) => code,
        Err(Failure::Usage(m)) => {
            eprintln!("gdrctl: {m}\n\nTry 'gdrctl --help'.");
            ExitCode::from(2)
        }
        Err(Failure::Client(e)) => fail(json, &e),
        Err(Failure::Failed(m)) => {
            if json {
                println!("{}", json!({"error": m, "exit": 1}));
            }
            eprintln!("gdrctl: {m}");
            ExitCode::from(1)
        }
    }
}

/// A byte count: digits with an optional K (KiB) suffix, above 0.
fn size_arg(s: &str) -> Result<usize, String> {
    let (digits, unit) = match s.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1024),
        None => (s, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("'{s}' is not a byte count above 0 (64, 4K)"))
}

/// Why a command did not run, or failed.
enum Failure {
    Usage(String),
    Client(Error),
    /// The operation ran and failed (exit 1).
    Failed(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Client(e)
    }
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    let bus = cli.bus.or_else(|| std::env::var("GDR_BUS_ADDRESS").ok());
    if let Cmd::Validate(args) = &cli.cmd {
        return validate(bus.as_deref(), cli.json, cli.card.clone(), args);
    }
    // Self-tests, benches and reprograms (a JTAG flash write: tens of minutes) take as long as they take;
    // everything else must answer within the client's default timeout.
    let timeout = match cli.cmd {
        Cmd::Selftest { .. }
        | Cmd::Bench { .. }
        | Cmd::Reprogram { .. }
        | Cmd::Latency { .. }
        | Cmd::Stream { .. } => None,
        _ => Some(gdr_client::DEFAULT_TIMEOUT),
    };
    let agent = match bus.as_deref() {
        Some(b) => Agent::at_with_timeout(b, timeout),
        None => Agent::system_with_timeout(timeout),
    }?;
    let out = Out { json: cli.json };
    let global = cli.card;
    let card = |local: Option<CardSel>| resolve(&agent, pick(global.clone(), local)?);
    match cli.cmd {
        Cmd::Status { at: c } => {
            let cards = match pick(global.clone(), c)? {
                None => agent.cards()?,
                Some(sel) => vec![resolve(&agent, Some(sel))?],
            };
            status(&agent, &out, &cards)
        }
        Cmd::Selftest { at: c } => selftest(&agent, &out, card(c)?),
        Cmd::Bench { at: c, sizes } => bench(&agent, &out, card(c)?, &sizes),
        Cmd::History { at: c, n } => history(&agent, &out, card(c)?, n),
        Cmd::Latency {
            at: c,
            sizes,
            ops,
            samples,
        } => latency(&agent, &out, card(c)?, &ops, &sizes, samples),
        Cmd::Stream {
            at: c,
            record_size,
            period_ticks,
            slots,
            records_per_slot,
            chain,
            total,
            policy,
            surface,
            to_card,
        } => {
            let plan = gdr_agent::stream::Plan {
                record_bytes: record_size,
                period_ticks,
                slots,
                records_per_slot,
                chain_slots: chain,
                total,
                policy: match policy {
                    PolicyArg::BackPressure => gdr_client::RingPolicy::BackPressure,
                    PolicyArg::DropOldest => gdr_client::RingPolicy::DropOldest,
                },
                mode: match (surface, to_card) {
                    (true, _) => gdr_agent::stream::Mode::Surface,
                    (_, true) => gdr_agent::stream::Mode::ToCard,
                    _ => gdr_agent::stream::Mode::Read,
                },
            };
            stream(&agent, &out, card(c)?, &plan)
        }
        Cmd::Leds { args } => {
            let (c, mask) = match args.as_slice() {
                [mask] => (None, mask),
                [c, mask] => (Some(c.parse().map_err(Failure::Usage)?), mask),
                _ => return Err(Failure::Usage("leds takes [CARD] MASK".into())),
            };
            let mask = mask
                .parse()
                .map_err(|_| Failure::Usage(format!("'{mask}' is not a number 0..7")))?;
            leds(&agent, &out, card(c)?, mask)
        }
        Cmd::Reprogram { at: c, quiet } => reprogram(&agent, &out, card(c)?, quiet),
        Cmd::Reload => {
            agent.reload()?;
            out.line("configuration reloaded", json!({"reloaded": true}));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Validate(_) => unreachable!("handled above"),
        Cmd::Version => {
            let mine = env!("CARGO_PKG_VERSION");
            let theirs = agent.version()?;
            out.line(
                &format!(
                    "gdrctl {mine}\nagent {theirs} (D-Bus API {})",
                    gdr_client::CARD_IFACE
                ),
                json!({"gdrctl": mine, "agent": theirs, "api": gdr_client::CARD_IFACE}),
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `validate`: its own exit statuses (0 passed, 1 a check failed, 2 could not run: no agent included).
fn validate(
    bus: Option<&str>,
    json: bool,
    global: Option<CardSel>,
    args: &gdr_agent::validate::options::ValidateArgs,
) -> Result<ExitCode, Failure> {
    use gdr_agent::validate::{self, EXIT_COULD_NOT_RUN, Options};
    let mut opts = args.options();
    let could_not_run = |opts: &Options, why: String| {
        if json {
            println!("{}", validate::could_not_run_json(opts.card, &why));
        }
        eprintln!("gdrctl validate: could not run: {why}");
        Ok(ExitCode::from(EXIT_COULD_NOT_RUN))
    };
    let agent = match bus {
        Some(b) => Agent::at(b),
        None => Agent::system(),
    };
    let agent = match agent {
        Ok(a) => a,
        Err(e) => return could_not_run(&opts, e.to_string()),
    };
    // --card (an index or a PCI address) names the card when the words after `validate` do not.
    if let Some(sel) = global {
        let explicit = args.card.is_some();
        let i = match resolve(&agent, Some(sel)) {
            Ok(i) => i,
            Err(Failure::Client(e)) => return could_not_run(&opts, e.to_string()),
            Err(f) => return Err(f),
        };
        if explicit && i != opts.card {
            return Err(Failure::Usage(format!(
                "two cards named: --card is card{i}, the argument card{}",
                opts.card
            )));
        }
        opts.card = i;
    }
    match validate::run(&agent, &opts) {
        Ok(r) => {
            Out { json }.line(&r.table(), r.json());
            Ok(ExitCode::from(r.exit_code()))
        }
        Err(why) => could_not_run(&opts, why.to_string()),
    }
}

/// The card named by `--card` or by the command's own CARD (not both, unless they agree).
fn pick(global: Option<CardSel>, local: Option<CardSel>) -> Result<Option<CardSel>, Failure> {
    match (global, local) {
        (Some(g), Some(l)) if g != l => Err(Failure::Usage(format!(
            "two cards named: --card {g:?} and {l:?}"
        ))),
        (g, l) => Ok(l.or(g)),
    }
}

fn resolve(agent: &Agent, sel: Option<CardSel>) -> Result<u32, Failure> {
    Ok(match sel {
        None => 0,
        Some(CardSel::Index(i)) => i,
        Some(CardSel::Pci(p)) => agent.card_at(&p)?,
    })
}

struct Out {
    json: bool,
}

impl Out {
    fn line(&self, text: &str, v: serde_json::Value) {
        if self.json {
            println!("{v}");
        } else {
            println!("{text}");
        }
    }

    fn json<T: serde::Serialize>(&self, v: &T) {
        println!("{}", serde_json::to_string(v).expect("API values are JSON"));
    }
}

fn code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn version(v: u32) -> String {
    match version_string(v) {
        v if v.is_empty() => "none".into(),
        v => v,
    }
}

/// What the card runs, and what the agent wants it to run.
fn design_line(s: &CardStatus) -> String {
    use gdr_client::api::Design;
    let runs = match s.design {
        Design::Reference => "reference (NVIDIA jetson-rdma-picoevb, no ID block)".to_string(),
        Design::Gdr => format!(
            "gdr {} build {:08x}",
            version(s.design_version),
            s.build_hash
        ),
        Design::Unknown => "unknown".to_string(),
    };
    let wants = if s.loader == "none" {
        "no bitstream configured: loader 'none' keeps the card's design".to_string()
    } else {
        format!(
            "manifest wants {} build {:08x}",
            version(s.expected_version),
            s.expected_hash
        )
    };
    let golden = if s.fell_back_to_golden {
        ", FELL BACK TO GOLDEN"
    } else {
        ""
    };
    format!("{runs} ({wants}){golden}")
}

fn status(agent: &Agent, out: &Out, cards: &[u32]) -> Result<ExitCode, Failure> {
    let all = cards
        .iter()
        .map(|&c| agent.status(c))
        .collect::<Result<Vec<_>, _>>()?;
    if out.json {
        out.json(&all);
    } else if all.is_empty() {
        println!("no cards configured");
    }
    for s in all.iter().filter(|_| !out.json) {
        let failed_at = s
            .failed_at()
            .map(|f| format!(" at {}", f.name()))
            .unwrap_or_default();
        println!("card{}: {}{failed_at}", s.index, s.stage.name());
        if !s.message.is_empty() {
            println!("  message:   {}", s.message);
        }
        println!(
            "  pci:       {} (link {} x{})",
            s.pci, s.link_speed, s.link_width
        );
        println!("  design:    {}", design_line(s));
        println!("  health:    {}", s.health.name());
        if let Some(t) = s.last_selftest() {
            println!("  self-test: {}", selftest_line(t));
        }
    }
    Ok(code(!all.iter().any(|s| s.stage == Stage::Failed)))
}

fn selftest_line(t: &SelfTest) -> String {
    let verdict = if t.passed {
        "passed".to_string()
    } else {
        format!("FAILED: {}", t.reason)
    };
    let path = if t.path.is_empty() { "?" } else { &t.path };
    format!(
        "{verdict}; {} bytes, H2C {:.1} MB/s, C2H {:.1} MB/s, {} memory via {path} ({})",
        t.bytes, t.h2c_mbps, t.c2h_mbps, t.memory, t.memory_note
    )
}

fn selftest(agent: &Agent, out: &Out, card: u32) -> Result<ExitCode, Failure> {
    let t = agent.selftest(card)?;
    if out.json {
        out.json(&t);
    } else {
        println!("card{card} self-test {}", selftest_line(&t));
    }
    Ok(code(t.passed))
}

fn bench(agent: &Agent, out: &Out, card: u32, sizes: &[u32]) -> Result<ExitCode, Failure> {
    let v = agent.bench(card, sizes)?;
    if out.json {
        out.json(&v);
    } else {
        println!(
            "{:>8}  {:>10}  {:>10}  result",
            "bytes", "H2C MB/s", "C2H MB/s"
        );
        for t in &v {
            let result = if t.passed {
                "ok".to_string()
            } else {
                format!("FAILED: {}", t.reason)
            };
            println!(
                "{:>8}  {:>10.1}  {:>10.1}  {result}",
                t.bytes, t.h2c_mbps, t.c2h_mbps
            );
        }
    }
    Ok(code(v.iter().all(|t| t.passed)))
}

fn latency(
    agent: &Agent,
    out: &Out,
    card: u32,
    ops: &[gdr_agent::latency::Op],
    sizes: &[usize],
    samples: u32,
) -> Result<ExitCode, Failure> {
    use gdr_agent::validate::run::{Claimed, CouldNotRun, claim};
    let Claimed { dev, ram, .. } = claim(agent, card).map_err(|e| match e {
        CouldNotRun::Status { source, .. }
        | CouldNotRun::Open { source, .. }
        | CouldNotRun::Claim(source)
        | CouldNotRun::CardInfo(source) => Failure::Client(source),
        other => Failure::Failed(other.to_string()),
    })?;
    let card_clock = dev.time_by_card();
    let rows = gdr_agent::latency::measure(&dev, ram, ops, sizes, samples)
        .map_err(|e| Failure::Failed(e.to_string()))?;
    if out.json {
        out.json(&rows);
        return Ok(ExitCode::SUCCESS);
    }
    println!("card{card}: wall time per transfer, microseconds, host memory ({samples} each)");
    if card_clock {
        println!("card p50: the DMA engine's busy time by the card's clock (one-way requests)");
    }
    println!(
        "{:<6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "op", "bytes", "min", "p50", "p99", "p99.9", "max", "card p50"
    );
    for r in &rows {
        let card = r.card_p50_us.map_or("-".into(), |c| format!("{c:.1}"));
        println!(
            "{:<6} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {card:>9}",
            r.op.name(),
            r.bytes,
            r.min_us,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.max_us
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn stream(
    agent: &Agent,
    out: &Out,
    card: u32,
    plan: &gdr_agent::stream::Plan,
) -> Result<ExitCode, Failure> {
    gdr_agent::stream::check(plan).map_err(Failure::Usage)?;
    let dev = agent.open(card)?;
    let r = gdr_agent::stream::run(&dev, plan)?;
    let ok = r.consistent(plan.records_per_slot);
    if out.json {
        out.json(&r);
    } else {
        println!(
            "card{card}: {} records ({} bytes) in {:.3} s, {:.1} MB/s wall; {} bad, {} missing = {} slots \
             dropped by the ring x {} + {} by the source; {} chains, the driver waited {} times: {}",
            r.records,
            r.bytes,
            r.seconds,
            r.mbps,
            r.bad,
            r.missing,
            r.ring_drops,
            plan.records_per_slot,
            r.source_drops,
            r.chains,
            r.waits,
            if ok {
                "consistent"
            } else {
                "LOSS NOT ACCOUNTED FOR"
            }
        );
    }
    Ok(code(ok))
}

fn history(agent: &Agent, out: &Out, card: u32, n: u32) -> Result<ExitCode, Failure> {
    let v = agent.history(card, n)?;
    if out.json {
        out.json(&v);
    } else {
        for t in &v {
            println!("{}  {}", t.time, selftest_line(t));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn leds(agent: &Agent, out: &Out, card: u32, mask: u32) -> Result<ExitCode, Failure> {
    agent.set_leds(card, mask)?;
    out.line(
        &format!("card{card}: LEDs set to {mask:#05b}"),
        json!({"card": card, "leds": mask}),
    );
    Ok(ExitCode::SUCCESS)
}

/// Reprograms, printing each stage the card passes through on stderr as the agent signals it (stdout
/// keeps only the result, so `--json` stays one document).
fn reprogram(agent: &Agent, out: &Out, card: u32, quiet: bool) -> Result<ExitCode, Failure> {
    // Subscribed before the call, so no stage is missed. The signals come before the call's reply; the
    // printer says when it has shown a settled stage, and the result waits for that (briefly).
    let (shown, settled) = std::sync::mpsc::channel();
    if !quiet {
        let states = agent
            .card(card)?
            .receive_state_changed()
            .map_err(Error::from)?;
        std::thread::spawn(move || {
            for sig in states {
                if let Ok(a) = sig.args() {
                    let sep = if a.message.is_empty() { "" } else { ": " };
                    eprintln!("card{card}: {}{sep}{}", a.stage, a.message);
                    if matches!(a.stage, "ready" | "failed") {
                        let _ = shown.send(());
                    }
                }
            }
        });
    }
    let r = agent.reprogram(card);
    let s = agent.status(card)?;
    let failed = matches!(&r, Err(Error::Agent { name, .. }) if name.ends_with(".Failed"));
    if !quiet && (r.is_ok() || failed) {
        let _ = settled.recv_timeout(std::time::Duration::from_secs(2));
    }
    match r {
        Ok(()) => {
            if out.json {
                out.json(&s);
            } else {
                println!("card{card}: reprogrammed, {}", s.stage.name());
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(Error::Agent { message, .. }) if failed => {
            if out.json {
                out.json(&s);
            } else {
                eprintln!("gdrctl: {message}");
            }
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

fn fail(json: bool, e: &Error) -> ExitCode {
    let code = match e {
        Error::AgentNotRunning => 3,
        Error::AccessDenied(_) => 4,
        _ => 5,
    };
    if json {
        println!("{}", json!({"error": e.to_string(), "exit": code}));
    }
    eprintln!("gdrctl: {e}");
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(line.split_whitespace())
    }

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn latency_takes_sizes_with_k_and_refuses_nonsense() {
        let cli = parse("gdrctl latency 0 --sizes 64,4K,64k --ops c2h,h2c2h --samples 10").unwrap();
        match cli.cmd {
            Cmd::Latency {
                at,
                sizes,
                ops,
                samples,
            } => {
                assert_eq!(at, Some(CardSel::Index(0)));
                assert_eq!(sizes, [64, 4096, 65536]);
                use gdr_agent::latency::Op;
                assert_eq!(ops, [Op::C2h, Op::H2c2h]);
                assert_eq!(samples, 10);
            }
            _ => panic!("not latency"),
        }
        let defaults = parse("gdrctl latency").unwrap();
        assert!(
            matches!(defaults.cmd, Cmd::Latency { ref sizes, samples: 1000, .. }
            if sizes[..] == gdr_agent::latency::DEFAULT_SIZES)
        );
        for bad in [
            "gdrctl latency --sizes 0",
            "gdrctl latency --sizes 4M",
            "gdrctl latency --ops h2d",
            "gdrctl latency --samples 0",
        ] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad} parsed"));
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::ValueValidation | ErrorKind::InvalidValue
                ),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn validate_takes_its_thresholds_and_the_global_flags_anywhere() {
        // As the appliance test runs it.
        let cli = parse(
            "gdrctl --json validate 0 --min-h2c 1 --min-c2h 1 --min-round-trip 0.5 \
             --max-latency-us 500000",
        )
        .unwrap();
        assert!(cli.json);
        let Cmd::Validate(args) = &cli.cmd else {
            panic!("not validate");
        };
        let o = args.options();
        assert_eq!((o.card, o.thresholds.max_latency_us), (0, 500_000.0));
        let cli = parse("gdrctl validate --card 0000:01:00.0 --link-speed any --json").unwrap();
        assert!(cli.json);
        assert_eq!(cli.card, Some(CardSel::Pci("0000:01:00.0".into())));
        let Cmd::Validate(args) = &cli.cmd else {
            panic!("not validate");
        };
        assert_eq!(args.card, None);
        assert_eq!(args.options().thresholds.link.speed_gts, None);
    }

    #[test]
    fn validate_usage_errors_and_help_are_claps() {
        let e = parse("gdrctl validate --help").err().unwrap();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        assert!(e.to_string().contains("--max-latency-us"), "{e}");
        assert_eq!(e.exit_code(), 0);
        for bad in [
            "gdrctl validate --bogus",
            "gdrctl validate 0 1",
            "gdrctl validate --iterations 0",
        ] {
            let e = parse(bad).err().unwrap();
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
    }
}
