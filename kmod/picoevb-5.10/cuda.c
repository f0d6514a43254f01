// SPDX-License-Identifier: GPL-2.0
/*
 * GPU memory ("CUDA surfaces") pinned through the nvidia_p2p shim (p2p.c, the 6.18 module's own), per open
 * file: the rules of kmod/picoevb/cuda.rs, step by step.
 *
 * A surface is pinned by PIN_CUDA and ends in exactly one free (pevb_p2p_free_from_callback), after both of
 * these are over: the provider's free callback, which comes exactly once (from UNPIN or close, inside
 * pevb_p2p_unpin, or on its own when the memory goes away), and an unpin, if one started (never once the
 * callback has begun: the shim forbids it). The callback marks the surface dead (no new DMA) and waits for
 * the DMAs using it; each is bounded by the engine timeout and holds no lock the callback needs, so that
 * hand-made wait (lockdep cannot see it) is bounded too. Whichever of callback and unpin ends second frees.
 */
#include <linux/idr.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include "picoevb.h"

struct pevb_surface {
	struct kref ref;		/* the file's table, the card's list, the callback, each use */
	struct pevb_p2p *p;		/* stored by pevb_p2p_pin before the callback can run */
	u64 len;			/* bytes pinned from the user's va */
	struct pevb_card *card;		/* a reference; the card forgets the surface when it is freed */
	struct list_head node;		/* card->surfaces, under card->slock, while listed */
	bool listed;
	unsigned long mm;		/* address space and page range pinned, and the pages behind them */
	u64 first, end;			/* (no frames where they are not writable struct pages) */
	u64 *frames;
	size_t nframes;

	spinlock_t lock;		/* everything below */
	u32 users;			/* DMAs using the surface now */
	bool dead;			/* the callback has begun: no new DMA, no new unpin */
	bool unpinning, unpin_done;
	bool callback_done;		/* the callback is over except for the free */
	bool detached;			/* the card is gone: the DMA mapping was dropped at removal */
	bool freed;
	wait_queue_head_t idle;		/* users reached 0 after dead; freed */
};

static struct pevb_p2p *pin_of(struct pevb_surface *s)
{
	return READ_ONCE(s->p);
}

static void surface_release(struct kref *ref)
{
	struct pevb_surface *s = container_of(ref, struct pevb_surface, ref);

	pevb_card_put(s->card);
	kvfree(s->frames);
	kfree(s);
}

static void surface_put(struct pevb_surface *s)
{
	kref_put(&s->ref, surface_release);
}

/* ---- the card's record of its surfaces (card.rs: add_surface, overlaps, drop_surface, remove) ---- */

static void card_forget(struct pevb_card *card, struct pevb_surface *s)
{
	bool was;

	spin_lock(&card->slock);
	was = s->listed;
	if (was)
		list_del(&s->node);
	s->listed = false;
	spin_unlock(&card->slock);
	if (was)
		surface_put(s);
}

static bool surface_dead(struct pevb_surface *s)
{
	bool dead;

	spin_lock(&s->lock);
	dead = s->dead;
	spin_unlock(&s->lock);
	return dead;
}

/*
 * Whether a live surface covers pages [first, end) of @mm, or any of @frames (the same memory elsewhere).
 * With @mm 0 and an empty range: whether a live surface holds any of @frames (card.rs's frames_in_use).
 */
bool pevb_card_overlaps(struct pevb_card *card, unsigned long mm, u64 first, u64 end, const u64 *frames,
			  size_t n)
{
	struct pevb_surface *s;
	bool hit = false;

	spin_lock(&card->slock);
	list_for_each_entry(s, &card->surfaces, node) {
		if (((s->mm == mm && s->first < end && first < s->end) ||
		     pevb_share_page_frames(s->frames, s->nframes, frames, n)) && !surface_dead(s)) {
			hit = true;
			break;
		}
	}
	spin_unlock(&card->slock);
	return hit;
}

/*
 * A surface on pages [first, end) of @mm or on @frames whose free callback has begun and whose pin is not
 * freed yet, so its DMA mapping may still be live, with a reference; NULL if there is none.
 */
