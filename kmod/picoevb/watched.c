// SPDX-License-Identifier: GPL-2.0
/*
 * A watched pin: a long-term pin of the caller's memory (pin.c's pevb_pin_long) under an mmu interval
 * notifier, charged to the owner's RLIMIT_MEMLOCK. What the registration caches of both builds keep (cpin.c's
 * cached pins) and what a pinned host surface is (p2p.c, PIN_HOST). One
 * source for both builds (the 5.10 module includes it).
 *
 * The notifier is inserted before the pages are pinned, so a change between the two is seen, not missed.
 * It bumps the sequence (the pin is stale from then on) and tells the owner, one of two ways:
 *   - a cache's: it queues the owner's @changed work, and nothing else. It may run where sleeping is not
 *     allowed; the sweep comes later.
 *   - a surface's: it calls @gone(owner), which may sleep (it waits for the DMAs using the memory and drops
 *     the device's mapping), so a non-blockable invalidation (the OOM reaper, process_mrelease) is refused
 *     and left to exit_mmap. Changes that keep every page where it is (mprotect, NUMA hinting, fork's
 *     write-protect, soft-dirty) are let through without a word: the pages are pinned, and the device's
 *     mapping of them stays right. Anything else (munmap, a remap, exit, migration) ends the surface.
 * A notifier must not be removed from inside its own callback, so pevb_watched_end() runs in the owner's
 * work item or at close, never in the callback.
 */
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include "pin.h"
#include "watched.h"

#if PEVB_HAVE_WATCHED
struct pevb_watched {
	struct pevb_pin *pin;
	struct mmu_interval_notifier mn;
	unsigned long seq;		/* the notifier's sequence when pinned */
	unsigned long charged;		/* pages charged to mn.mm->pinned_vm */
	struct work_struct *changed;	/* a cache's: queued by the notifier */
	void (*gone)(void *owner);	/* a surface's: called by the notifier, may sleep */
	void *owner;
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

/* An invalidation that leaves every page mapped where it was: only protections or tracking bits change. */
static bool pevb_watched_keeps_pages(const struct mmu_notifier_range *range)
{
	switch (range->event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
		return true;
	default:
		return false;
	}
}

static bool pevb_watched_invalidate(struct mmu_interval_notifier *mn, const struct mmu_notifier_range *range,
				    unsigned long cur_seq)
{
	struct pevb_watched *w = container_of(mn, struct pevb_watched, mn);

	if (w->gone) {
		if (!mmu_notifier_range_blockable(range))
			return false;
		if (pevb_watched_keeps_pages(range))
			return true;
	}
	/* Before the owner hears of it: an owner still pinning sees the pin stale (p2p.c relies on it). */
	mmu_interval_set_seq(mn, cur_seq);
	if (w->gone)
		w->gone(w->owner);
	else
		schedule_work(w->changed);
	return true;
}

static const struct mmu_interval_notifier_ops pevb_watched_ops = {
	.invalidate = pevb_watched_invalidate,
};

/*
 * Inserts the notifier and pins under it: @changed queued (a cache's) or @gone(@owner) called (a
 * surface's) when the memory changes.
 */
static int pevb_watched_start(struct device *dev, u64 uaddr, u64 len, struct work_struct *changed,
			      void (*gone)(void *owner), void *owner, struct pevb_watched **out)
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
	w->gone = gone;
	w->owner = owner;
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

/* Pins [uaddr, uaddr + len) of the caller's memory, watched; @changed must outlive pevb_watched_end(). */
int pevb_watched_new(struct device *dev, u64 uaddr, u64 len, struct work_struct *changed,
		     struct pevb_watched **out)
{
	return pevb_watched_start(dev, uaddr, len, changed, NULL, NULL, out);
}

/*
 * Pins [uaddr, uaddr + len) of the caller's memory, watched for its going away: @gone(@owner) runs once the
 * memory is unmapped (see the top of this file), from the invalidation, possibly before this returns. Until
 * pevb_watched_end().
 */
int pevb_watched_new_gone(struct device *dev, u64 uaddr, u64 len, void (*gone)(void *owner), void *owner,
			  struct pevb_watched **out)
{
	return pevb_watched_start(dev, uaddr, len, NULL, gone, owner, out);
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
#else
int pevb_watched_new(struct device *dev, u64 uaddr, u64 len, struct work_struct *changed,
		     struct pevb_watched **out)
{
	return -EOPNOTSUPP;
}

int pevb_watched_new_gone(struct device *dev, u64 uaddr, u64 len, void (*gone)(void *owner), void *owner,
			  struct pevb_watched **out)
{
	return -EOPNOTSUPP;
}

/* Never reached: no watched pin exists. */
bool pevb_watched_stale(struct pevb_watched *w)
{
	return true;
}

struct pevb_pin *pevb_watched_pin(struct pevb_watched *w)
{
	return NULL;
}

struct pevb_pin *pevb_watched_end(struct pevb_watched *w)
{
	return NULL;
}
#endif
