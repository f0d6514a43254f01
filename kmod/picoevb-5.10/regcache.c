// SPDX-License-Identifier: GPL-2.0
/*
 * The registration cache of one open file ("lazy unpinning"), as kmod/picoevb/regcache.rs: host buffers stay
 * pinned and DMA-mapped between requests. What hits, what merges, what is evicted, the limits and the
 * counters are cache_policy.rs's; what the cache does with its buffers (a hit, a miss, an eviction, a sweep,
 * close) is cache_table.rs's, run by rust/cache_glue.rs (pevb_cache_*) over the services below (pevb_ct_*,
 * pevb_cbuf_*, pevb_cache_call_*). This file holds the buffers in a table with the policy's slot numbers,
 * counts their holders and keeps the card's list of caches.
 *
 * A buffer's pin is a cached pin of ../picoevb/cpin.c, as 6.18's: a watched pin (pinned FOLL_LONGTERM and
 * writable, charged to RLIMIT_MEMLOCK, under an mmu interval notifier that marks it stale and queues the
 * cache's work item), mapped bidirectionally with DMA_ATTR_SKIP_CPU_SYNC (each request syncs exactly its
 * bytes). A stale buffer never serves a request again (checked under the table lock at every hit); the work
 * item drops stale buffers from the table.
 *
 * Lifetimes: a buffer is held (kref) by its table slot and by each request using it, so dropping it from the
 * table (sweep, eviction, flush, close, removal) never unpins under a running DMA. Its last holder hands its
 * pin to the cache's work item (pevb_cpin_release_later), which releases it off the request thread and keeps
 * it listed until it is unmapped, where PIN_CUDA waits for it (pevb_work_wait_pages): cpin.c says why. A
 * cache is held by its file, by the card's list and by each buffer (a buffer quarantined on a wedged card may
 * outlive its file); its last holder releases what is left, cancels the work item and frees it.
 *
 * Locks, outermost first: card->pinlock (one PIN_CUDA or cached pin at a time checks the per-card rules and
 * pins), card->cachelock (the card's list of caches), cache->lock (the table); cpin.c's list lock is taken
 * with nothing else. The notifier takes none of them. Waits: flush_work() in close and
 * mmu_interval_read_begin() while pinning are lockdep-annotated, PIN_CUDA's wait for released pins is by
 * hand, and what they wait for is not all visible to lockdep: the work item takes only cache->lock, and
 * releasing a pin (mmu_interval_notifier_remove) waits for an invalidation in progress, whose provider free
 * callback waits by hand (wait_event, cuda.c) for the requests holding that surface; those took their host
 * pins before entering the surface and then wait for none of our locks, and their engine waits time out.
 * The module needs CONFIG_MMU_NOTIFIER anyway (p2p.c's guard), so the cache is always there.
 */
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include "picoevb.h"

struct pevb_cache {
	struct kref ref;		/* the file, the card's list, each buffer */
	struct list_head card_link;	/* card->caches, under card->cachelock, while listed */
	bool listed;
	struct list_head evict_link;	/* PIN_CUDA's list of caches to wait for, under card->pinlock */
	struct mutex lock;		/* the table: policy, buffers, closed */
	struct pevb_cbuf *bufs[PEVB_CACHE_SLOTS];
	bool closed;			/* close or card removal: nothing is cached any more */
	struct pevb_work *work;		/* cpin.c's: sweeps stale buffers, releases their pins */
	u64 policy[];			/* cache_policy::Policy: PEVB_LAYOUT.policy bytes */
};

/* A cached buffer: its pin, and who holds it. */
struct pevb_cbuf {
	struct kref ref;		/* the table's slot, each request using it */
	struct pevb_cache *cache;	/* a reference */
	struct pevb_cpin *cp;		/* cpin.c's, handed to cache->work by the last put */
	u64 *frames;			/* the pages pinned, sorted (per-card overlap rules) */
	size_t nframes;
	bool written;			/* a C2H used it: its pages are dirtied when unpinned */
};

/* A request's window [offset, offset + len) of a cached buffer (regcache.rs's CacheUse). */
struct pevb_cuse {
	struct pevb_cbuf *p;		/* a reference */
	u64 offset, len;
	bool to_device;
	struct pevb_seg *segs;		/* the window's bus segments */
	size_t nsegs;
	struct list_head parked;	/* on card->cquarantine */
};

static struct pevb_policy *policy(struct pevb_cache *c)
{
	return (struct pevb_policy *)c->policy;
}

/* ---- the table, for cache_table.rs (under c->lock but for lock and unlock) ---- */

void pevb_ct_lock(struct pevb_cache *c)
{
	mutex_lock(&c->lock);
}

void pevb_ct_unlock(struct pevb_cache *c)
{
	mutex_unlock(&c->lock);
}