static struct pevb_surface *card_dying(struct pevb_card *card, unsigned long mm, u64 first, u64 end,
				       const u64 *frames, size_t n)
{
	struct pevb_surface *s, *hit = NULL;
	bool dying;

	spin_lock(&card->slock);
	list_for_each_entry(s, &card->surfaces, node) {
		if (!((s->mm == mm && s->first < end && first < s->end) ||
		      pevb_share_page_frames(s->frames, s->nframes, frames, n)))
			continue;
		spin_lock(&s->lock);
		dying = s->dead && !s->freed;
		spin_unlock(&s->lock);
		if (dying) {
			kref_get(&s->ref);
			hit = s;
			break;
		}
	}
	spin_unlock(&card->slock);
	return hit;
}

/* ---- one surface ---- */

static void surface_free(struct pevb_surface *s)
{
	pevb_p2p_free_from_callback(pin_of(s));
	card_forget(s->card, s);
	spin_lock(&s->lock);
	s->freed = true;
	spin_unlock(&s->lock);
	wake_up_all(&s->idle);
}

static bool users_gone(struct pevb_surface *s)
{
	bool idle;

	spin_lock(&s->lock);
	idle = !s->users;
	spin_unlock(&s->lock);
	return idle;
}

/* The provider's free callback; @data is the reference pin took for it. */
static void surface_gone(void *data)
{
	struct pevb_surface *s = data;
	bool free;

	pevb_p2p_uses_awaited();	/* lockdep: this waits for every use (pevb_surfaces_enter) */
	spin_lock(&s->lock);
	s->dead = true;
	spin_unlock(&s->lock);
	wait_event(s->idle, users_gone(s));
	spin_lock(&s->lock);
	s->callback_done = true;
	free = !s->unpinning || s->unpin_done;
	spin_unlock(&s->lock);
	if (free)
		surface_free(s);
	surface_put(s);
}

/* UNPIN or close: ends the pin unless its memory already went away. */
static void surface_unpin(struct pevb_surface *s)
{
	bool free;

	spin_lock(&s->lock);
	if (s->dead || s->unpinning) {
		spin_unlock(&s->lock);
		return;
	}
	s->unpinning = true;
	spin_unlock(&s->lock);
	/* The pin cannot be freed before unpin_done (surface_gone); this is its only unpin. */
	pevb_p2p_unpin(pin_of(s));
	spin_lock(&s->lock);
	s->unpin_done = true;
	free = s->callback_done;
	spin_unlock(&s->lock);
	if (free)
		surface_free(s);
}

/* Card removal: drop the DMA mapping now and refuse DMA; the pin stays until UNPIN, close or munmap. */
static void surface_detach(struct pevb_surface *s)
{
	spin_lock(&s->lock);
	if (s->dead) {
		spin_unlock(&s->lock);
		/* The callback's free unmaps: wait for it, so nothing stays mapped past unbind. */
		atomic_inc(&s->card->callbacks_awaited);
		wait_event(s->idle, READ_ONCE(s->freed));
		atomic_dec(&s->card->callbacks_awaited);
		return;
	}
	if (s->detached) {
		spin_unlock(&s->lock);
		return;
	}
	s->detached = true;
	s->users++;		/* held like a DMA, so the callback cannot free the pin under us */
	spin_unlock(&s->lock);
	pevb_p2p_unmap_device(pin_of(s));
	spin_lock(&s->lock);
	if (!--s->users && s->dead)
		wake_up_all(&s->idle);
	spin_unlock(&s->lock);
}

void pevb_card_detach_surfaces(struct pevb_card *card)
{
	struct pevb_surface *s;

	for (;;) {
		spin_lock(&card->slock);
		s = list_first_entry_or_null(&card->surfaces, struct pevb_surface, node);
		if (s) {
			list_del(&s->node);
			s->listed = false;
		}
		spin_unlock(&card->slock);
		if (!s)
			return;
		surface_detach(s);
		surface_put(s);
	}
}

/* debugfs state: the surfaces the card records, one line each (cuda.rs's describe). */
void pevb_card_describe_surfaces(struct pevb_card *card, struct seq_file *m)
{
	struct pevb_surface *s;
	size_t n = 0;

	spin_lock(&card->slock);
	list_for_each_entry(s, &card->surfaces, node)
		n++;
	seq_printf(m, "surfaces %zu\n", n);
	list_for_each_entry(s, &card->surfaces, node) {
		spin_lock(&s->lock);
		seq_printf(m, "surface %#llx-%#llx len %llu users %u dead %d unpinning %d detached %d freed %d\n",
			   s->first, s->end, s->len, s->users, s->dead, s->unpinning, s->detached, s->freed);
		spin_unlock(&s->lock);
	}
	spin_unlock(&card->slock);
}

