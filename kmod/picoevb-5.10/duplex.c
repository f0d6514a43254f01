// SPDX-License-Identifier: GPL-2.0
/*
 * The round trip (H2C2H) as a full-duplex pipeline through the card RAM, as kmod/picoevb/duplex.rs: the
 * schedule is the shared logic's (pipeline.rs, through pevb_pipeline_step), this runs its steps on the two
 * engines. Each step starts H2C of one chunk and C2H of the previous one on disjoint halves of the RAM and
 * ends both before the next step reuses a half; which run is polled and which interrupts is the logic's
 * (pevb_pipeline_polled): the PicoEVB's chunks are polled, so a round trip normally costs no interrupt,
 * at most 2n for n chunks if every spin gives up.
 */
#include "picoevb.h"

/* Chunks are whole pages (as the schedule plans them), so no TLP or descriptor is split needlessly. */
#define CHUNK_ALIGN 4096

/*
 * Waits for and ends both runs, C2H first (it ends first; when chunks are large its interrupt is the one
 * armed). If one fails the other is still ended (stopped, if not yet judged) before the first error returns: no engine touches the
 * caller's pages after the request.
 */
static int end_both(struct pevb_card *card, struct pevb_run *h, struct pevb_run *c)
{
	int ret;

	if (c) {
		pevb_run_wait(card, c);
		ret = pevb_run_finish(card, c);
		if (ret) {
			if (h)
				pevb_run_cancel(card, h);	/* wedges the card if H2C cannot be stopped */
			return ret;
		}
	}
	if (h) {
		pevb_run_wait(card, h);
		return pevb_run_finish(card, h);
	}
	return 0;
}

/* One step; a move needing more descriptors than a table holds runs as several chains, ended in pairs. */
static int run_step(struct pevb_card *card, const struct pevb_seg *src, size_t nsrc, const struct pevb_seg *dst,
		    size_t ndst, struct pevb_move h, struct pevb_move c)
{
	struct pevb_run hr, cr;
	u32 polled;
	int ret;

	while (h.len || c.len) {
		polled = pevb_pipeline_polled(h.len, c.len);
		if (h.len) {
			ret = pevb_run_start(card, &card->eng[0], src, nsrc, h.offset, h.ram, h.len, polled & 1, &hr);
			if (ret)
				return ret;
		}
		if (c.len) {
			ret = pevb_run_start(card, &card->eng[1], dst, ndst, c.offset, c.ram, c.len, polled & 2, &cr);
			if (ret) {
				if (h.len)
					pevb_run_cancel(card, &hr);
				return ret;
			}
		}
		ret = end_both(card, h.len ? &hr : NULL, c.len ? &cr : NULL);
		if (ret)
			return ret;
		if (h.len) {
			h.offset += hr.s.bytes;
			h.ram += hr.s.bytes;
			h.len -= hr.s.bytes;
		}
		if (c.len) {
			c.offset += cr.s.bytes;
			c.ram += cr.s.bytes;
			c.len -= cr.s.bytes;
		}
	}
	return 0;
}

/*
 * Copies @len bytes from @src (from offset @src_at in its segments) through the card RAM to @dst (from
 * @dst_at). The caller holds both engines (H2C first).
 */
int pevb_round_trip(struct pevb_card *card, const struct pevb_seg *src, size_t nsrc, u64 src_at,
		    const struct pevb_seg *dst, size_t ndst, u64 dst_at, u64 len)
{
	struct pevb_step st;
	u64 s;
	int ret;

	lockdep_assert_held(&card->eng[0].lock);
	lockdep_assert_held(&card->eng[1].lock);
	for (s = 0;; s++) {
		ret = pevb_pipeline_step(len, card->facts.ram_size, CHUNK_ALIGN, s, &st);
		if (ret)
			return ret > 0 ? 0 : ret;
		st.h2c.offset += src_at;
		st.c2h.offset += dst_at;
		ret = run_step(card, src, nsrc, dst, ndst, st.h2c, st.c2h);
		if (ret)
			return ret;
	}
}
