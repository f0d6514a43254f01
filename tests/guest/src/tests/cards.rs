//! Several cards at once (`gdr-bench run --cards 2`): each its own node, index and engines, DMAs on both
//! running concurrently and both correct.

use std::thread;

use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, round_trip, test};
use crate::dev::Device;
use crate::rng::Rng;

/// The second card's node.
pub const SECOND: &str = "/dev/picoevb1";

pub fn register(v: &mut Vec<Test>) {
    v.push(test("cards::two_cards_at_once", two_cards).needs(Needs::SecondCard));
}

fn two_cards(ctx: &mut Ctx) -> TestResult {
    let second = ctx_err("open the second card", Device::open(SECOND))?;
    let (a, b) = (
        ctx_err("ABI_INFO card 0", ctx.dev.abi_info())?,
        ctx_err("ABI_INFO card 1", second.abi_info())?,
    );
    ensure!(
        (a.card_index, b.card_index) == (0, 1),
        "card indexes {} and {}",
        a.card_index,
        b.card_index
    );
    // Different data through each card at the same time: a mixed-up engine or BRAM shows as a mismatch.
    let (s0, s1) = (ctx.rng.next_u64(), ctx.rng.next_u64());
    let dev0 = ctx.dev;
    thread::scope(|s| {
        let t0 = s.spawn(move || -> TestResult {
            let mut rng = Rng::new(s0);
            for _ in 0..8 {
                round_trip(dev0, &mut rng, 65536, 0, 1, 2)?;
            }
            Ok(())
        });
        let t1 = s.spawn(|| -> TestResult {
            let mut rng = Rng::new(s1);
            for _ in 0..8 {
                round_trip(&second, &mut rng, 65536, 0, 3, 5)?;
            }
            Ok(())
        });
        let r0 = t0
            .join()
            .map_err(|_| "card 0 thread panicked".to_string())?;
        let r1 = t1
            .join()
            .map_err(|_| "card 1 thread panicked".to_string())?;
        r0.map_err(|e| format!("card 0: {e}"))?;
        r1.map_err(|e| format!("card 1: {e}"))
    })
}