struct pevb_policy *pevb_ct_policy(struct pevb_cache *c)
{
	return policy(c);
}

bool pevb_ct_closed(struct pevb_cache *c)
{
	return c->closed;
}

void pevb_ct_close(struct pevb_cache *c)
{
	c->closed = true;
}

/* The buffer in @slot (the table's reference, not a new one), or NULL. */
struct pevb_cbuf *pevb_ct_slot(struct pevb_cache *c, u32 slot)
{
	return slot < PEVB_CACHE_SLOTS ? c->bufs[slot] : NULL;
}

/* Puts @p (a reference the caller hands over, or NULL) in @slot; the old one is the caller's. */
void pevb_ct_set(struct pevb_cache *c, u32 slot, struct pevb_cbuf *p)
{
	if (!WARN_ON_ONCE(slot >= PEVB_CACHE_SLOTS))
		c->bufs[slot] = p;
}

/* ---- one cached buffer ---- */

static void cache_free(struct kref *ref)
{
	struct pevb_cache *c = container_of(ref, struct pevb_cache, ref);

	pevb_work_free(c->work);	/* releases what is left and cancels the sweep (cpin.c) */
	kfree(c);
}

static void cache_put(struct pevb_cache *c)
{
	kref_put(&c->ref, cache_free);
}

/* The last holder let go: the cache's work item (or close, or its free) releases the pin, never the caller. */
static void cbuf_last(struct kref *ref)
{
	struct pevb_cbuf *p = container_of(ref, struct pevb_cbuf, ref);
	struct pevb_cache *c = p->cache;

	pevb_cpin_release_later(p->cp, READ_ONCE(p->written));
	kvfree(p->frames);
	kfree(p);
	cache_put(c);	/* never the last here while the caller holds the table (the file holds the cache) */
}

static void cbuf_put(struct pevb_cbuf *p)
{
	kref_put(&p->ref, cbuf_last);
}

/* Whether the memory changed since it was pinned: the pin no longer shows what the address maps. */
bool pevb_cbuf_stale(struct pevb_cbuf *p)
{
	return pevb_cpin_stale(p->cp);
}

void pevb_cbuf_get(struct pevb_cbuf *p)
{
	kref_get(&p->ref);
}

/* The last put hands the pin to its cache's work item: never released on the caller's thread. */
void pevb_cbuf_put(struct pevb_cbuf *p)
{
	cbuf_put(p);
}

/* The pages @p pinned, sorted; fixed while it lives. */
const u64 *pevb_cbuf_frames(struct pevb_cbuf *p, size_t *n)
{
	*n = p->nframes;
	return p->frames;
}

/* Pins @want of the caller's memory for cache @c (a cached pin); one reference, the caller's. */
static int cbuf_new(struct device *dev, const struct pevb_range *want, struct pevb_cache *c,
		    struct pevb_cbuf **out)
{
	struct pevb_cbuf *p = kzalloc(sizeof(*p), GFP_KERNEL);
	int ret;

	if (!p)
		return -ENOMEM;
	ret = pevb_cpin_new(dev, want->addr, want->len, c->work, &p->cp);
	if (ret)
		goto err_free;
	ret = pevb_pin_frames(pevb_cpin_pin(p->cp), &p->frames, &p->nframes);
	if (ret) {
		pevb_cpin_release_later(p->cp, false);
		goto err_free;
	}
	kref_init(&p->ref);
	kref_get(&c->ref);
	p->cache = c;
	*out = p;
	return 0;
err_free:
	kfree(p);
	return ret;
}

/* ---- a request's use ---- */

/* Takes over the caller's reference to @p; hands the window to the device. */
static int use_new(struct pevb_cbuf *p, u64 offset, u64 len, bool to_device, struct pevb_cuse **out)
{
	struct pevb_cuse *u = kzalloc(sizeof(*u), GFP_KERNEL);
	const struct pevb_seg *all;
	size_t n;
	long got;

	if (!u)
		goto err;
	all = pevb_pin_segments(pevb_cpin_pin(p->cp), &n);
	u->segs = kvmalloc_array(n, sizeof(*u->segs), GFP_KERNEL);
	if (!u->segs)
		goto err;
	got = pevb_segments_window(all, n, offset, len, u->segs, n);
	if (got <= 0) {		/* the window lies inside the pin (the policy's lookup): a bug */
		WARN_ON_ONCE(1);
		goto err;
	}
	u->nsegs = got;
	u->p = p;
	u->offset = offset;
	u->len = len;
	u->to_device = to_device;
	if (!to_device)
		WRITE_ONCE(p->written, true);
	pevb_cpin_sync(p->cp, offset, len, to_device, true);
	*out = u;
	return 0;
err:
	if (u)
		kvfree(u->segs);
	kfree(u);
	cbuf_put(p);
	return -ENOMEM;
}