static bool same_frames(struct pevb_surface *s)
{
	size_t n;
	u64 *f;
	bool same;

	if (pevb_user_frames(s->first, s->end, &f, &n))
		return false;
	same = n == s->nframes && !memcmp(f, s->frames, n * sizeof(*f));
	kvfree(f);
	return same;
}

static int surface_pin(struct pevb_card *card, u64 va, u64 len, u64 *frames, size_t nframes,
		       struct pevb_surface **out)
{
	struct pevb_surface *s = kzalloc(sizeof(*s), GFP_KERNEL);
	int ret;

	if (!s) {
		kvfree(frames);
		return -ENOMEM;
	}
	kref_init(&s->ref);
	kref_get(&card->ref);
	s->card = card;
	s->len = len;
	s->mm = (unsigned long)current->mm;
	s->first = va & PAGE_MASK;
	s->end = PAGE_ALIGN(va + len);
	s->frames = frames;
	s->nframes = nframes;
	spin_lock_init(&s->lock);
	init_waitqueue_head(&s->idle);
	/* Recorded before the pin exists: its callback may run (and forget it) as soon as the pin does. */
	kref_get(&s->ref);
	spin_lock(&card->slock);
	list_add_tail(&s->node, &card->surfaces);
	s->listed = true;
	spin_unlock(&card->slock);
	kref_get(&s->ref);	/* the callback's */
	ret = pevb_p2p_pin(&card->pdev->dev, va, len, surface_gone, s, &s->p);
	if (ret) {
		surface_put(s);	/* a failed pin never calls the callback */
		card_forget(card, s);
		surface_put(s);
		return ret;
	}
	*out = s;
	return 0;
}

/* ---- the surfaces of one open file, by handle (cuda.rs's Surfaces) ---- */

void pevb_surfaces_init(struct pevb_surfaces *t)
{
	spin_lock_init(&t->lock);
	idr_init(&t->idr);
}

/* PIN_CUDA: the new handle, or a negative errno. */
int pevb_surfaces_pin(struct pevb_surfaces *t, struct pevb_card *card, u64 va, u64 len)
{
	u64 first = va & PAGE_MASK, end = PAGE_ALIGN(va + len), *frames;
	unsigned long mm = (unsigned long)current->mm;
	struct pevb_surface *s, *dying;
	size_t n;
	int ret;

	if (end < va + len || !end)
		return -EINVAL;
	/*
	 * Faulted in first, holding nothing: the page lookups and the provider's pin below run under the
	 * card's pin lock and the hold removal drains, where a fault that never resolves (userfaultfd, FUSE)
	 * would stall every PIN_CUDA of the card and its removal (prefault.c's pevb_user_prefault).
	 */
	ret = pevb_user_prefault(va, len, true);
	if (ret)
		return ret;
	/* Mapping for the device: removal must wait for it and then find the surface to unmap. */
	ret = pevb_card_begin(card);
	if (ret)
		return ret;
	if (pevb_p2p_get()) {
		pevb_card_end(card);
		return -EOPNOTSUPP;
	}
	/*
	 * One long-lived mapping per page and card (the DMA API does not support overlapping mappings): checked
	 * and pinned under one lock so two callers cannot both pass. By the pages too: one memory at two
	 * addresses is one surface. Host buffers cached on these pages would be a second long-lived mapping
	 * of the memory: evicted first, and unmapped before the provider maps it.
	 */
again:
	mutex_lock(&card->pinlock);
	ret = pevb_user_frames(first, end, &frames, &n);
	if (!ret && pevb_card_overlaps(card, mm, first, end, frames, n)) {
		kvfree(frames);
		ret = -EBUSY;
	}
	/*
	 * A surface of these pages whose memory went away (its callback has begun: munmap, exit, in this or
	 * another process) may still be mapped until the DMAs using it are over: wait for its free, without
	 * the lock (its callback takes none of ours), then check again.
	 */
	dying = ret ? NULL : card_dying(card, mm, first, end, frames, n);
	if (dying) {
		kvfree(frames);
		mutex_unlock(&card->pinlock);
		wait_event(dying->idle, READ_ONCE(dying->freed));
		surface_put(dying);
		goto again;
	}
	if (!ret)
		pevb_card_evict_cached(card, mm, first, end, frames, n);
	if (!ret)
		ret = surface_pin(card, va, len, frames, n, &s);
	mutex_unlock(&card->pinlock);
	pevb_p2p_put();		/* a pin holds the provider on its own */
	if (ret)
		goto out;
	/* The pages read before pinning must be the ones pinned (a remap in between would fool the checks). */
	if (s->nframes && !same_frames(s)) {
		ret = -EAGAIN;
		goto undo;
	}
	/*
	 * Handles are small non-negative ints, never reused while in the table. The idr's memory is taken
	 * before the lock: a request holding a use of another surface may wait for the lock (enter), and
	 * reclaim inside the allocation could run that surface's free callback here, which waits for the use.
	 */
	idr_preload(GFP_KERNEL);
	spin_lock(&t->lock);
	ret = idr_alloc_cyclic(&t->idr, s, 0, 0, GFP_NOWAIT);
	spin_unlock(&t->lock);
	idr_preload_end();
	if (ret >= 0)
		goto out;	/* the table has our reference */
undo:
	surface_unpin(s);
	surface_put(s);
out:
	pevb_card_end(card);
	return ret;
}

