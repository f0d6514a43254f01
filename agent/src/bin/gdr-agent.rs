//! `gdr-agent`: the daemon (systemd `Type=notify`). See docs/agent.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gdr_agent::config::{self, Config};
use gdr_agent::daemon::Agent;
use gdr_agent::notify::{notify, status_line, watchdog_usec};

const USAGE: &str = "usage: gdr-agent [--config PATH] [--bus ADDRESS] [--check]

  --config PATH   configuration file (default /etc/gdr/agent.toml)
  --bus ADDRESS   serve on this D-Bus address instead of the system bus (tests)
  --check         validate the configuration and the bitstream manifest, then exit";

/// How long a stop waits for running operations; below the unit's `TimeoutStopSec=90s`, so the agent
/// rescans a card still off the bus itself rather than being killed first.
const STOP_WAIT: Duration = Duration::from_secs(75);

static HUP: AtomicBool = AtomicBool::new(false);
static TERM: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGHUP {
        HUP.store(true, Ordering::SeqCst);
    } else {
        TERM.store(true, Ordering::SeqCst);
    }
}

fn main() -> ExitCode {
    gdr_agent::logging::init();
    let mut path = PathBuf::from(config::DEFAULT_PATH);
    let mut bus = None;
    let mut check = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--config" => match args.next() {
                Some(p) => path = p.into(),
                None => return usage("--config needs a path"),
            },
            "--bus" => match args.next() {
                Some(b) => bus = Some(b),
                None => return usage("--bus needs an address"),
            },
            "--check" => check = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument '{other}'")),
        }
    }
    let config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            log::error!("gdr-agent: {e}");
            let _ = notify(&status_line(&format!("bad configuration: {e}")));
            return ExitCode::FAILURE;
        }
    };
    if check {
        let keep_all = config
            .cards
            .iter()
            .all(|c| c.loader == config::LoaderKind::None);
        return match gdr_agent::manifest::Manifest::load(&config.agent.bitstream_dir) {
            Ok(m) => {
                println!(
                    "{}: ok; manifest {} ({})",
                    path.display(),
                    m.version,
                    m.expected
                );
                ExitCode::SUCCESS
            }
            Err(_) if keep_all => {
                println!(
                    "{}: ok; no manifest needed (loader 'none': every card's design is kept)",
                    path.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: ok; manifest: {e}", path.display());
                ExitCode::FAILURE
            }
        };
    }
    for sig in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to atomics (async-signal-safe).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    let world = Agent::real_world(&config);
    let interval = Duration::from_secs(config.health.interval_s);
    let agent = Agent::new(&path, config, world);
    let conn = match gdr_agent::dbus::serve(&agent, bus.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            log::error!("gdr-agent: cannot serve org.gdr.Agent1 on the bus: {e}");
            return ExitCode::FAILURE;
        }
    };
    agent.start();
    run(&agent, &conn, interval);
    let _ = notify("STOPPING=1");
    let _ = notify(&status_line("stopping: waiting for running operations"));
    agent.shutdown(STOP_WAIT);
    ExitCode::SUCCESS
}

/// The main loop: READY=1 once every card settled, STATUS= on change, health checks (a card's verdict is
/// its own), WATCHDOG=1 only while every part makes progress (`alive`), reload on SIGHUP, metrics after
/// each tick.
fn run(agent: &std::sync::Arc<Agent>, conn: &zbus::blocking::Connection, interval: Duration) {
    let watchdog = watchdog_usec().map(Duration::from_micros);
    // Feed at most every half watchdog period, and check health at least that often.
    let tick_of = |interval: Duration| watchdog.map_or(interval, |w| interval.min(w / 2));
    let mut tick = tick_of(interval);
    let mut ready = false;
    let mut last_status = String::new();
    let mut next = Instant::now();
    let mut stuck: Option<String> = None;
    while !TERM.load(Ordering::SeqCst) {
        if HUP.swap(false, Ordering::SeqCst) {
            // During bring-up READY=1 would tell systemd the start is over: a reload then only reloads.
            if ready {
                let _ = notify("RELOADING=1");
            }
            match agent.reload() {
                Ok(()) => tick = tick_of(Duration::from_secs(agent.config().health.interval_s)),
                Err(e) => log::error!("reload refused: {e}"),
            }
            if ready {
                let _ = notify("READY=1");
            }
        }
        let status = agent.status_text();
        if status != last_status {
            let _ = notify(&status_line(&status));
            last_status = status;
        }
        if !ready && agent.settled() {
            ready = true;
            let _ = notify("READY=1");
            log::info!("all cards settled: {last_status}");
        }
        if Instant::now() >= next {
            next = Instant::now() + tick;
            agent.health_tick();
            match alive(agent, conn) {
                Ok(()) => {
                    if let Some(why) = stuck.take() {
                        log::info!("every part makes progress again (was: {why})");
                    }
                    if watchdog.is_some() {
                        let _ = notify("WATCHDOG=1");
                    }
                }
                Err(why) => {
                    // Compared as the journal shows it: a stall whose text is unchanged is logged once.
                    let why = why.to_string();
                    if stuck.as_ref() != Some(&why) {
                        log::error!("watchdog withheld: {why}");
                    }
                    stuck = Some(why);
                }
            }
            agent.write_metrics();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether every part of the daemon makes progress: this loop (it is running), each card operation
/// (heartbeats) and the bus connection with its executor (a ping to ourselves).
fn alive(agent: &Agent, conn: &zbus::blocking::Connection) -> Result<(), Unwell> {
    agent.progress()?;
    Ok(gdr_agent::dbus::alive(conn)?)
}

/// Which part of the daemon stopped making progress.
#[derive(Debug, thiserror::Error)]
enum Unwell {
    #[error(transparent)]
    Stalled(#[from] gdr_agent::daemon::Stalled),
    #[error(transparent)]
    Bus(#[from] gdr_agent::dbus::Unreachable),
}

fn usage(e: &str) -> ExitCode {
    eprintln!("gdr-agent: {e}\n\n{USAGE}");
    ExitCode::from(2)
}
