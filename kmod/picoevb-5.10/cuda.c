// SPDX-License-Identifier: GPL-2.0
/*
 * GPU memory ("CUDA surfaces") pinned through the nvidia_p2p shim (p2p.c, the 6.18 module's own), per open
 * file: the rules of kmod/picoevb/cuda.rs, step by step.
 *
 * A surface's lifecycle (its uses, the provider's free callback, the unpin, removal's unmap, and which of
 * callback and unpin frees), its state and its sequences, is kmod/logic/src/surface_life.rs, as in 6.18
 * (rust/life_glue.rs, pevb_surface_*): this file offers it the surface's services (pevb_surf_*: s->life
 * under s->lock, the shim's unpin, unmap and free, a wait on s->idle). The callback's wait for the DMAs
 * using the surface is hand-made (lockdep cannot see it); each DMA is bounded by the engine timeout and
 * holds no lock the callback needs, so the wait is bounded too.
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

	spinlock_t lock;		/* life */
	struct pevb_life life;
	wait_queue_head_t idle;		/* the last use ended after the callback began; freed */
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

/* A query (PEVB_LIFE_*) of @s's lifecycle, under its lock. */
static bool life_is(struct pevb_surface *s, u32 what)
{
	bool answer;

	spin_lock(&s->lock);
	answer = pevb_life_is(&s->life, what);
	spin_unlock(&s->lock);
	return answer;
}

/* ---- the surface's services, for rust/life_glue.rs (kmod/logic/src/surface_life.rs runs them) ---- */

struct pevb_life *pevb_surf_life_lock(struct pevb_surface *s)
{
	spin_lock(&s->lock);
	return &s->life;
}

void pevb_surf_life_unlock(struct pevb_surface *s)
{
	spin_unlock(&s->lock);
}

/* @what: PEVB_LIFE_IDLE or PEVB_LIFE_FREED. */
void pevb_surf_wait(struct pevb_surface *s, u32 what)
{
	wait_event(s->idle, life_is(s, what));
}

void pevb_surf_wake(struct pevb_surface *s)
{
	wake_up_all(&s->idle);
}

void pevb_surf_unpin_pin(struct pevb_surface *s)
{
	pevb_p2p_unpin(pin_of(s));
}

bool pevb_surf_unmap(struct pevb_surface *s)
{
	return pevb_p2p_unmap_device(pin_of(s));
}

void pevb_surf_free_pin(struct pevb_surface *s)
{
	pevb_p2p_free_from_callback(pin_of(s));
	card_forget(s->card, s);
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
		     pevb_share_page_frames(s->frames, s->nframes, frames, n)) && life_is(s, PEVB_LIFE_LIVE)) {
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

	spin_lock(&card->slock);
	list_for_each_entry(s, &card->surfaces, node) {
		if (!((s->mm == mm && s->first < end && first < s->end) ||
		      pevb_share_page_frames(s->frames, s->nframes, frames, n)))
			continue;
		if (life_is(s, PEVB_LIFE_DYING)) {
			kref_get(&s->ref);
			hit = s;
			break;
		}
	}
	spin_unlock(&card->slock);
	return hit;
}

/* ---- one surface ---- */