const struct pevb_seg *pevb_cuse_segments(struct pevb_cuse *u, size_t *n)
{
	*n = u->nsegs;
	return u->segs;
}

/* Ends a use: after a C2H, hands the window back to the CPU. From a request thread: never releases. */
void pevb_cuse_end(struct pevb_cuse *u)
{
	if (!u->to_device)
		pevb_cpin_sync(u->p->cp, u->offset, u->len, false, false);
	kvfree(u->segs);
	cbuf_put(u->p);
	kfree(u);
}

/* Keeps a use until pevb_cuse_release_all(): its engine was not shown idle (the card is wedged). */
void pevb_cuse_park(struct list_head *q, struct pevb_cuse *u)
{
	list_add_tail(&u->parked, q);
}

/* Card removal, once bus mastering is off: the parked uses end (their pins go to their caches' work). */
void pevb_cuse_release_all(struct list_head *q)
{
	struct pevb_cuse *u, *n;

	list_for_each_entry_safe(u, n, q, parked) {
		list_del(&u->parked);
		pevb_cuse_end(u);
	}
}

/*
 * Whether a live surface or a buffer cached by any file of this card holds any of @frames (under
 * card->pinlock), not counting the buffers of @own that @replacing takes the place of.
 */
static bool frames_in_use(struct pevb_card *card, const u64 *frames, size_t n, struct pevb_cache *own,
			  const struct pevb_range *replacing)
{
	struct pevb_cache *c;
	bool hit;

	if (pevb_card_overlaps(card, 0, 0, 0, frames, n))
		return true;
	hit = false;
	mutex_lock(&card->cachelock);
	list_for_each_entry(c, &card->caches, card_link) {
		hit = pevb_cache_holds(c, frames, n, c == own, replacing);
		if (hit)
			break;
	}
	mutex_unlock(&card->cachelock);
	return hit;
}

/* ---- one request's pin, for cache_table.rs's get ---- */

/* One request's pin of [r.addr, r.addr + r.len) on @card through cache @c. */
struct pevb_cache_call {
	struct pevb_cache *c;
	struct pevb_card *card;
	u64 addr, len;
	bool to_device;
	struct pevb_cuse *cuse;		/* out: a use of a cached buffer, or */
	struct pevb_pin *pin;		/* out: a pin for this request only */
};

struct pevb_cache *pevb_cache_call_cache(struct pevb_cache_call *k)
{
	return k->c;
}

/* The lock PIN_CUDA takes to evict cached buffers and map a surface. */
void pevb_cache_call_pin_lock(struct pevb_cache_call *k)
{
	mutex_lock(&k->card->pinlock);
}

void pevb_cache_call_pin_unlock(struct pevb_cache_call *k)
{
	mutex_unlock(&k->card->pinlock);
}

bool pevb_cache_call_overlaps(struct pevb_cache_call *k, u64 mm, u64 first, u64 end)
{
	return pevb_card_overlaps(k->card, mm, first, end, NULL, 0);
}

int pevb_cache_call_frames(u64 first, u64 end, struct pevb_frames *out)
{
	return pevb_user_frames(first, end, &out->f, &out->n);
}

bool pevb_cache_call_in_use(struct pevb_cache_call *k, const u64 *frames, size_t n,
			    const struct pevb_range *replacing)
{
	return frames_in_use(k->card, frames, n, k->c, replacing);
}

/*
 * A new cached pin of @want, or NULL where it cannot be cached: read-only memory the device only reads,
 * memory that kept changing, a shared file mapping that needs writeback (pin.c's pevb_long_pin_allowed
 * refuses it: 5.10's FOLL_LONGTERM does not), over RLIMIT_MEMLOCK. The one-off pin then serves the
 * request, or gives its real error (a bad address).
 */
struct pevb_cbuf *pevb_cache_call_pin(struct pevb_cache_call *k, const struct pevb_range *want)
{
	struct pevb_cbuf *p;

	return cbuf_new(&k->card->pdev->dev, want, k->c, &p) ? NULL : p;
}

int pevb_cache_call_once(struct pevb_cache_call *k)
{
	return pevb_pin_user(&k->card->pdev->dev, k->addr, k->len, k->to_device, &k->pin);
}

/* Takes over the reference to @p, also on failure. */
int pevb_cache_call_use(struct pevb_cache_call *k, struct pevb_cbuf *p, u64 offset)
{
	return use_new(p, offset, k->len, k->to_device, &k->cuse);
}

/*
 * Pins [addr, addr + len) of the caller's memory for one request on @card: a cached buffer when one serves
 * it or it can be cached (*cuse), else a pin for this request only (*pin). @to_device: the device only
 * reads it.
 */
