// SPDX-License-Identifier: GPL-2.0
/*
 * One XDMA engine: runs the chains the Rust logic builds (pevb_chain_build) with a timeout, judges the end
 * with the logic's status decoding, and always stops the engine and shows it idle before the caller may
 * unpin or rewrite the table. The register sequence is kmod/picoevb/engine.rs's and run.rs's, register by
 * register; offsets and bits come from PEVB_REGS (crates/picoevb-regs). A run is woken by its interrupt,
 * or polled (the pipeline's H2C, duplex.c) and armed only if still busy after POLL_READS status reads.
 */
#include <linux/dma-mapping.h>
#include <linux/iopoll.h>
#include <linux/jiffies.h>
#include "picoevb.h"

#define REGS PEVB_REGS
#define ER(e) (PEVB_REGS.engine[(e)->idx])

static const char *const engine_name[2] = { "H2c", "C2h" };

/* Status reads a polled run gets before its interrupt is armed (run.rs): about 32 us over Gen2 x1. */
#define POLL_READS 32

int pevb_engine_init(struct pevb_card *card, struct pevb_engine *e, int idx)
{
	e->idx = idx;
	e->table = dma_alloc_coherent(&card->pdev->dev, PAGE_SIZE, &e->table_dma, GFP_KERNEL);
	if (!e->table)
		return -ENOMEM;
	init_completion(&e->done);
	atomic_set(&e->status, 0);
	return 0;
}

/* At unbind, once no request uses the engine. */
void pevb_engine_release_table(struct pevb_card *card, struct pevb_engine *e)
{
	mutex_lock(&e->lock);
	if (e->table)
		dma_free_coherent(&card->pdev->dev, PAGE_SIZE, e->table, e->table_dma);
	e->table = NULL;
	mutex_unlock(&e->lock);
}

/* From the IRQ handler, with the status it read for this engine. */
void pevb_engine_signal(struct pevb_engine *e, u32 status)
{
	atomic_or(status, &e->status);
	complete(&e->done);
}

/* How long a chain may take: far above the Gen2 x1 ceiling even under emulation (engine.rs). */
static unsigned int timeout_ms(u64 bytes)
{
	return min_t(u64, 2000 + bytes / 4096, 60000);
}

/*
 * Stops the engine the way PG195 and NVIDIA's teardown do: clear Run, halt descriptor fetching, wait for
 * busy to drop, clear the status. Returns whether the engine was shown idle.
 */
bool pevb_engine_stop(struct pevb_card *card, struct pevb_engine *e)
{
	u32 ch = ER(e).channel, st;
	bool idle;

	pevb_wr(card, ch + REGS.ch_control_w1c, REGS.ctrl_run);
	pevb_wr(card, ch + REGS.ch_int_mask, 0);
	pevb_wr(card, REGS.irq_chan_en_w1c, ER(e).irq_bit);
	pevb_wr(card, REGS.sgc_halt_w1s, ER(e).halt_bit);
	/* All ones (the card is gone) reads busy: not shown idle. */
	idle = !readl_poll_timeout(card->bar_dma + ch + REGS.ch_status, st, !(st & REGS.stat_busy),
				   1000, 100000);
	pevb_wr(card, REGS.sgc_halt_w1c, ER(e).halt_bit);
	pevb_rd(card, ch + REGS.ch_status_rc);
	if (!idle)
		dev_err(&card->pdev->dev, "%s engine still busy after halt\n", engine_name[e->idx]);
	return idle;
}

/* After a completed chain: clear Run and the interrupt mask; whether the engine then reads idle. */
static bool clear_run(struct pevb_card *card, struct pevb_engine *e)
{
	u32 ch = ER(e).channel;

	pevb_wr(card, ch + REGS.ch_control_w1c, REGS.ctrl_run);
	pevb_wr(card, ch + REGS.ch_int_mask, 0);
	return !(pevb_rd(card, ch + REGS.ch_status) & REGS.stat_busy);
}

/*
 * Programs the chain and sets Run, last, under the gate: removal either sees it started or prevents it.
 * With @irq its interrupt is armed.
 */
