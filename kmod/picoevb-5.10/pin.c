// SPDX-License-Identifier: GPL-2.0
/*
 * Pinning user memory: the 6.18 module's own source (pin, map, segments, syncs, unpin), checked against
 * this build's prototypes, plus what only this glue keeps in C: the wedged card's quarantine list and the
 * page-frame lists of the overlap rules (6.18 keeps both in Rust).
 */
#include <linux/sort.h>
#include "picoevb.h"
#include "../picoevb/pin.c"

/* Keeps a pin on @q until pevb_pin_release_all(): its engine was not shown idle (the card is wedged). */
void pevb_pin_park(struct list_head *q, struct pevb_pin *p)
{
	pevb_pin_quarantined(p);
	list_add_tail(&p->parked, q);
}

void pevb_pin_release_all(struct list_head *q)
{
	struct pevb_pin *p, *n;

	list_for_each_entry_safe(p, n, q, parked) {
		list_del(&p->parked);
		pevb_unpin_user(p);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The pages a pin holds, by page frame number, sorted (the per-card overlap rules key on them). */
int pevb_pin_frames(struct pevb_pin *p, u64 **out, size_t *n)
{
	u64 *f = kvmalloc_array(p->npages, sizeof(*f), GFP_KERNEL);
	unsigned long i;

	if (!f)
		return -ENOMEM;
	for (i = 0; i < p->npages; i++)
		f[i] = page_to_pfn(p->pages[i]);
	sort(f, p->npages, sizeof(*f), cmp_u64, NULL);
	*out = f;
	*n = p->npages;
	return 0;
}

/*
 * The pages [first, end) of the caller's memory map now (pevb_user_pfns), sorted, or none (*n = 0) where
 * they are not writable struct pages.
 */
int pevb_user_frames(u64 first, u64 end, u64 **out, size_t *n)
{
	size_t want = (end - first) >> PAGE_SHIFT;
	u64 *f = kvmalloc_array(want, sizeof(*f), GFP_KERNEL);

	*out = NULL;
	*n = 0;
	if (!f)
		return -ENOMEM;
	if (pevb_user_pfns(first, end - first, f, want)) {
		kvfree(f);
		return 0;
	}
	sort(f, want, sizeof(*f), cmp_u64, NULL);
	*out = f;
	*n = want;
	return 0;
}