int pevb_cache_get(struct pevb_cache *c, struct pevb_card *card, u64 addr, u64 len, bool to_device,
		   struct pevb_cuse **cuse, struct pevb_pin **pin)
{
	struct pevb_range r = { .mm = (unsigned long)current->mm, .addr = addr, .len = len };
	struct pevb_cache_call k = { .c = c, .card = card, .addr = addr, .len = len, .to_device = to_device };
	int ret = pevb_cache_pin(&k, &r);

	*cuse = k.cuse;
	*pin = k.pin;
	return ret;
}

/* ---- the file's cache, the card's list ---- */

int pevb_cache_open(struct pevb_card *card, struct pevb_cache **out)
{
	struct pevb_cache *c = kzalloc(sizeof(*c) + PEVB_LAYOUT.policy, GFP_KERNEL);

	if (!c)
		return -ENOMEM;
	c->work = pevb_work_new(pevb_cache_sweep, c);	/* drops stale buffers (cache_table.rs) */
	if (!c->work) {
		kfree(c);
		return -ENOMEM;
	}
	kref_init(&c->ref);
	mutex_init(&c->lock);
	pevb_policy_init(policy(c), PAGE_SIZE);
	kref_get(&c->ref);	/* the card's list */
	mutex_lock(&card->cachelock);
	list_add_tail(&c->card_link, &card->caches);
	c->listed = true;
	mutex_unlock(&card->cachelock);
	*out = c;
	return 0;
}

/*
 * Close or card removal: drops every buffer and caches nothing more. Releases what was handed over on
 * this thread and waits for a running sweep, so the dropped buffers are unmapped when it returns, except
 * those a request (or the quarantine) still holds. Never from a request thread (see the top).
 */
static void cache_close(struct pevb_cache *c)
{
	pevb_cache_shut(c);
	pevb_work_drain(c->work);
}

/*
 * The file's release: emptied while the card still lists it, so a PIN_CUDA meanwhile finds its buffers (in
 * the table or on their way to being unmapped) and waits for them; removal may be closing it at the same
 * time, which is harmless. Then forgotten by the card.
 */
void pevb_cache_release(struct pevb_card *card, struct pevb_cache *c)
{
	bool was;

	cache_close(c);
	mutex_lock(&card->cachelock);
	was = c->listed;
	if (was)
		list_del(&c->card_link);
	c->listed = false;
	mutex_unlock(&card->cachelock);
	if (was)
		cache_put(c);
	cache_put(c);
}

/* Card removal, after every request ended: every file's cached buffers are unmapped when this returns. */
void pevb_card_close_caches(struct pevb_card *card)
{
	struct pevb_cache *c;

	mutex_lock(&card->cachelock);
	list_for_each_entry(c, &card->caches, card_link)
		cache_close(c);
	mutex_unlock(&card->cachelock);
}

/*
 * PIN_CUDA of [first, end) in address space @mm, pages @frames (under card->pinlock, before the surface is
 * mapped): drops every file's cached buffers on those pages, by address or by page frame, then waits until
 * no buffer on those pages is mapped any more, those dropped now and those dropped earlier (an eviction,
 * FLUSH, a sweep, close) whose release is still going on, except those a running request holds: the
 * provider's mapping must not overlap one. This thread releases nothing; it waits at most for an
 * invalidation in progress (a release's mmu_interval_notifier_remove), whose provider callback waits only
 * for requests that hold a surface, and those wait for nothing PIN_CUDA holds.
 */
void pevb_card_evict_cached(struct pevb_card *card, unsigned long mm, u64 first, u64 end, const u64 *frames,
			    size_t n)
{
	struct pevb_range r = { .mm = mm, .addr = first, .len = end - first };
	struct pevb_cache *c, *next;
	LIST_HEAD(caches);

	mutex_lock(&card->cachelock);
	list_for_each_entry(c, &card->caches, card_link) {
		pevb_cache_evict(c, &r, frames, n);
		kref_get(&c->ref);
		list_add_tail(&c->evict_link, &caches);	/* evict_link: ours, under pinlock */
	}
	mutex_unlock(&card->cachelock);
	/* Outside the list's lock: a closing file takes it to forget its cache. */
	list_for_each_entry_safe(c, next, &caches, evict_link) {
		pevb_work_wait_pages(c->work, frames, n);
		list_del(&c->evict_link);
		cache_put(c);
	}
}

/* debugfs state: "caches N cached_buffers M", as 6.18's. */
void pevb_card_describe_caches(struct pevb_card *card, struct seq_file *m)
{
	struct pevb_cache *c;
	size_t files = 0;
	u32 buffers = 0;

	mutex_lock(&card->cachelock);
	list_for_each_entry(c, &card->caches, card_link) {
		files++;
		mutex_lock(&c->lock);
		buffers += pevb_policy_entries(policy(c));
		mutex_unlock(&c->lock);
	}
	mutex_unlock(&card->cachelock);
	seq_printf(m, "caches %zu cached_buffers %u\n", files, buffers);
}