static int start(struct pevb_card *card, struct pevb_engine *e, const struct pevb_chain *c, bool irq)
{
	u32 ch = ER(e).channel, sg = ER(e).sgdma;
	int ret = 0;

	spin_lock(&card->gate);
	if (card->gone) {
		ret = -ENODEV;
	} else if (card->wedged) {
		ret = -EIO;
	} else {
		pevb_wr(card, sg + REGS.sg_desc_lo, lower_32_bits(c->first));
		pevb_wr(card, sg + REGS.sg_desc_hi, upper_32_bits(c->first));
		pevb_wr(card, sg + REGS.sg_desc_adj, c->first_adj);
		pevb_rd(card, ch + REGS.ch_status_rc);
		pevb_wr(card, ch + REGS.ch_int_mask, irq ? REGS.int_mask : 0);
		if (irq)
			pevb_wr(card, REGS.irq_chan_en_w1s, ER(e).irq_bit);
		/* iowrite32 orders the descriptor writes in coherent memory before this MMIO write. */
		pevb_wr(card, ch + REGS.ch_control, REGS.ctrl_start);
	}
	spin_unlock(&card->gate);
	return ret;
}

/* @err, unless the card has left the bus: then ENODEV (an engine of a vanished card reads busy, all ones). */
static int removal_or(struct pevb_card *card, int err)
{
	return pevb_card_gone(card) || pevb_card_vanished(card) ? -ENODEV : err;
}

/* What the run came to, judged before the engine is stopped. */
static int outcome(struct pevb_card *card, struct pevb_engine *e, const struct pevb_chain *c,
		   bool completed, u64 bytes)
{
	u32 st, n;
	size_t len;
	const char *why;
	int ret;

	if (pevb_card_gone(card))
		return -ENODEV;
	if (!completed) {
		if (pevb_card_vanished(card)) {
			dev_err(&card->pdev->dev, "card stopped answering (surprise removal?)\n");
			return -ENODEV;
		}
		dev_err(&card->pdev->dev, "%s engine: no completion after %u ms; engine reset\n",
			engine_name[e->idx], timeout_ms(bytes));
		return -ETIMEDOUT;
	}
	st = atomic_read(&e->status);
	ret = pevb_status_outcome(st);
	if (ret) {
		/* A card that left the bus mid-run reads all ones, error bits included: that is removal. */
		if (pevb_card_vanished(card)) {
			dev_err(&card->pdev->dev, "card stopped answering (surprise removal?)\n");
			return -ENODEV;
		}
		why = pevb_status_describe(st, &len);
		dev_err(&card->pdev->dev, "%s engine: %.*s (status %#010x)\n", engine_name[e->idx],
			(int)len, why, st);
		return ret;
	}
	n = pevb_rd(card, ER(e).channel + REGS.ch_completed);
	if (n != c->count) {
		dev_err(&card->pdev->dev, "%s engine: completed %u of %u descriptors\n",
			engine_name[e->idx], n, c->count);
		return removal_or(card, -EIO);
	}
	return 0;
}

/* The one way out of a run: the engine is stopped and shown idle, or the card is wedged. */
static int finish(struct pevb_card *card, struct pevb_engine *e, int result)
{
	bool idle = result ? pevb_engine_stop(card, e) :
			     (clear_run(card, e) || pevb_engine_stop(card, e));

	if (idle)
		return result;
	pevb_card_wedge(card);
	return result == -ENODEV ? -ENODEV : removal_or(card, -EIO);
}

/*
 * Builds a chain of up to @len bytes of the host buffer @segs (from byte @host_off) to or from FPGA RAM at
 * @fpga (as many as the table holds: r->c.bytes) and starts it. The caller holds e->lock; the run holds the
 * table until pevb_run_finish or pevb_run_cancel, so nothing rewrites descriptors the engine may fetch.
 */
