//! One card's bring-up: discover -> identify -> (program -> relink) -> bind -> self-test -> ready | failed.
//!
//! Each stage that can fail transiently is retried `retry.attempts` times with doubling backoff; a stage
//! that still fails ends the card in `Failed` with the stage and the reason, never in a silent wait.
//!
//! With `loader = "none"` the card is never programmed: identify reads whichever design it carries
//! (gdr's or NVIDIA's reference design) and the bring-up goes straight on to the self-test.
//!
//! Taking the function off the bus is recorded first ([`journal`]); a bring-up starts by bringing back a
//! function an earlier, interrupted run left off the bus. Once the agent is stopping, no new stage starts,
//! but a removed function is always rescanned before the bring-up returns.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use picoevb_abi::{ABI_VERSION, abi_major};

use super::failure::Failure;
use super::journal::{self, OffBus};
use super::ports::{Events, Loader, Node, Pci, SelfTester, Sleep};
use super::stage::{CardStatus, Design, Stage};
use crate::config::{CardConfig, Config, LoaderKind};
use crate::manifest::{Identity, Manifest};
use crate::selftest::{self, SelfTestResult};

/// Driver name a bound PicoEVB shows in sysfs.
pub const DRIVER: &str = "picoevb";

/// Start-up time asked of systemd for one programming attempt (JTAG flash writes are slow).
pub const PROGRAM_EXTEND_USEC: u64 = 45 * 60 * 1_000_000;

/// Everything one card's bring-up uses.
pub struct Machine {
    pub index: usize,
    pub card: CardConfig,
    pub config: Config,
    pub manifest: Option<Manifest>,
    pub pci: Arc<dyn Pci>,
    pub node: Arc<dyn Node>,
    pub loader: Option<Arc<dyn Loader>>,
    pub tester: Arc<dyn SelfTester>,
    pub events: Arc<dyn Events>,
    pub sleep: Arc<dyn Sleep>,
    pub status: Arc<Mutex<CardStatus>>,
    /// Set when the agent is stopping: no new stage starts.
    pub stop: Arc<AtomicBool>,
}