/* The provider's free callback; @data is the reference pin took for it. */
static void surface_gone(void *data)
{
	struct pevb_surface *s = data;

	pevb_surface_callback(s);
	surface_put(s);
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
		if (pevb_surface_detach(s)) {
			/* The callback's free unmaps: wait for it, so nothing stays mapped past unbind. */
			atomic_inc(&card->callbacks_awaited);
			pevb_surface_await_free(s);
			atomic_dec(&card->callbacks_awaited);
		}
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
		struct pevb_life_view v;

		spin_lock(&s->lock);
		pevb_life_view(&s->life, &v);
		spin_unlock(&s->lock);
		seq_printf(m, "surface %#llx-%#llx len %llu users %u dead %d unpinning %d detached %d freed %d\n",
			   s->first, s->end, s->len, v.users, v.dead, v.unpinning, v.detached, v.freed);
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

static int surface_pin(struct pevb_card *card, bool host, u64 va, u64 len, u64 *frames, size_t nframes,
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
	pevb_life_init(&s->life);
	init_waitqueue_head(&s->idle);
	/* Recorded before the pin exists: its callback may run (and forget it) as soon as the pin does. */
	kref_get(&s->ref);
	spin_lock(&card->slock);
	list_add_tail(&s->node, &card->surfaces);
	s->listed = true;
	spin_unlock(&card->slock);
	kref_get(&s->ref);	/* the callback's */
	ret = (host ? pevb_p2p_pin_host : pevb_p2p_pin)(&card->pdev->dev, va, len, surface_gone, s, &s->p);
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

/*
 * ---- PIN_CUDA: kmod/logic/src/surface_pin.rs decides the sequence (rust/pin_glue.rs runs it); these are
 * its services, for one call. ----
 */
struct pevb_cuda_pin_call {
	struct pevb_surfaces *t;
	struct pevb_card *card;
	unsigned long mm;
	bool host;		/* PIN_HOST: pinned host memory, no provider (p2p.c) */
	u64 va, len;
	u64 first, end;		/* the page range around [va, va + len) */
};

void pevb_cuda_pin_lock(struct pevb_cuda_pin_call *c)
{
	mutex_lock(&c->card->pinlock);
}

void pevb_cuda_pin_unlock(struct pevb_cuda_pin_call *c)
{
	mutex_unlock(&c->card->pinlock);
}

int pevb_cuda_pin_frames(struct pevb_cuda_pin_call *c, struct pevb_frames *out)
{
	return pevb_user_frames(c->first, c->end, &out->f, &out->n);
}

void pevb_frames_free(struct pevb_frames *f)
{
	kvfree(f->f);
}

bool pevb_cuda_pin_overlaps(struct pevb_cuda_pin_call *c, const struct pevb_frames *f)
{
	return pevb_card_overlaps(c->card, c->mm, c->first, c->end, f->f, f->n);
}

void *pevb_cuda_pin_dying(struct pevb_cuda_pin_call *c, const struct pevb_frames *f)
{
	return card_dying(c->card, c->mm, c->first, c->end, f->f, f->n);
}

void pevb_cuda_pin_wait_freed(struct pevb_surface *dying)
{
	pevb_surface_await_free(dying);
	surface_put(dying);
}

void pevb_cuda_pin_evict(struct pevb_cuda_pin_call *c, const struct pevb_frames *f)
{
	pevb_card_evict_cached(c->card, c->mm, c->first, c->end, f->f, f->n);
}

/* Takes @f's array whatever happens. */
int pevb_cuda_pin_pin(struct pevb_cuda_pin_call *c, struct pevb_frames *f, struct pevb_surface **out)
{
	return surface_pin(c->card, c->host, c->va, c->len, f->f, f->n, out);
}

bool pevb_cuda_pin_same(struct pevb_cuda_pin_call *c, struct pevb_surface *s)
{
	return !s->nframes || same_frames(s);
}

void pevb_cuda_pin_unpin(struct pevb_surface *s)
{
	pevb_surface_unpin(s);
	surface_put(s);
}

/*
 * Handles are small non-negative ints, never reused while in the table. The idr's memory is taken before
 * the lock: a request holding a use of another surface may wait for the lock (enter), and reclaim inside
 * the allocation could run that surface's free callback here, which waits for the use.
 */
int pevb_cuda_pin_publish(struct pevb_cuda_pin_call *c, struct pevb_surface *s)
{
	int ret;

	idr_preload(GFP_KERNEL);
	spin_lock(&c->t->lock);
	ret = idr_alloc_cyclic(&c->t->idr, s, 0, 0, GFP_NOWAIT);
	spin_unlock(&c->t->lock);
	idr_preload_end();
	return ret;	/* on success the table has our reference */
}

/* PIN_CUDA: the new handle, or a negative errno. */
int pevb_surfaces_pin(struct pevb_surfaces *t, struct pevb_card *card, bool host, u64 va, u64 len)
{
	struct pevb_cuda_pin_call c = {
		.t = t, .card = card, .mm = (unsigned long)current->mm, .host = host, .va = va, .len = len,
		.first = va & PAGE_MASK, .end = PAGE_ALIGN(va + len),
	};
	int ret;

	if (c.end < va + len || !c.end)
		return -EINVAL;
	/* The dispatcher faulted the range in first, holding nothing, and holds the card for removal. */
	if (!host && pevb_p2p_get())
		return -EOPNOTSUPP;
	ret = pevb_cuda_pin(&c);
	if (!host)
		pevb_p2p_put();		/* a pin holds the provider on its own */
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
	gone = !life_is(s, PEVB_LIFE_LIVE);
	pevb_surface_unpin(s);
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
		pevb_surface_unpin(s);
		surface_put(s);
	}
	idr_destroy(&t->idr);
}

/* Surface @handle of @t with a reference, or NULL if there is none. */
static struct pevb_surface *surface_find(struct pevb_surfaces *t, u32 handle)
{
	struct pevb_surface *s;

	spin_lock(&t->lock);
	s = handle > INT_MAX ? NULL : idr_find(&t->idr, handle);
	if (s)
		kref_get(&s->ref);
	spin_unlock(&t->lock);
	return s;
}

/* The bytes surface @handle can move (pevb_surfaces_enter's bound); -EINVAL: unknown, or its memory gone. */
int pevb_surfaces_len(struct pevb_surfaces *t, u32 handle, u64 *len)
{
	struct pevb_surface *s = surface_find(t, handle);
	int ret = -EINVAL;

	if (s && life_is(s, PEVB_LIFE_LIVE)) {
		*len = s->len;
		ret = 0;
	}
	if (s)
		surface_put(s);
	return ret;
}

/*
 * Takes a use of surface @handle for a DMA of @len bytes at offset @at into @u, the request's own (-EINVAL:
 * unknown handle, memory gone, the bytes beyond the pin; -ENODEV: card removed), and hands the bytes to the
 * device.
 * Nothing is allocated while a use is held (cuda.rs's InUse says why): the segments are the shim's, built
 * at PIN_CUDA, and only borrowed (pevb_use_segments).
 */
int pevb_surfaces_enter(struct pevb_surfaces *t, u32 handle, u64 at, u64 len, bool to_device,
			struct pevb_use *u)
{
	struct pevb_surface *s = surface_find(t, handle);
	int ret = 0;

	if (!s)
		return -EINVAL;
	if (len > s->len || at > s->len - len) {
		ret = -EINVAL;
	} else {
		spin_lock(&s->lock);
		ret = pevb_life_begin_use(&s->life);
		spin_unlock(&s->lock);
	}
	if (ret) {
		surface_put(s);
		return ret;
	}
	pevb_p2p_use_acquire();
	/* The pin is live: we hold a use, so the callback has not freed it. */
	pevb_p2p_sync(pin_of(s), at, len, to_device, true);
	u->s = s;
	u->at = at;
	u->len = len;
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

	if (!u->to_device)
		pevb_p2p_sync(pin_of(s), u->at, u->len, false, false);
	u->s = NULL;
	pevb_surface_end_use(s);
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
