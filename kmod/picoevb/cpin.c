// SPDX-License-Identifier: GPL-2.0
/*
 * Cached pins and the work item that releases them: the lifetime rules of both builds' registration caches,
 * written once (the 6.18 module compiles this file, the 5.10 one includes it). The cache (6.18 regcache.rs,
 * 5.10 regcache.c) decides what is cached and holds each pin as long as a table slot or a request uses it;
 * here a pin is made, watched and, once its last holder handed it over, released off the request thread.
 */
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include "cpin.h"
#include "pin.h"
#include "watched.h"

/*
 * A work item that calls back into the registration cache (6.18: regcache.rs, 5.10: regcache.c): its sweep
 * of invalidated buffers. It also
 * releases the cached pins whose last holder let go (@dead): a request thread must never remove an mmu
 * notifier itself, because mmu_interval_notifier_remove() waits for an invalidation in progress, and that
 * invalidation may be waiting (in the GPU provider's callback) for a surface this very request holds.
 *
 * A pin handed over stays DMA-mapped until its release is over, which can take long (the notifier's removal
 * waits for an invalidation in progress in its address space), and close may be releasing it on its own
 * thread: so it stays on @dead, then on @releasing, until it is unmapped, where PIN_CUDA can see it and
 * wait (pevb_work_wait_pages) before the provider maps the same pages.
 */
struct pevb_work {
	struct work_struct work;
	void (*fn)(void *data);
	void *data;
	spinlock_t lock;		/* dead, releasing */
	struct list_head dead;		/* struct pevb_cpin.dead_link, to release */
	struct list_head releasing;	/* taken off dead by a release in progress, still mapped */
	wait_queue_head_t released;	/* a pin of @releasing was unmapped */
};

static void pevb_cpin_release_dead(struct pevb_work *w);

static void pevb_work_run(struct work_struct *work)
{
	struct pevb_work *w = container_of(work, struct pevb_work, work);

	pevb_cpin_release_dead(w);
	w->fn(w->data);
	pevb_cpin_release_dead(w);	/* what the sweep dropped */
}

struct pevb_work *pevb_work_new(void (*fn)(void *data), void *data)
{
	struct pevb_work *w = kzalloc(sizeof(*w), GFP_KERNEL);

	if (!w)
		return NULL;
	INIT_WORK(&w->work, pevb_work_run);
	w->fn = fn;
	w->data = data;
	spin_lock_init(&w->lock);
	INIT_LIST_HEAD(&w->dead);
	INIT_LIST_HEAD(&w->releasing);
	init_waitqueue_head(&w->released);
	return w;
}

/*
 * Releases every pin handed to @w so far, on this thread, then waits for a running sweep: after this, no
 * pin that was dropped before the call is still mapped. Not from a request thread (see struct pevb_work).
 */
void pevb_work_drain(struct pevb_work *w)
{
	if (!w)
		return;
	pevb_cpin_release_dead(w);
	flush_work(&w->work);
}

static bool pevb_work_holds(struct pevb_work *w, const u64 *frames, unsigned long n);

/*
 * Waits until no pin handed to @w is still DMA-mapped on any of the pages @frames (sorted), whoever
 * releases it (the work item, queued when it was handed over, or close on its own thread), without
 * releasing any on this thread. PIN_CUDA calls it before the provider maps those pages.
 */
void pevb_work_wait_pages(struct pevb_work *w, const u64 *frames, unsigned long n)
{
	if (w && n)
		wait_event(w->released, !pevb_work_holds(w, frames, n));
}

/*
 * No request runs and no live cached pin is left, but pins handed to @w and not yet released still have
 * their notifiers, which may queue @w until removed. So: release them here first (each notifier removal
 * waits for its callback in progress), then cancel, which waits for a running call (it removes the
 * notifiers of the pins it took before it returns). After that nothing can queue @w, and it is freed.
 */
void pevb_work_free(struct pevb_work *w)
{
	if (!w)
		return;
	pevb_cpin_release_dead(w);
	cancel_work_sync(&w->work);
	kfree(w);
}

bool pevb_cpin_supported(void)
{
	return PEVB_HAVE_WATCHED;
}

#if PEVB_HAVE_WATCHED
/*
 * A cached pin: a watched pin (watched.c: long-term, charged to RLIMIT_MEMLOCK, under an mmu interval
 * notifier that queues the owner's sweep), mapped bidirectionally (one mapping serves H2C and C2H) with
 * DMA_ATTR_SKIP_CPU_SYNC: the CPU cache is handed over only around each DMA (pevb_cpin_sync), never at map
 * or unmap time. That is what makes a long-lived mapping safe next to other mappings of the same cache
 * lines (another file's cached buffer, a one-off pin): each is synced only while its own DMA runs. The
 * unpinning happens in the sweep (watched.c says why).
 */
struct pevb_cpin {
	struct pevb_watched *w;		/* freed by pevb_watched_end() at release */
	struct pevb_pin *pin;		/* w's, kept past that: releasing-list readers look at its pages */
	struct pevb_work *sweep;
	struct list_head dead_link;	/* on sweep->dead once released */
	bool dirty;
};

int pevb_cpin_new(struct device *dev, u64 uaddr, u64 len, struct pevb_work *sweep,
		  struct pevb_cpin **out)
{
	struct pevb_cpin *p = kzalloc(sizeof(*p), GFP_KERNEL);
	int ret;

