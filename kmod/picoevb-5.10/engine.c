// SPDX-License-Identifier: GPL-2.0
/*
 * One XDMA engine's kernel services. The protocol that starts, polls, arms, judges and stops a run is the
 * shared Rust (kmod/logic/src/engine.rs, the 6.18 module's too) behind pevb_engine_transfer, pevb_engine_stop
 * and pevb_round_trip (logic.h); this file
 * owns the descriptor table, the completion and status the IRQ handler fills, and offers the protocol
 * what it runs on (pevb_plat_*: registers, the gate, the wait, a clock, sleep, the log). Offsets and bits
 * are the shared logic's (crates/picoevb-regs).
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include "picoevb.h"

static const char *const engine_name[2] = { "H2c", "C2h" };

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

/* A round trip's table of engine @idx (rust/engine_glue.rs, pevb_round_trip): -ENODEV once released. Under its lock. */
int pevb_engine_table(struct pevb_card *card, u32 idx, void **descs, size_t *ndescs, u64 *base)
{
	struct pevb_engine *e = &card->eng[idx];

	lockdep_assert_held(&e->lock);
	if (!e->table)
		return -ENODEV;
	*descs = e->table;
	*ndescs = PEVB_TABLE_LEN;
	*base = e->table_dma;
	return 0;
}

/*
 * Moves @len bytes between @segs (from @host_off) and FPGA RAM at @fpga. Under e->lock and a request. With
 * @card_time, the engine's run time by the card's clock goes to *@card_ns (NULL: nowhere).
 */
int pevb_transfer(struct pevb_card *card, struct pevb_engine *e, const struct pevb_seg *segs, size_t nsegs,
		  u64 host_off, u64 fpga, u64 len, bool card_time, u64 *card_ns)
{
	lockdep_assert_held(&e->lock);
	if (!e->table)
		return -ENODEV;
	return pevb_engine_transfer(card, e->idx, segs, nsegs, host_off, fpga, len, e->table, PEVB_TABLE_LEN,
				    e->table_dma, card_time, card_ns);
}

/* ---- What the protocol runs on (rust/engine_glue.rs); @idx is 0 or 1 (checked there). ---- */

u32 pevb_plat_rd(struct pevb_card *card, u32 off)
{
	return pevb_rd(card, off);
}

void pevb_plat_wr(struct pevb_card *card, u32 off, u32 v)
{
	/* iowrite32 orders the descriptor writes in coherent memory before the write that sets Run. */
	pevb_wr(card, off, v);
}

/* Held while a chain is programmed: removal sets gone under it and then stops the engines. */
int pevb_plat_gate_enter(struct pevb_card *card)
{
	spin_lock(&card->gate);
	if (card->gone || card->wedged) {
		int ret = card->gone ? -ENODEV : -EIO;

		spin_unlock(&card->gate);
		return ret;
	}
	return 0;
}

void pevb_plat_gate_exit(struct pevb_card *card)
{
	spin_unlock(&card->gate);
}

u32 pevb_plat_status(struct pevb_card *card, u32 idx)
{
	return atomic_read(&card->eng[idx].status);
}

void pevb_plat_add_status(struct pevb_card *card, u32 idx, u32 bits)
{
	atomic_or(bits, &card->eng[idx].status);
}

void pevb_plat_rearm(struct pevb_card *card, u32 idx)
{
	atomic_set(&card->eng[idx].status, 0);
	reinit_completion(&card->eng[idx].done);
}

/*
 * Killable, not interruptible: only a dying process gives up the wait, and the protocol then stops the
 * engine (shown idle, or the card wedged) before the caller unpins anything. >0 completed, 0 timed out,
 * <0 killed.
 */
int pevb_plat_wait(struct pevb_card *card, u32 idx, u32 ms)
{
	long left = wait_for_completion_killable_timeout(&card->eng[idx].done, msecs_to_jiffies(ms));

	return left > 0 ? 1 : left < 0 ? -1 : 0;
}

u64 pevb_plat_now_us(void)
{
	return ktime_to_us(ktime_get());
}

void pevb_plat_sleep_us(u32 us)
{
	fsleep(us);
}

/* A C2H blocked on the stream source's next record ends once the source is off (it then reads zeros). */
bool pevb_plat_unblock(struct pevb_card *card, u32 idx)
{
	return card->facts.stream && pevb_user_stream_off(card) == 0;
}

void pevb_plat_log(struct pevb_card *card, u32 idx, u32 kind, u32 a, u32 b)
{
	struct device *dev = &card->pdev->dev;
	const char *why;
	size_t len;

	switch (kind) {
	case PEVB_EV_VANISHED:
		dev_err(dev, "card stopped answering (surprise removal?)\n");
		break;
	case PEVB_EV_TIMEOUT:
		dev_err(dev, "%s engine: no completion after %u ms; engine reset\n", engine_name[idx], a);
		break;
	case PEVB_EV_FAILED:
		why = pevb_status_describe(a, &len);
		dev_err(dev, "%s engine: %.*s (status %#010x)\n", engine_name[idx], (int)len, why, a);
		break;
	case PEVB_EV_SHORT:
		dev_err(dev, "%s engine: completed %u of %u descriptors\n", engine_name[idx], a, b);
		break;
	case PEVB_EV_STILL_BUSY:
		dev_err(dev, "%s engine still busy after halt\n", engine_name[idx]);
		break;
	case PEVB_EV_SOURCE_STOPPED:
		dev_warn(dev, "%s engine: waiting on the stream source when stopped; source disabled\n",
			 engine_name[idx]);
		break;
	default:
		dev_warn(dev, "%s engine: release after stop: %d\n", engine_name[idx], -(int)a);
	}
}
