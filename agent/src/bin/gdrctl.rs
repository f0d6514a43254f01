//! `gdrctl`: the operator's view of the agent, over D-Bus through gdr-client. `--json` on every command.
//!
//! Exit status: 0 ok; 1 the operation ran and failed (a failed self-test, a failed card); 2 usage;
//! 3 the agent is not running; 4 access denied; 5 any other error.

use std::process::ExitCode;

use gdr_client::{Agent, Error};
use serde_json::Value;

const USAGE: &str = "usage: gdrctl [--json] [--bus ADDRESS] COMMAND [ARGS]

  status [CARD]                 state of every card (or one)
  selftest [CARD]               run the loopback self-test now
  bench [CARD] [--sizes LIST]   self-test transfers at several sizes (bytes, comma-separated;
                                default 4096,16384,65536)
  history [CARD] [-n N]         last N self-test results (default 10)
  leds CARD MASK                light LEDs: bit 0 = A, 1 = B, 2 = C (0..7)
  reprogram [CARD]              program the FPGA again (open fds are revoked)
  reload                        re-read /etc/gdr/agent.toml (all or nothing)
  validate [CARD] [--link-speed GT/s|any] [--link-width N|any] [--min-h2c MB/s] [--min-c2h MB/s]
           [--min-round-trip MB/s] [--max-latency-us US] [--manifest DIR] [--iterations N]
                                link, ID block, DMA integrity, bandwidth, latency and GPU path
                                against thresholds (a PicoEVB's by default); exit 0 passed,
                                1 a check failed, 2 could not run

CARD defaults to 0. --bus (or $GDR_BUS_ADDRESS) talks to a test bus instead of the system bus.";

struct Out {
    json: bool,
}

fn main() -> ExitCode {
    let mut json = false;
    let mut bus = std::env::var("GDR_BUS_ADDRESS").ok();
    let mut rest = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json = true,
            "--bus" => bus = args.next(),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => rest.push(a),
        }
    }
    let out = Out { json };
    let Some((cmd, args)) = rest.split_first() else {
        return usage("no command");
    };
    // Self-tests, benches and reprograms (a JTAG flash write: tens of minutes) take as long as they take;
    // everything else must answer within the client's default timeout.
    let timeout = match cmd.as_str() {
        "selftest" | "bench" | "reprogram" => None,
        _ => Some(gdr_client::DEFAULT_TIMEOUT),
    };
    if cmd == "validate" {
        return validate(bus.as_deref(), &out, args);
    }
    let connect = match bus.as_deref() {
        Some(b) => Agent::at_with_timeout(b, timeout),
        None => Agent::system_with_timeout(timeout),
    };
    let agent = match connect {
        Ok(a) => a,
        Err(e) => return fail(&out, &e),
    };
    let r = match cmd.as_str() {
        "status" => status(&agent, &out, args),
        "selftest" => card_arg(args, 0).and_then(|c| Ok(selftest(&agent, &out, c)?)),
        "bench" => bench(&agent, &out, args),
        "history" => history(&agent, &out, args),
        "leds" => leds(&agent, &out, args),
        "reprogram" => card_arg(args, 0).and_then(|c| Ok(reprogram(&agent, &out, c)?)),
        "reload" => agent.reload().map_err(Cli::Client).map(|_| {
            out.line(
                "configuration reloaded",
                serde_json::json!({"reloaded": true}),
            );
            ExitCode::SUCCESS
        }),
        other => return usage(&format!("unknown command '{other}'")),
    };
    match r {
        Ok(code) => code,
        Err(Cli::Usage(m)) => usage(&m),
        Err(Cli::Client(e)) => fail(&out, &e),
    }
}

enum Cli {
    Usage(String),
    Client(Error),
}

impl From<Error> for Cli {
    fn from(e: Error) -> Self {
        Cli::Client(e)
    }
}

impl Out {
    fn line(&self, text: &str, v: Value) {
        if self.json {
            println!("{v}");
        } else {
            println!("{text}");
        }
    }
}

fn card_arg(args: &[String], i: usize) -> Result<u32, Cli> {
    match args.get(i) {
        None => Ok(0),
        Some(a) => a
            .trim_start_matches("card")
            .parse()
            .map_err(|_| Cli::Usage(format!("'{a}' is not a card number"))),
    }
}