/* UNPIN_CUDA: -EINVAL if the handle is unknown or its memory already went away. */
int pevb_surfaces_unpin(struct pevb_surfaces *t, u32 handle)
{
	struct pevb_surface *s;
	bool gone;

	spin_lock(&t->lock);
	s = handle > INT_MAX ? NULL : idr_remove(&t->idr, handle);
	spin_unlock(&t->lock);
	if (!s)
		return -EINVAL;
	gone = surface_dead(s);
	surface_unpin(s);
	surface_put(s);
	return gone ? -EINVAL : 0;
}

/* Close: unpins everything. */
void pevb_surfaces_unpin_all(struct pevb_surfaces *t)
{
	struct pevb_surface *s;
	int id;

	for (;;) {
		id = 0;
		spin_lock(&t->lock);
		s = idr_get_next(&t->idr, &id);
		if (s)
			idr_remove(&t->idr, id);
		spin_unlock(&t->lock);
		if (!s)
			break;
		surface_unpin(s);
		surface_put(s);
	}
	idr_destroy(&t->idr);
}

/*
 * Takes a use of surface @handle for a DMA of @len bytes into @u, the request's own (-EINVAL: unknown
 * handle, memory gone, @len beyond the pin; -ENODEV: card removed), and hands the bytes to the device.
 * Nothing is allocated while a use is held (cuda.rs's InUse says why): the segments are the shim's, built
 * at PIN_CUDA, and only borrowed (pevb_use_segments).
 */
int pevb_surfaces_enter(struct pevb_surfaces *t, u32 handle, u64 len, bool to_device, struct pevb_use *u)
{
	struct pevb_surface *s;
	int ret = 0;

	spin_lock(&t->lock);
	s = handle > INT_MAX ? NULL : idr_find(&t->idr, handle);
	if (s)
		kref_get(&s->ref);
	spin_unlock(&t->lock);
	if (!s)
		return -EINVAL;
	spin_lock(&s->lock);
	if (s->dead || len > s->len)
		ret = -EINVAL;
	else if (s->detached)
		ret = -ENODEV;
	else
		s->users++;
	spin_unlock(&s->lock);
	if (ret) {
		surface_put(s);
		return ret;
	}
	pevb_p2p_use_acquire();
	/* The pin is live: we hold a use, so the callback has not freed it. */
	pevb_p2p_sync(pin_of(s), len, to_device, true);
	u->s = s;
	u->synced = len;
	u->to_device = to_device;
	return 0;
}

/* The surface's bus segments: the shim's, valid while the use lasts. */
const struct pevb_seg *pevb_use_segments(struct pevb_use *u, size_t *n)
{
	u32 nrun;
	const struct pevb_seg *segs = (const struct pevb_seg *)pevb_p2p_segments(pin_of(u->s), &nrun);

	*n = nrun;
	return segs;
}

/* Ends a use: after a C2H, hands the bytes back to the CPU; wakes a waiting callback. */
void pevb_use_end(struct pevb_use *u)
{
	struct pevb_surface *s = u->s;

	if (u->synced && !u->to_device)
		pevb_p2p_sync(pin_of(s), u->synced, false, false);
	u->s = NULL;
	spin_lock(&s->lock);
	if (!--s->users && s->dead)
		wake_up_all(&s->idle);
	spin_unlock(&s->lock);
	pevb_p2p_use_release();
	surface_put(s);
}

/* Whether a GPU-memory provider is loaded now. */
bool pevb_provider_available(void)
{
	if (pevb_p2p_get())
		return false;
	pevb_p2p_put();
	return true;
}
