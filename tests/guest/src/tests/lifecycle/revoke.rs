//! A free callback that lands right after a pin completes: the card must not keep a record of the freed
//! surface (until unbind, in a driver that recorded it after pinning).

use std::fs;

use super::*;

const REVOKE: &str = "/sys/module/gdr_nv_p2p/parameters/revoke_after_map_us";
const DONE: &str = "/sys/module/gdr_nv_p2p/parameters/revokes_done";
/// Pins per round that must complete before their revoke (the sweep goes on until then).
const AFTER: u32 = 100;
/// The longest delay tried, in µs: a pin that takes longer is broken.
const MAX_DELAY_US: u32 = 20_000;

/// The provider's revoke, turned off when this value goes (also when the test bails out).
struct Revoke;

impl Revoke {
    fn after(us: u32) -> Result<Self, String> {
        fs::write(REVOKE, us.to_string()).map_err(|e| format!("{REVOKE} <- {us}: {e}"))?;
        Ok(Revoke)
    }
}

impl Drop for Revoke {
    fn drop(&mut self) {
        let _ = fs::write(REVOKE, "0");
    }
}

fn revokes_done() -> Result<u64, String> {
    kstat::read_u64(DONE)
}

/// The card's recorded surfaces (debugfs `state`), and the whole text for messages.
fn recorded(state: &str) -> Result<(u64, String), String> {
    let text = fs::read_to_string(state).map_err(|e| format!("{state}: {e}"))?;
    let n = text
        .lines()
        .find_map(|l| l.strip_prefix("surfaces "))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{state}: no surfaces line: {text:?}"))?;
    Ok((n, text))
}

/// PIN_CUDA while the provider revokes every mapping `d` µs after making it, for `rounds` rounds of a sweep
/// of `d` from 1 µs: in growing steps while every callback lands inside the pin (PIN_CUDA fails with
/// EFAULT), then 1 µs at a time across the pin's end (timing jitter moves it) until `AFTER` pins completed
/// first, so the sweep finds the pin's end on a slow guest too (TCG, arm64). Whatever the moment, once the
/// callback is over the card records no more surfaces than before. Fails on a driver that records a surface after pinning it (defect 8): a callback
/// between the two frees a surface that is then recorded until unbind (debugfs `state` shows it, freed).
pub(super) fn callback_right_after_pin(ctx: &mut Ctx, rounds: usize) -> TestResult {
    let f = flavour(ctx.dev)?;
    let state = card_state(ctx.dev_path)?;
    let dev = open(ctx)?;
    let s = surface(f, 65536)?;
    let (base, _) = recorded(&state)?;
    let (mut inside, mut after) = (0u32, 0u32);
    let mut first_after = u32::MAX;
    for round in 0..rounds {
        let (mut d, mut done_first) = (1u32, 0u32);
        while done_first < AFTER {
            ensure!(
                d <= MAX_DELAY_US,
                "round {round}: every pin was revoked inside PIN_CUDA, up to {MAX_DELAY_US} us after its map"
            );
            let what = format!("round {round}, revoke {d} us after the map");
            let done = revokes_done()?;
            let r = {
                let _revoke = Revoke::after(d)?;
                dev.pin_cuda(s.va(), s.len() as u64)
            };
            match r {
                Ok(h) => {
                    after += 1;
                    done_first += 1;
                    first_after = first_after.min(d);
                    wait_revoked(done, &what)?;
                    // Its memory went away: the handle is dead.
                    expect_errno(
                        &format!("{what}: UNPIN_CUDA"),
                        dev.unpin_cuda(h),
                        libc::EINVAL,
                    )?;
                }
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => {
                    inside += 1;
                    wait_revoked(done, &what)?;
                }
                Err(e) => return Err(format!("{what}: PIN_CUDA: {e}")),
            }
            let (n, text) = recorded(&state)?;
            ensure!(
                n == base,
                "{what}: the card records {n} surfaces, {base} before: {}",
                text.replace('\n', " | ")
            );
            d += if done_first == 0 { (d / 16).max(1) } else { 1 };
        }
    }
    println!(
        "GUEST REVOKE {} pins: callback inside the pin {inside}, after it {after} (first at {first_after} us)",
        inside + after
    );
    ensure!(
        inside > 0,
        "no callback landed inside a pin: the sweep never reached the pin's end from before it"
    );
    Ok(())
}

/// Waits until the revoke armed by the last pin is over (its callback has returned).
fn wait_revoked(before: u64, what: &str) -> TestResult {
    let until = Instant::now() + SETTLE;
    while revokes_done()? <= before {
        ensure!(Instant::now() < until, "{what}: the revoke never ran");
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}