impl Machine {
    fn set(&self, f: impl FnOnce(&mut CardStatus)) {
        {
            let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut s);
        }
        self.events.changed(self.index);
    }

    fn enter(&self, stage: Stage, message: &str) {
        self.set(|s| {
            s.stage = stage;
            s.failed_stage = None;
            s.message = message.to_string();
        });
    }

    fn fail(&self, stage: Stage, reason: Failure) {
        self.set(|s| {
            s.stage = Stage::Failed;
            s.failed_stage = Some(stage);
            s.message = reason.to_string();
        });
    }

    fn node(&self) -> PathBuf {
        self.card.device.clone()
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Fails `stage` if the agent is stopping (checked before each stage that may take long).
    fn go_on(&self, stage: Stage) -> Result<(), (Stage, Failure)> {
        if self.stopping() {
            return Err((stage, Failure::Stopping));
        }
        Ok(())
    }

    /// Runs `f` up to `attempts` times, sleeping with doubling backoff between tries; gives up early
    /// when the agent is stopping.
    fn retry<T>(&self, f: impl FnMut(u32) -> Result<T, Failure>) -> Result<T, Failure> {
        self.retry_with(true, f)
    }

    /// [`Self::retry`]; `stoppable = false` keeps trying while the agent stops (bringing a removed
    /// function back must not be cut short).
    fn retry_with<T>(
        &self,
        stoppable: bool,
        mut f: impl FnMut(u32) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let r = &self.config.retry;
        let mut wait = r.backoff_ms;
        for attempt in 1..=r.attempts {
            match f(attempt) {
                Ok(v) => return Ok(v),
                Err(e) if stoppable && self.stopping() => {
                    return Err(Failure::Interrupted(Box::new(e)));
                }
                Err(e) if !e.retryable() || attempt == r.attempts => {
                    return Err(if attempt > 1 {
                        Failure::Tries {
                            tries: attempt,
                            last: Box::new(e),
                        }
                    } else {
                        e
                    });
                }
                Err(e) => {
                    self.set(|s| {
                        s.message = format!(
                            "try {attempt}/{} failed: {e}; retrying in {wait} ms",
                            r.attempts
                        )
                    });
                    self.sleep.sleep(Duration::from_millis(wait));
                    wait = (wait * 2).min(r.max_backoff_ms);
                }
            }
        }
        unreachable!("retry.attempts is validated to be >= 1")
    }

    /// Brings the card up; `force_program` reprograms even a card with the right design.
    pub fn bring_up(&self, force_program: bool) -> Stage {
        match self.run(force_program) {
            Ok(()) => {
                self.enter(Stage::Ready, "");
                Stage::Ready
            }
            Err((stage, reason)) => {
                self.fail(stage, reason);
                Stage::Failed
            }
        }
    }

    fn run(&self, force_program: bool) -> Result<(), (Stage, Failure)> {
        let at = |stage| move |e| (stage, e);
        let keep = self.card.loader == LoaderKind::None;
        // A card whose design is kept is compared with no manifest, even where one is installed.
        let expected = if keep {
            None
        } else {
            self.manifest.as_ref().map(|m| m.expected)
        };
        self.set(|s| {
            s.fell_back_to_golden = false;
            s.loader = self.card.loader.name().to_string();
            let e = expected.unwrap_or_default();
            s.expected_version = e.design_version;
            s.expected_hash = e.build_hash;
        });

        self.go_on(Stage::Discover)?;
        self.enter(Stage::Discover, "looking for the card on the PCI bus");
        self.recover()?;
        let bdf = self
            .retry(|_| self.discover())
            .map_err(at(Stage::Discover))?;
        self.set(|s| s.pci = bdf.clone());

        if keep {
            self.enter(
                Stage::Identify,
                "reading the card's design (loader 'none': it is kept, never programmed)",
            );
            // Bound and answering, with the right ABI: the boot may still be binding the driver.
            self.retry(|_| self.bound(&bdf))
                .map_err(at(Stage::Identify))?;
            return self.finish(&bdf);
        }

        self.enter(Stage::Identify, "reading the ID block");
        // At boot udev may not have bound the driver or opened the node to the agent yet: an ID block
        // unreadable for that reason is no reason to reprogram the card.
        self.await_node(&bdf);
        let found = self.identify(&bdf);
        let Some(expected) = expected else {
            return Err((Stage::Identify, Failure::NoManifest));
        };
        let needs_program = match &found {
            Ok(id) if *id == expected && !force_program => false,
            Ok(id) if *id == expected => {
                self.note(&format!("card runs {id}; reprogramming as asked"));
                true
            }
            Ok(id) => {
                self.note(&format!("card runs {id}, the manifest wants {expected}"));
                true
            }
            Err(e) => {
                self.note(&format!("ID block unreadable ({e}): programming"));
                true
            }
        };

        if needs_program {
            self.program(&bdf, expected)?;
        }

        self.enter(Stage::Bind, "checking the driver's ABI");
        let info = self.retry(|_| self.bound(&bdf)).map_err(at(Stage::Bind))?;
        let id = Identity {
            design_version: info.design_version,
            build_hash: info.build_hash,
        };
        if id != expected {
            return Err((
                Stage::Identify,
                Failure::WrongDesign {
                    runs: id,
                    wants: expected,
                },
            ));
        }
        self.finish(&bdf)
    }

    /// The link as trained, then the self-test (if configured).
    fn finish(&self, bdf: &str) -> Result<(), (Stage, Failure)> {
        if let Some((speed, width)) = self.pci.link(bdf) {
            self.set(|s| {
                s.link_speed = speed;
                s.link_width = width;
            });
        }

        if self.config.selftest.on_start {
            self.go_on(Stage::SelfTest)?;
            let r = self.selftest();
            // A restarted agent may find applications holding the card: that is no failed card.
            if r.reason == selftest::BUSY {
                log::info!("card{}: self-test skipped: {}", self.index, selftest::BUSY);
            } else if !r.passed {
                return Err((Stage::SelfTest, Failure::SelfTest(r.reason)));
            }
        }
        Ok(())
    }

    fn note(&self, message: &str) {
        self.set(|s| s.message = message.to_string());
    }

    fn journal(&self) -> PathBuf {
        journal::path(&self.config.agent.state_dir, self.index)
    }

    /// Brings back a function an interrupted run (stop, kill, crash, power cut of the agent only) left
    /// off the bus, so that discovery can find it.
    fn recover(&self) -> Result<(), (Stage, Failure)> {
        let file = self.journal();
        let Some(record) = journal::read(&file) else {
            return Ok(());
        };
        let why = match &record {
            Ok(r) => format!(
                "an earlier run was stopped during '{}' with {} off the bus",
                r.op, r.pci
            ),
            Err(e) => format!("an earlier run left an unreadable record ({e})"),
        };
        log::warn!("card{}: {why}: rescanning", self.index);
        self.note(&format!("{why}: rescanning"));
        let back = match &record {
            Ok(r) => self.relink(&r.pci),
            Err(_) => self.pci.rescan().map_err(Failure::from),
        };
        back.map_err(|e| {
            (
                Stage::Relink,
                Failure::Unrecovered {
                    why,
                    back: Box::new(e),
                },
            )
        })?;
        journal::clear(&file).map_err(|e| (Stage::Relink, e.into()))
    }

    fn discover(&self) -> Result<String, Failure> {
        let all = self.pci.list()?;
        let found = if self.card.pci == "auto" {
            all.get(self.index).cloned()
        } else {
            all.iter().find(|b| **b == self.card.pci).cloned()
        };
        match found {
            Some(bdf) => Ok(bdf),
            None => Err(Failure::NotFound {
                wanted: if self.card.pci == "auto" {
                    format!("position {} in bus order", self.index)
                } else {
                    self.card.pci.clone()
                },
                found: all,
            }),
        }
    }

    /// The design the card runs, as the bound driver read it.
    fn identify(&self, bdf: &str) -> Result<Identity, Failure> {
        if self.pci.driver(bdf).as_deref() != Some(DRIVER) {
            return Err(Failure::NotBound {
                bdf: bdf.to_string(),
            });
        }
        let info = self.node.abi_info(&self.node())?;
        let id = Identity {
            design_version: info.design_version,
            build_hash: info.build_hash,
        };
        self.set(|s| {
            s.design = Design::of(&info);
            s.design_version = id.design_version;
            s.build_hash = id.build_hash;
            s.abi_version = info.abi_version;
        });
        Ok(id)
    }

    fn bound(&self, bdf: &str) -> Result<picoevb_abi::AbiInfo, Failure> {
        if self.pci.driver(bdf).as_deref() != Some(DRIVER) {
            return Err(Failure::NotBound {
                bdf: bdf.to_string(),
            });
        }
        let info = self.node.abi_info(&self.node())?;
        self.set(|s| {
            s.design = Design::of(&info);
            s.abi_version = info.abi_version;
            s.design_version = info.design_version;
            s.build_hash = info.build_hash;
        });
        if abi_major(info.abi_version) != abi_major(ABI_VERSION) {
            return Err(Failure::Abi {
                abi: info.abi_version,
            });
        }
        Ok(info)
    }

    /// Program, then remove/rescan until the card is back; detects a MultiBoot fallback to golden.
    fn program(&self, bdf: &str, expected: Identity) -> Result<(), (Stage, Failure)> {
        let Some(loader) = &self.loader else {
            return Err((Stage::Program, Failure::NoLoader));
        };
        let manifest = self.manifest.as_ref().expect("checked by the caller");
        let role = loader.image_role(self.card.target);
        // Read and checked once: every try programs these bytes, whatever happens to the file.
        let image = manifest
            .image(role)
            .map_err(|e| (Stage::Program, e.into()))?;
        let mut last = None;
        for attempt in 1..=self.config.retry.attempts {
            self.go_on(Stage::Program)?;
            self.enter(
                Stage::Program,
                &format!(
                    "loading {} through {} (try {attempt})",
                    image.file.path.display(),
                    loader.name()
                ),
            );
            self.events.extend_timeout(PROGRAM_EXTEND_USEC);
            // Recorded before the function leaves the bus, so a later start can bring it back; a card
            // whose removal cannot be recorded is not removed.
            let offbus = OffBus {
                op: "program".into(),
                pci: bdf.to_string(),
                since: crate::selftest::now(),
            };
            journal::record(&self.journal(), &offbus)
                .map_err(|e| (Stage::Program, Failure::Unrecorded(e)))?;
            // Take the function off the bus first: the link drops while the FPGA reconfigures.
            if let Err(e) = self.pci.remove(bdf) {
                // The helper may still remove it after the call gave up (a timeout on a loaded box):
                // bring the function back before anything else, then try again.
                let failed = Failure::NotRemoved {
                    bdf: bdf.to_string(),
                    source: e,
                };
                self.note(&failed.to_string());
                if let Err(back) = self.relink(bdf) {
                    let failed = Failure::NotBroughtBack {
                        first: Box::new(failed),
                        back: Box::new(back),
                    };
                    return Err((Stage::Relink, failed));
                }
                journal::clear(&self.journal()).map_err(|e| (Stage::Relink, e.into()))?;
                last = Some(failed);
                if attempt < self.config.retry.attempts {
                    self.sleep
                        .sleep(Duration::from_millis(self.config.retry.backoff_ms));
                }
                continue;
            }
            let loaded = loader.program(&image, self.card.target);
            self.set(|s| s.programmed += 1);
            self.enter(Stage::Relink, "rescanning the PCI bus");
            let back = self.relink(bdf);
            if back.is_ok() {
                journal::clear(&self.journal()).map_err(|e| (Stage::Relink, e.into()))?;
            }
            let failed = if let Err(source) = loaded {
                Failure::Loader {
                    name: loader.name(),
                    source,
                }
            } else if let Err(e) = back {
                return Err((Stage::Relink, e));
            } else {
                match self.identify(bdf) {
                    Ok(id) if id == expected => return Ok(()),
                    Ok(id) if manifest.golden == Some(id) => {
                        self.set(|s| s.fell_back_to_golden = true);
                        Failure::Golden {
                            runs: id,
                            wants: expected,
                        }
                    }
                    Ok(id) => Failure::CameBack {
                        runs: id,
                        wants: expected,
                    },
                    Err(e) => Failure::Unreadable(Box::new(e)),
                }
            };
            self.note(&failed.to_string());
            last = Some(failed);
            if attempt < self.config.retry.attempts {
                self.sleep
                    .sleep(Duration::from_millis(self.config.retry.backoff_ms));
            }
        }
        Err((
            Stage::Program,
            last.expect("retry.attempts is validated to be >= 1"),
        ))
    }

    /// Waits up to `retry.attempts` x `retry.bind_timeout_s` for the driver to be bound to `bdf` and its
    /// node to answer (udev's coldplug of a slow boot; at once on a box whose udev is done).
    fn await_node(&self, bdf: &str) {
        let r = &self.config.retry;
        let polls = (r.bind_timeout_s * 10 * u64::from(r.attempts)).max(1);
        for _ in 0..polls {
            if self.pci.driver(bdf).as_deref() == Some(DRIVER)
                && self.node.abi_info(&self.node()).is_ok()
            {
                return;
            }
            if self.stopping() {
                return;
            }
            self.sleep.sleep(Duration::from_millis(100));
        }
    }

    /// Rescans until the function is back with the driver bound and its node opens. The node appears
    /// with the driver but belongs to root until udev has applied the rules, so binding alone is not
    /// enough: an open in that window fails with EACCES.
    fn relink(&self, bdf: &str) -> Result<(), Failure> {
        let polls = (self.config.retry.bind_timeout_s * 10).max(1);
        self.retry_with(false, |_| {
            self.pci.rescan()?;
            let mut node = None;
            for _ in 0..polls {
                if self.pci.driver(bdf).as_deref() == Some(DRIVER) {
                    match self.node.abi_info(&self.node()) {
                        Ok(_) => return Ok(()),
                        Err(e) => node = Some(e),
                    }
                }
                self.sleep.sleep(Duration::from_millis(100));
            }
            Err(Failure::NotBack {
                bdf: bdf.to_string(),
                node,
            })
        })
    }

    /// Runs the self-test child, judges, records; does not change the stage. A test that did not run
    /// because an application holds the card RAM (reason [`selftest::BUSY`]) is not recorded.
    pub fn selftest(&self) -> SelfTestResult {
        self.enter(Stage::SelfTest, "loopback DMA through the card");
        let now = selftest::now();
        let result = match self.tester.run(&self.node()) {
            Ok(m) => selftest::judge(now, m, &self.config.selftest),
            Err(e) => SelfTestResult::error(now, e.to_string()),
        };
        if result.reason == selftest::BUSY {
            return result;
        }
        let file = selftest::history::path(&self.config.agent.state_dir, self.index);
        if let Err(e) = selftest::history::append(&file, &result, self.config.selftest.history) {
            log::warn!("card{}: self-test history not saved: {e}", self.index);
        }
        self.set(|s| s.last_selftest = Some(result.clone()));
        result
    }
}