	if (!p)
		return -ENOMEM;
	p->sweep = sweep;
	ret = pevb_watched_new(dev, uaddr, len, &sweep->work, &p->w);
	if (ret) {
		kfree(p);
		return ret;
	}
	p->pin = pevb_watched_pin(p->w);
	*out = p;
	return 0;
}

/* Whether the memory changed since it was pinned: the pin no longer shows what the address maps. */
bool pevb_cpin_stale(struct pevb_cpin *p)
{
	return pevb_watched_stale(p->w);
}

/* The pin itself, for its bus segments (pin.c): valid until the cached pin is released. */
struct pevb_pin *pevb_cpin_pin(struct pevb_cpin *p)
{
	return p->pin;
}

/* The request's window of a cached pin, for the device or back for the CPU: pevb_pin_sync_window (pin.c). */
void pevb_cpin_sync(struct pevb_cpin *p, u64 offset, u64 len, bool to_device, bool for_device)
{
	pevb_pin_sync_window(p->pin, offset, len, to_device, for_device);
}

/* The pages behind a cached pin, by page frame number: the driver's overlap rules key on them. */
unsigned long pevb_cpin_npages(struct pevb_cpin *p)
{
	return pevb_pin_npages(p->pin);
}

u64 pevb_cpin_pfn(struct pevb_cpin *p, unsigned long i)
{
	return pevb_pin_pfn(p->pin, i);
}

/*
 * Stops watching, unmaps and unpins a pin on @w's releasing list, and takes it off. Never from the notifier
 * callback or a request (remove waits).
 */
static void pevb_cpin_release(struct pevb_work *w, struct pevb_cpin *p)
{
	pevb_pin_unmap(pevb_watched_end(p->w));
	/* Unmapped: off the list (whose readers look at its pages) before the page array goes. */
	spin_lock(&w->lock);
	list_del(&p->dead_link);
	spin_unlock(&w->lock);
	wake_up_all(&w->released);
	pevb_pin_unpin(p->pin, p->dirty);
	kfree(p);
}

/* The last holder let go: the owner's work item (or drain/free) releases it, never the caller. */
void pevb_cpin_release_later(struct pevb_cpin *p, bool dirty)
{
	struct pevb_work *w = p->sweep;

	p->dirty = dirty;
	spin_lock(&w->lock);
	list_add_tail(&p->dead_link, &w->dead);
	spin_unlock(&w->lock);
	schedule_work(&w->work);
}

/* Releases the pins handed to @w so far, one by one: each stays listed (releasing) until it is unmapped. */
static void pevb_cpin_release_dead(struct pevb_work *w)
{
	struct pevb_cpin *p;

	for (;;) {
		spin_lock(&w->lock);
		p = list_first_entry_or_null(&w->dead, struct pevb_cpin, dead_link);
		if (p)
			list_move_tail(&p->dead_link, &w->releasing);
		spin_unlock(&w->lock);
		if (!p)
			return;
		pevb_cpin_release(w, p);
	}
}

static bool pevb_pfn_in(const u64 *frames, unsigned long n, u64 pfn)
{
	unsigned long lo = 0, hi = n;

	while (lo < hi) {
		unsigned long mid = lo + (hi - lo) / 2;

		if (frames[mid] == pfn)
			return true;
		if (frames[mid] < pfn)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static bool pevb_cpins_hold(struct list_head *list, const u64 *frames, unsigned long n)
{
	struct pevb_cpin *p;
	unsigned long i;

	list_for_each_entry(p, list, dead_link)
		for (i = 0; i < pevb_pin_npages(p->pin); i++)
			if (pevb_pfn_in(frames, n, pevb_pin_pfn(p->pin, i)))
				return true;
	return false;
}

/* Whether a pin handed to @w and not yet unmapped holds one of @frames (sorted). */
static bool pevb_work_holds(struct pevb_work *w, const u64 *frames, unsigned long n)
{
	bool held;

	spin_lock(&w->lock);
	held = pevb_cpins_hold(&w->dead, frames, n) || pevb_cpins_hold(&w->releasing, frames, n);
	spin_unlock(&w->lock);
	return held;
}
#else
struct pevb_cpin;

int pevb_cpin_new(struct device *dev, u64 uaddr, u64 len, struct pevb_work *sweep,
		  struct pevb_cpin **out)
{
	return -EOPNOTSUPP;
}

bool pevb_cpin_stale(struct pevb_cpin *p)
{
	return true;
}

struct pevb_pin *pevb_cpin_pin(struct pevb_cpin *p)
{
	return NULL;
}

void pevb_cpin_sync(struct pevb_cpin *p, u64 offset, u64 len, bool to_device, bool for_device)
{
}

void pevb_cpin_release_later(struct pevb_cpin *p, bool dirty)
{
}

static void pevb_cpin_release_dead(struct pevb_work *w)
{
}

static bool pevb_work_holds(struct pevb_work *w, const u64 *frames, unsigned long n)
{
	return false;
}

unsigned long pevb_cpin_npages(struct pevb_cpin *p)
{
	return 0;
}

u64 pevb_cpin_pfn(struct pevb_cpin *p, unsigned long i)
{
	return 0;
}
#endif