int pevb_run_start(struct pevb_card *card, struct pevb_engine *e, const struct pevb_seg *segs, size_t nsegs,
		   u64 host_off, u64 fpga, u64 len, bool poll, struct pevb_run *r)
{
	int ret;

	lockdep_assert_held(&e->lock);
	if (!e->table)
		return -ENODEV;
	/* A wedged engine may still fetch descriptors: its table is never written again. */
	if (pevb_card_wedged(card))
		return -EIO;
	ret = pevb_chain_build(e->idx == 1, segs, nsegs, host_off, fpga, len, e->table, PEVB_TABLE_LEN,
			       e->table_dma, &r->c);
	if (ret)
		return ret;
	r->e = e;
	r->poll = poll;
	r->completed = false;
	r->killed = false;
	atomic_set(&e->status, 0);
	reinit_completion(&e->done);
	return start(card, e, &r->c, !poll);
}

/* Reads the status of an unarmed run up to POLL_READS times: whether it ended, its bits kept in e->status. */
static bool poll_status(struct pevb_card *card, struct pevb_engine *e)
{
	u32 st;
	int i;

	for (i = 0; i < POLL_READS; i++) {
		st = pevb_rd(card, ER(e).channel + REGS.ch_status_rc);
		if (st == U32_MAX)	/* the card may be gone: the armed wait and its timeout decide */
			return false;
		atomic_or(st & ~REGS.stat_busy, &e->status);
		if (pevb_status_ended(st)) {
			/* Busy as last read: finish needs it to tell whether the engine is idle. */
			atomic_or(st & REGS.stat_busy, &e->status);
			return true;
		}
	}
	return false;
}

/*
 * Waits until the chain ended or its timeout passed (or removal woke us). A polled run still busy gets its
 * interrupt armed; the channel interrupt is status & mask, so a run that ends meanwhile still interrupts.
 * Killable, not interruptible: only a dying process gives up the wait, and pevb_run_finish then stops the
 * engine (shown idle, or the card wedged) before the caller unpins anything, as after a timeout.
 */
void pevb_run_wait(struct pevb_card *card, struct pevb_run *r)
{
	struct pevb_engine *e = r->e;
	long left;

	if (r->poll) {
		if (poll_status(card, e)) {
			r->completed = true;
			return;
		}
		pevb_wr(card, ER(e).channel + REGS.ch_int_mask, REGS.int_mask);
		pevb_wr(card, REGS.irq_chan_en_w1s, ER(e).irq_bit);
	}
	left = wait_for_completion_killable_timeout(&e->done, msecs_to_jiffies(timeout_ms(r->c.bytes)));
	r->completed = left > 0;
	r->killed = left < 0;
}

/* Judges the run (after pevb_run_wait) and ends it: 0 (r->c.bytes moved) or why not. */
int pevb_run_finish(struct pevb_card *card, struct pevb_run *r)
{
	/* Killed: not judged (the process is dying), but stopped like any other run. */
	if (r->killed)
		return finish(card, r->e, pevb_card_gone(card) ? -ENODEV : -EINTR);
	return finish(card, r->e, outcome(card, r->e, &r->c, r->completed, r->c.bytes));
}

/* Stops a run nobody judges (the request failed elsewhere): 0 if shown idle, else the card is wedged. */
int pevb_run_cancel(struct pevb_card *card, struct pevb_run *r)
{
	if (pevb_engine_stop(card, r->e))
		return 0;
	pevb_card_wedge(card);
	return removal_or(card, -EIO);
}

/*
 * Moves @len bytes between the host buffer @segs (from byte @host_off) and FPGA RAM at @fpga, as few
 * chains as one table allows. The caller holds e->lock and an active request.
 */
int pevb_engine_transfer(struct pevb_card *card, struct pevb_engine *e, const struct pevb_seg *segs,
			 size_t nsegs, u64 host_off, u64 fpga, u64 len)
{
	struct pevb_run r;
	u64 done = 0;
	int ret;

	while (done < len) {
		ret = pevb_run_start(card, e, segs, nsegs, host_off + done, fpga + done, len - done, false, &r);
		if (ret)
			return ret;
		pevb_run_wait(card, &r);
		ret = pevb_run_finish(card, &r);
		if (ret)
			return ret;
		done += r.c.bytes;
	}
	return 0;
}