fn parse(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

fn version(v: &Value) -> String {
    let v = v.as_u64().unwrap_or(0);
    if v == 0 {
        "none".into()
    } else {
        format!("{}.{}.{}", v >> 24, (v >> 16) & 0xff, v & 0xffff)
    }
}

/// What the card runs, and what the agent wants it to run.
fn design_line(s: &Value) -> String {
    let runs = match s["design"].as_str().unwrap_or("unknown") {
        "reference" => "reference (NVIDIA jetson-rdma-picoevb, no ID block)".to_string(),
        "gdr" => format!(
            "gdr {} build {:08x}",
            version(&s["design_version"]),
            s["build_hash"].as_u64().unwrap_or(0)
        ),
        other => other.to_string(),
    };
    let wants = if s["loader"] == "none" {
        "no bitstream configured: loader 'none' keeps the card's design".to_string()
    } else {
        format!(
            "manifest wants {} build {:08x}",
            version(&s["expected_version"]),
            s["expected_hash"].as_u64().unwrap_or(0)
        )
    };
    let golden = if s["fell_back_to_golden"] == true {
        ", FELL BACK TO GOLDEN"
    } else {
        ""
    };
    format!("{runs} ({wants}){golden}")
}

fn status(agent: &Agent, out: &Out, args: &[String]) -> Result<ExitCode, Cli> {
    let cards = match args.first() {
        Some(_) => vec![card_arg(args, 0)?],
        None => agent.cards()?,
    };
    let mut all = Vec::new();
    let mut failed = false;
    for c in cards {
        let s = parse(&agent.status_json(c)?);
        failed |= s["stage"] == "failed";
        all.push(s);
    }
    if out.json {
        println!("{}", Value::Array(all));
    } else if all.is_empty() {
        println!("no cards configured");
    } else {
        for s in &all {
            let stage = s["stage"].as_str().unwrap_or("?");
            let failed_at = s["failed_stage"]
                .as_str()
                .map(|f| format!(" at {f}"))
                .unwrap_or_default();
            println!("card{}: {stage}{failed_at}", s["index"]);
            if let Some(m) = s["message"].as_str().filter(|m| !m.is_empty()) {
                println!("  message:   {m}");
            }
            println!(
                "  pci:       {} (link {} x{})",
                s["pci"].as_str().unwrap_or(""),
                s["link_speed"].as_str().unwrap_or("?"),
                s["link_width"]
            );
            println!("  design:    {}", design_line(s));
            println!("  healthy:   {}", s["healthy"]);
            let t = &s["last_selftest"];
            if !t.is_null() {
                println!("  self-test: {}", selftest_line(t));
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn selftest_line(t: &Value) -> String {
    let verdict = if t["passed"] == true {
        "passed".to_string()
    } else {
        format!("FAILED: {}", t["reason"].as_str().unwrap_or(""))
    };
    format!(
        "{verdict}; {} bytes, H2C {:.1} MB/s, C2H {:.1} MB/s, {} memory via {} ({})",
        t["bytes"],
        t["h2c_mbps"].as_f64().unwrap_or(0.0),
        t["c2h_mbps"].as_f64().unwrap_or(0.0),
        t["memory"].as_str().unwrap_or("?"),
        t["path"].as_str().filter(|p| !p.is_empty()).unwrap_or("?"),
        t["memory_note"].as_str().unwrap_or("")
    )
}

fn selftest(agent: &Agent, out: &Out, card: u32) -> Result<ExitCode, Error> {
    let t = parse(&agent.selftest(card)?);
    out.line(
        &format!("card{card} self-test {}", selftest_line(&t)),
        t.clone(),
    );
    Ok(if t["passed"] == true {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn bench(agent: &Agent, out: &Out, args: &[String]) -> Result<ExitCode, Cli> {
    let mut card = 0;
    let mut sizes = vec![4096, 16384, 65536];
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--sizes" {
            let list = args
                .get(i + 1)
                .ok_or(Cli::Usage("--sizes needs a list".into()))?;
            sizes = list
                .split(',')
                .map(|s| s.parse().map_err(|_| Cli::Usage(format!("bad size '{s}'"))))
                .collect::<Result<_, _>>()?;
            i += 2;
        } else {
            card = card_arg(args, i)?;
            i += 1;
        }
    }
    let v = parse(&agent.bench(card, &sizes)?);
    if out.json {
        println!("{v}");
    } else {
        println!(
            "{:>8}  {:>10}  {:>10}  result",
            "bytes", "H2C MB/s", "C2H MB/s"
        );
        for t in v.as_array().into_iter().flatten() {
            println!(
                "{:>8}  {:>10.1}  {:>10.1}  {}",
                t["bytes"],
                t["h2c_mbps"].as_f64().unwrap_or(0.0),
                t["c2h_mbps"].as_f64().unwrap_or(0.0),
                if t["passed"] == true {
                    "ok".to_string()
                } else {
                    format!("FAILED: {}", t["reason"].as_str().unwrap_or(""))
                }
            );
        }
    }
    let ok = v
        .as_array()
        .is_some_and(|a| a.iter().all(|t| t["passed"] == true));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn history(agent: &Agent, out: &Out, args: &[String]) -> Result<ExitCode, Cli> {
    let mut card = 0;
    let mut n = 10;
    let mut i = 0;
    while i < args.len() {
        if args[i] == "-n" {
            n = args
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .ok_or(Cli::Usage("-n needs a number".into()))?;
            i += 2;
        } else {
            card = card_arg(args, i)?;
            i += 1;
        }
    }
    let v = parse(&agent.history(card, n)?);
    if out.json {
        println!("{v}");
    } else {
        for t in v.as_array().into_iter().flatten() {
            println!("{}  {}", t["time"], selftest_line(t));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn leds(agent: &Agent, out: &Out, args: &[String]) -> Result<ExitCode, Cli> {
    let [card, mask] = args else {
        return Err(Cli::Usage("leds needs CARD and MASK".into()));
    };
    let card = card_arg(std::slice::from_ref(card), 0)?;
    let mask: u32 = mask
        .parse()
        .map_err(|_| Cli::Usage(format!("'{mask}' is not a number 0..7")))?;
    agent.set_leds(card, mask)?;
    out.line(
        &format!("card{card}: LEDs set to {mask:#05b}"),
        serde_json::json!({"card": card, "leds": mask}),
    );
    Ok(ExitCode::SUCCESS)
}

fn reprogram(agent: &Agent, out: &Out, card: u32) -> Result<ExitCode, Error> {
    let r = agent.reprogram(card);
    let s = parse(&agent.status_json(card)?);
    match r {
        Ok(()) => {
            out.line(
                &format!(
                    "card{card}: reprogrammed, {}",
                    s["stage"].as_str().unwrap_or("?")
                ),
                s,
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(Error::Agent { name, message }) if name.ends_with(".Failed") => {
            if out.json {
                println!("{s}")
            } else {
                eprintln!("gdrctl: {message}")
            }
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e),
    }
}

/// `validate`: its own exit statuses (0 passed, 1 a check failed, 2 could not run: no agent included).
fn validate(bus: Option<&str>, out: &Out, args: &[String]) -> ExitCode {
    use gdr_agent::validate::{self, EXIT_COULD_NOT_RUN, Options};
    let opts = match Options::parse(args) {
        Ok(o) => o,
        Err(m) => return usage(&m),
    };
    let agent = match bus {
        Some(b) => Agent::at(b),
        None => Agent::system(),
    };
    match agent
        .map_err(|e| validate::CouldNotRun(e.to_string()))
        .and_then(|a| validate::run(&a, &opts))
    {
        Ok(r) => {
            out.line(&r.table(), r.json());
            ExitCode::from(r.exit_code())
        }
        Err(validate::CouldNotRun(why)) => {
            if out.json {
                println!("{}", validate::could_not_run_json(opts.card, &why));
            }
            eprintln!("gdrctl validate: could not run: {why}");
            ExitCode::from(EXIT_COULD_NOT_RUN)
        }
    }
}

fn usage(m: &str) -> ExitCode {
    eprintln!("gdrctl: {m}\n\n{USAGE}");
    ExitCode::from(2)
}

fn fail(out: &Out, e: &Error) -> ExitCode {
    let code = match e {
        Error::AgentNotRunning => 3,
        Error::AccessDenied(_) => 4,
        _ => 5,
    };
    if out.json {
        println!(
            "{}",
            serde_json::json!({"error": e.to_string(), "exit": code})
        );
    }
    eprintln!("gdrctl: {e}");
    ExitCode::from(code)
}
