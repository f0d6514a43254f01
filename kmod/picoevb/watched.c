// SPDX-License-Identifier: GPL-2.0
/*
 * A watched pin: a long-term pin of the caller's memory (pin.c's pevb_pin_long) under an mmu interval
 * notifier, charged to the owner's RLIMIT_MEMLOCK. What the registration caches of both builds keep (6.18:
 * helpers.c's cached pins; 5.10: regcache.c's). One source for both builds (the 5.10 module includes it).
 *
 * The notifier is inserted before the pages are pinned, so a change between the two is seen, not missed.
 * It only bumps the sequence (the pin is stale from then on) and queues the owner's @changed work: it may
 * run where sleeping is not allowed, and a notifier must not be removed from inside its own callback, so
 * pevb_watched_end() runs in the owner's work item or at close, never in the callback.
 */
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include "watched.h"

int pevb_pin_long(struct device *dev, u64 uaddr, u64 len, struct pevb_pin **out);
void pevb_pin_drop(struct pevb_pin *p, bool dirty);

#ifdef CONFIG_MMU_NOTIFIER
struct pevb_watched {
	struct pevb_pin *pin;
	struct mmu_interval_notifier mn;
	unsigned long seq;		/* the notifier's sequence when pinned */
	unsigned long charged;		/* pages charged to mn.mm->pinned_vm */
	struct work_struct *changed;	/* the owner's, queued by the notifier */
};

/* Tries when the memory changes while it is being pinned; then the caller pins it for once only. */
#define PEVB_WATCHED_TRIES 3

/*
 * Long-term pins count against the owner's RLIMIT_MEMLOCK through mm->pinned_vm, as RDMA's umem does
 * (ib_umem_get): over the limit without CAP_IPC_LOCK is -ENOMEM, and the request is then served by a
 * one-off pin instead.
 */
static int pevb_watched_charge(struct mm_struct *mm, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 now = atomic64_add_return(npages, &mm->pinned_vm);

	if (now > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	return 0;
}

static bool pevb_watched_invalidate(struct mmu_interval_notifier *mn, const struct mmu_notifier_range *range,
				    unsigned long cur_seq)
{
	struct pevb_watched *w = container_of(mn, struct pevb_watched, mn);

	mmu_interval_set_seq(mn, cur_seq);
	schedule_work(w->changed);
	return true;
}

static const struct mmu_interval_notifier_ops pevb_watched_ops = {
	.invalidate = pevb_watched_invalidate,
};

/* Pins [uaddr, uaddr + len) of the caller's memory, watched; @changed must outlive pevb_watched_end(). */
int pevb_watched_new(struct device *dev, u64 uaddr, u64 len, struct work_struct *changed,
		     struct pevb_watched **out)
{
	unsigned long start, end;
	struct pevb_watched *w;
	int ret, i;

	if (!len || uaddr + len < uaddr)
		return -EINVAL;
	start = uaddr & PAGE_MASK;
	end = PAGE_ALIGN(uaddr + len);
	if (end <= start || !current->mm)
		return -EFAULT;
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return -ENOMEM;
	w->changed = changed;
	ret = mmu_interval_notifier_insert(&w->mn, current->mm, start, end - start, &pevb_watched_ops);
	if (ret)
		goto err_free;
	ret = pevb_watched_charge(current->mm, (end - start) >> PAGE_SHIFT);
	if (ret)
		goto err_remove;
	w->charged = (end - start) >> PAGE_SHIFT;
	for (i = 0; i < PEVB_WATCHED_TRIES; i++) {
		unsigned long seq = mmu_interval_read_begin(&w->mn);

		ret = pevb_pin_long(dev, uaddr, len, &w->pin);
		if (ret)
			goto err_uncharge;
		/* Breaking copy-on-write for FOLL_WRITE changes the mapping once: the next try is stable. */
		if (!mmu_interval_check_retry(&w->mn, seq)) {
			w->seq = seq;
			*out = w;
			return 0;
		}
		pevb_pin_drop(w->pin, false);
	}
	ret = -EAGAIN;
err_uncharge:
	atomic64_sub(w->charged, &current->mm->pinned_vm);
err_remove:
	mmu_interval_notifier_remove(&w->mn);
err_free:
	kfree(w);
	return ret;
}

/* Whether the memory changed since it was pinned: the pin no longer shows what the address maps. */
bool pevb_watched_stale(struct pevb_watched *w)
{
	return mmu_interval_check_retry(&w->mn, w->seq);
}

/* The pin, still pinned and mapped until the owner drops what pevb_watched_end() returns. */
struct pevb_pin *pevb_watched_pin(struct pevb_watched *w)
{
	return w->pin;
}

/*
 * Stops watching (waiting for an invalidation in progress), uncharges, frees @w, and returns its pin for the
 * owner to unmap and unpin. Never from the notifier's callback, nor on a thread that may hold what such an
 * invalidation waits for.
 */
struct pevb_pin *pevb_watched_end(struct pevb_watched *w)
{
	struct pevb_pin *pin = w->pin;

	/* The notifier holds the mm (mmgrab) until it is removed. */
	atomic64_sub(w->charged, &w->mn.mm->pinned_vm);
	mmu_interval_notifier_remove(&w->mn);
	kfree(w);
	return pin;
}
#endif
