// SPDX-License-Identifier: GPL-2.0
/*
 * gdr_nv_p2p.ko, C half: the exported nvidia_p2p_* API (Jetson flavour by default, dGPU flavour with
 * GDR_P2P_DGPU), for kernels without NVIDIA's module. The decisions (lifecycle state machine, argument and
 * address arithmetic) are Rust, in logic.rs; this file does the kernel work they ask for.
 *
 * Objects
 *   struct gdr_pt   private state of one page table, refcounted (kref):
 *                     - one reference for the registry while the public table is live ("retired" drops it),
 *                     - one for the registered mmu notifier (dropped by .free_notifier after
 *                       mmu_notifier_put, or after mmu_notifier_unregister returns),
 *                     - one per API call in progress (taken by the registry lookup) or pending unpin work.
 *                   It holds the notifier, the pinned pages and the one DMA mapping. The PUBLIC table is a
 *                   separate allocation because on Jetson the client kfree()s it (after free_page_table),
 *                   possibly from inside the free callback; nothing here touches it after it is retired.
 *   struct gdr_map  one DMA mapping (public struct first).
 *   registry        hash of live public tables and mappings -> gdr_pt. Every entry point looks its argument
 *                   up there, so a stale or foreign pointer gives -EINVAL instead of a use-after-free.
 *
 * Locks (outermost first): pt->map_lock (mutex: map/unmap/free) > pt->lock (spinlock: state) and
 * gdr_reg_lock (spinlock). Nothing allocates with GFP_KERNEL under map_lock: free_page_table takes it from
 * inside the free callback, i.e. from mmu_notifier_invalidate_range_start, which lockdep treats as
 * reclaim context. The client's callback runs with no lock of ours held.
 */
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/hashtable.h>
#include <linux/hrtimer.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/version.h>
#include <linux/workqueue.h>

#include "nv-p2p.h"
#include "internal.h"

#ifdef GDR_P2P_DGPU
#define GDR_FLAVOUR_NAME "dgpu"
#define GDR_FLAVOUR_BIT GDR_NV_P2P_PROVIDER_DGPU
#else
#define GDR_FLAVOUR_NAME "jetson"
#define GDR_FLAVOUR_BIT 0
#endif

MODULE_INFO(gdr_provider, "nvidia_p2p");
MODULE_INFO(gdr_flavour, GDR_FLAVOUR_NAME);

/* Marker: tells gdr's provider apart from NVIDIA's (which has no such symbol), and its flavour. */
const u32 gdr_nv_p2p_provider_version = GDR_NV_P2P_PROVIDER_VERSION | GDR_FLAVOUR_BIT;
EXPORT_SYMBOL_GPL(gdr_nv_p2p_provider_version);

/* ---------------------------------------------------------------------------------------------------- */

enum gdr_kind { GDR_KIND_TABLE = 1, GDR_KIND_MAP = 2 };

struct gdr_pt;

struct gdr_key {
	struct hlist_node node;
	const void *key;		/* the public pointer the client holds */
	struct gdr_pt *pt;
	enum gdr_kind kind;
};

struct gdr_map {
	struct nvidia_p2p_dma_mapping pub;
	struct gdr_key key;
	struct sg_table sgt;
	struct device *dev;
	enum dma_data_direction dir;
};

struct gdr_pt {
	struct kref ref;
	struct gdr_key key;		/* registry entry of the public table */

	spinlock_t lock;		/* state, cb_task */
	u32 state;			/* logic.rs State, raw */
	struct task_struct *cb_task;	/* thread running the client's callback */
	struct completion done;		/* end of life finished: callback returned (dGPU: and torn down) */

	struct mmu_notifier mn;
#ifdef GDR_OLD_MMU_NOTIFIER
	struct rcu_head mn_rcu;		/* gdr_mn_put: the grace period before the notifier's references go */
	struct work_struct mn_gone;	/* ... and where they go (SRCU callbacks run in softirq) */
#endif
	struct mm_struct *mm;
	u64 vaddr;			/* as the client gave it */
	void (*free_callback)(void *data);
	void *data;

	struct mutex map_lock;		/* pub, map, pinned */
	struct nvidia_p2p_page_table *pub;	/* NULL once retired */
	struct gdr_map *map;		/* the one live DMA mapping */
	bool pinned;
	struct page **pages;		/* [npages], kept until the gdr_pt is freed */
	u32 npages;
	struct work_struct unpin_work;
#ifdef GDR_P2P_DGPU
	u32 ngpu;
	struct nvidia_p2p_page *gpages;	/* [ngpu], pub->pages[i] == &gpages[i] */
#endif
};

/*
 * Test control: behave like NVIDIA's Tegra module, which ignores whether an invalidation may block and
 * runs the client's (sleeping) callback from the OOM reaper's non-blockable walk too. Lets the bench show
 * that a client never gets such a callback (picoevb's guard notifier refuses those ranges first).
 */
static bool nonblock_callbacks;
module_param(nonblock_callbacks, bool, 0644);
MODULE_PARM_DESC(nonblock_callbacks, "test only: run callbacks from non-blockable invalidations, as NVIDIA's Tegra module does");

/*
 * Test control: run free callbacks that come from outside an invalidation (unpin, exit, revoke) as direct
 * reclaim runs an invalidation (fs_reclaim held for lockdep, PF_MEMALLOC set), so lockdep learns what a
 * client's callback takes and reports any of those locks held across an allocation that may reclaim (the
 * recursion reclaim would make on the same thread), which a bench guest with plenty of memory never really
 * reclaims. __mmu_notifier_register primes lockdep the same way for invalidate_range_start.
 */
static bool reclaim_callbacks;
module_param(reclaim_callbacks, bool, 0644);
MODULE_PARM_DESC(reclaim_callbacks, "test only: run free callbacks in a direct-reclaim context (fs_reclaim, PF_MEMALLOC)");

/*
 * Test control: "DDDD:BB:DD.F" clears that unbound PCI device's dev.dma_parms, as NVIDIA's reference
 * picoevb driver does on remove, so the bench can show that a driver bound next still probes cleanly.
 */
static int gdr_clear_dma_parms(const char *val, const struct kernel_param *kp)
{
	unsigned int dom, bus, slot, fn;
	struct pci_dev *pdev;
	int ret = 0;

	if (sscanf(val, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4)
		return -EINVAL;
	pdev = pci_get_domain_bus_and_slot(dom, bus, PCI_DEVFN(slot, fn));
	if (!pdev)
		return -ENODEV;
	device_lock(&pdev->dev);
	if (pdev->dev.driver)
		ret = -EBUSY;
	else
		pdev->dev.dma_parms = NULL;
	device_unlock(&pdev->dev);
	pci_dev_put(pdev);
	return ret;
}

static const struct kernel_param_ops gdr_clear_dma_parms_ops = { .set = gdr_clear_dma_parms };
module_param_cb(clear_dma_parms, &gdr_clear_dma_parms_ops, NULL, 0200);
MODULE_PARM_DESC(clear_dma_parms, "test only: clear an unbound PCI device's dma_parms (DDDD:BB:DD.F)");

#ifndef GDR_P2P_DGPU
/*
 * Test control (Jetson flavour): while hold_callback_unmap is set, a client's DMA unmap made from inside its
 * free callback (an invalidation) waits until it is cleared (30 s at most); held_unmaps says how many wait
 * now. Lets the bench hold a callback that has begun in the middle of its unmap while the card is removed,
 * to show that removal waits for it (a device keeps no DMA mapping past unbind).
 */
static bool hold_callback_unmap;
static atomic_t held_unmaps = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(gdr_hold_wq);

static int gdr_hold_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	wake_up_all(&gdr_hold_wq);
	return ret;
}

static const struct kernel_param_ops gdr_hold_ops = { .set = gdr_hold_set, .get = param_get_bool };
module_param_cb(hold_callback_unmap, &gdr_hold_ops, &hold_callback_unmap, 0644);
MODULE_PARM_DESC(hold_callback_unmap, "test only: a DMA unmap from inside a free callback waits while this is set");

static int gdr_held_get(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "%d\n", atomic_read(&held_unmaps));
}

static const struct kernel_param_ops gdr_held_ops = { .get = gdr_held_get };
module_param_cb(held_unmaps, &gdr_held_ops, NULL, 0444);
MODULE_PARM_DESC(held_unmaps, "test only: DMA unmaps waiting for hold_callback_unmap to be cleared");

/* The unmap of a callback waits here while hold_callback_unmap is set (no lock of ours is held). */
static void gdr_hold_unmap(void)
{
	atomic_inc(&held_unmaps);
	wait_event_timeout(gdr_hold_wq, !READ_ONCE(hold_callback_unmap), 30 * HZ);
	atomic_dec(&held_unmaps);
}
#endif

static DEFINE_HASHTABLE(gdr_reg, 6);
static DEFINE_SPINLOCK(gdr_reg_lock);
static atomic_t gdr_live = ATOMIC_INIT(0);
static struct workqueue_struct *gdr_wq;

static void gdr_reg_add(struct gdr_key *k, const void *key, struct gdr_pt *pt, enum gdr_kind kind)
{
	k->key = key;
	k->pt = pt;
	k->kind = kind;
	spin_lock(&gdr_reg_lock);
	hash_add(gdr_reg, &k->node, (unsigned long)key);
	spin_unlock(&gdr_reg_lock);
}

static void gdr_reg_del(struct gdr_key *k)
{
	spin_lock(&gdr_reg_lock);
	if (!hlist_unhashed(&k->node))
		hash_del(&k->node);
	spin_unlock(&gdr_reg_lock);
}

/* The live gdr_pt behind a public pointer, with a reference; NULL if @key is not (or no longer) live. */
static struct gdr_pt *gdr_reg_get(const void *key, enum gdr_kind kind)
{
	struct gdr_pt *pt = NULL;
	struct gdr_key *k;

	spin_lock(&gdr_reg_lock);
	hash_for_each_possible(gdr_reg, k, node, (unsigned long)key) {
		if (k->key == key && k->kind == kind) {
			pt = k->pt;
			kref_get(&pt->ref);
			break;
		}
	}
	spin_unlock(&gdr_reg_lock);
	return pt;
}

static void gdr_pt_release(struct kref *ref)
{
	struct gdr_pt *pt = container_of(ref, struct gdr_pt, ref);

	if (WARN_ON(pt->pinned))
		unpin_user_pages(pt->pages, pt->npages);
	kvfree(pt->pages);
	kfree(pt);
	atomic_dec(&gdr_live);
}

static void gdr_pt_put(struct gdr_pt *pt)
{
	kref_put(&pt->ref, gdr_pt_release);
}

/*
 * Threads inside one of our .invalidate_range_start callbacks. The caller of the invalidation may hold a
 * folio lock (folio_mkclean, KSM, migration), and unpin_user_pages_dirty_lock() takes folio locks, so a
 * free_page_table called from such a callback hands the unpinning to a work item instead.
 */
struct gdr_frame {
	struct list_head node;
	struct task_struct *task;
};

static LIST_HEAD(gdr_frames);
static DEFINE_SPINLOCK(gdr_frames_lock);

static bool gdr_in_invalidate(void)
{
	struct gdr_frame *f;
	bool found = false;

	spin_lock(&gdr_frames_lock);
	list_for_each_entry(f, &gdr_frames, node) {
		if (f->task == current) {
			found = true;
			break;
		}
	}
	spin_unlock(&gdr_frames_lock);
	return found;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Pinning */

static void gdr_unpin_work(struct work_struct *work)
{
	struct gdr_pt *pt = container_of(work, struct gdr_pt, unpin_work);

	unpin_user_pages_dirty_lock(pt->pages, pt->npages, true);
	gdr_pt_put(pt);
}

/*
 * Unpin the pages, which map_lock has just taken away from the table (pinned == false). The device may have
 * written them, so they are marked dirty. In an invalidation callback this is deferred (see gdr_frame).
 */
static void gdr_unpin(struct gdr_pt *pt)
{
	if (gdr_in_invalidate()) {
		kref_get(&pt->ref);
		queue_work(gdr_wq, &pt->unpin_work);
	} else {
		unpin_user_pages_dirty_lock(pt->pages, pt->npages, true);
	}
}

/*
 * Pin @npages pages of the calling process from @first on, write access, FOLL_LONGTERM. NVIDIA's Tegra
 * provider uses get_user_pages(FOLL_WRITE | FOLL_FORCE); pin_user_pages(FOLL_LONGTERM) is a deliberate
 * improvement: the pins are visible to the mm as DMA pins (folio_maybe_dma_pinned), pages are first
 * migrated out of ZONE_MOVABLE/CMA, and there is no FOLL_FORCE (no writing through read-only mappings).
 */
static struct gdr_pt *gdr_pt_pin(u64 first, u32 npages)
{
	struct gdr_pt *pt;
	int got;

	if (!current->mm)
		return ERR_PTR(-EINVAL);

	pt = kzalloc(sizeof(*pt), GFP_KERNEL);
	if (!pt)
		return ERR_PTR(-ENOMEM);
	kref_init(&pt->ref);
	INIT_HLIST_NODE(&pt->key.node);
	spin_lock_init(&pt->lock);
	init_completion(&pt->done);
	mutex_init(&pt->map_lock);
	INIT_WORK(&pt->unpin_work, gdr_unpin_work);
	atomic_inc(&gdr_live);

	pt->pages = kvmalloc_array(npages, sizeof(*pt->pages), GFP_KERNEL);
	if (!pt->pages) {
		gdr_pt_put(pt);
		return ERR_PTR(-ENOMEM);
	}
	got = pin_user_pages_fast(first, npages, FOLL_WRITE | FOLL_LONGTERM, pt->pages);
	if (got != npages) {
		if (got > 0)
			unpin_user_pages(pt->pages, got);
		gdr_pt_put(pt);
		/*
		 * A range that is not all mapped is -EFAULT, as pin_user_pages says and as every other bad user
		 * range of picoevb's ABI is (NVIDIA's module returns -ENOMEM here: a deliberate difference).
		 */
		return ERR_PTR(got < 0 ? got : -EFAULT);
	}
	pt->npages = npages;
	pt->pinned = true;
	return pt;
}

/* Physical addresses of the pinned pages, for the Rust arithmetic. kvfree() the result. */
static u64 *gdr_phys(struct gdr_pt *pt)
{
	u64 *phys = kvmalloc_array(pt->npages, sizeof(*phys), GFP_KERNEL);
	u32 i;

	if (phys)
		for (i = 0; i < pt->npages; i++)
			phys[i] = page_to_phys(pt->pages[i]);
	return phys;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Lifecycle: one transition of the Rust state machine under pt->lock. */

static u32 gdr_event(struct gdr_pt *pt, u32 ev)
{
	u64 r;
	u32 act;

	spin_lock(&pt->lock);
	r = gdr_p2p_rs_step(pt->state, ev);
	pt->state = (u32)(r >> 32);
	act = (u32)r;
	if (act & GDR_A_RUN_CALLBACK)
		pt->cb_task = current;
	spin_unlock(&pt->lock);
	WARN_ON_ONCE(act & GDR_A_INVALID);
	return act;
}

static bool gdr_may_map(struct gdr_pt *pt)
{
	bool ok;

	spin_lock(&pt->lock);
	ok = gdr_p2p_rs_may_map(pt->state);
	spin_unlock(&pt->lock);
	return ok;
}

/* WAIT: another path owns the end of life (callback or teardown); return once it has finished. */
static void gdr_wait(struct gdr_pt *pt)
{
	bool self;

	spin_lock(&pt->lock);
	self = pt->cb_task == current;
	spin_unlock(&pt->lock);
	if (!self)	/* put_pages from inside the callback would wait for itself */
		wait_for_completion(&pt->done);
}

/* The registered notifier is gone (after mmu_notifier_unregister, or from .free_notifier). */
static void gdr_notifier_gone(struct gdr_pt *pt)
{
	gdr_pt_put(pt);
	module_put(THIS_MODULE);
}

#ifdef GDR_OLD_MMU_NOTIFIER
static void gdr_mn_gone_work(struct work_struct *work)
{
	gdr_notifier_gone(container_of(work, struct gdr_pt, mn_gone));
}

static void gdr_mn_gone_rcu(struct rcu_head *rcu)
{
	struct gdr_pt *pt = container_of(rcu, struct gdr_pt, mn_rcu);

	queue_work(gdr_wq, &pt->mn_gone);
}

/*
 * 4.x has no mmu_notifier_put (5.4): unlink now (mmu_notifier_unregister_no_release waits for no SRCU
 * reader, so it is allowed inside our own callback, and it drops the registration's mm_count as put does)
 * and drop the notifier's references one grace period later, from gdr_wq (module exit's
 * mmu_notifier_synchronize waits for the SRCU callback, then destroy_workqueue for the work).
 */
static void gdr_mn_put(struct gdr_pt *pt)
{
	mmu_notifier_unregister_no_release(&pt->mn, pt->mm);
	INIT_WORK(&pt->mn_gone, gdr_mn_gone_work);
	mmu_notifier_call_srcu(&pt->mn_rcu, gdr_mn_gone_rcu);
}
#else
/* Asynchronous (SRCU): the notifier's references go in .free_notifier. */
static void gdr_mn_put(struct gdr_pt *pt)
{
	mmu_notifier_put(&pt->mn);
}
#endif

static void gdr_map_free(struct gdr_map *m)
{
	if (!m)
		return;
	sg_free_table(&m->sgt);
#ifdef GDR_P2P_DGPU
	kfree(m->pub.dma_addresses);
#else
	kfree(m->pub.hw_address);
	kfree(m->pub.hw_len);
#endif
	kfree(m);
}

/* Under map_lock: unmap pt's live mapping @m and forget it. The caller frees it after unlocking. */
static void gdr_unmap_locked(struct gdr_pt *pt, struct gdr_map *m)
{
	lockdep_assert_held(&pt->map_lock);
	gdr_reg_del(&m->key);
	dma_unmap_sgtable(m->dev, &m->sgt, m->dir, 0);
	pt->map = NULL;
#ifndef GDR_P2P_DGPU
	if (pt->pub)
		pt->pub->mapped &= ~NVIDIA_P2P_MAPPED;
#endif
}

#ifdef GDR_P2P_DGPU
static void gdr_teardown(struct gdr_pt *pt);
#endif

/*
 * Run the client's free callback (this thread claimed it), then finish the end of life. @invalidating: from
 * invalidate_range_start, whose lockdep map the kernel already orders after fs_reclaim (the priming in
 * __mmu_notifier_register); fs_reclaim taken inside it would be a false recursion.
 */
static void gdr_fire(struct gdr_pt *pt, bool invalidating)
{
	if (READ_ONCE(reclaim_callbacks) && !invalidating) {
		unsigned int noreclaim;

		/* As __perform_reclaim: the lockdep map first, then no reclaim from inside reclaim. */
		fs_reclaim_acquire(GFP_KERNEL);
		noreclaim = memalloc_noreclaim_save();
		pt->free_callback(pt->data);
		memalloc_noreclaim_restore(noreclaim);
		fs_reclaim_release(GFP_KERNEL);
	} else {
		pt->free_callback(pt->data);
	}
#ifdef GDR_P2P_DGPU
	/* NVIDIA's dGPU driver frees the page table and its mappings itself once the callback returns. */
	gdr_teardown(pt);
#endif
	spin_lock(&pt->lock);
	pt->cb_task = NULL;
	spin_unlock(&pt->lock);
	complete_all(&pt->done);
}

/* ---------------------------------------------------------------------------------------------------- */
/*
 * Test control: with revoke_after_map_us > 0, the memory of every table "goes away" that many microseconds
 * after nvidia_p2p_dma_map_pages mapped it: the client's free callback runs as from an invalidation, on a
 * high-priority work item queued on the CPU that mapped, so it preempts the client wherever it is after its
 * map call. revokes_done counts the revokes finished (whether or not a callback was still due). Lets the
 * bench land a free callback between a client's pin and what the client does next.
 */
static unsigned int revoke_after_map_us;
module_param(revoke_after_map_us, uint, 0644);
MODULE_PARM_DESC(revoke_after_map_us, "test only: run the free callback this long after each DMA map (us, 0: never)");

static atomic_t revokes_done = ATOMIC_INIT(0);

static int gdr_revokes_get(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "%d\n", atomic_read(&revokes_done));
}

static const struct kernel_param_ops gdr_revokes_ops = { .get = gdr_revokes_get };
module_param_cb(revokes_done, &gdr_revokes_ops, NULL, 0444);
MODULE_PARM_DESC(revokes_done, "test only: revokes (revoke_after_map_us) finished");

static struct workqueue_struct *gdr_revoke_wq;	/* per-CPU, high priority; drained at module exit */

struct gdr_revoke {
	struct hrtimer timer;
	struct work_struct work;
	struct gdr_pt *pt;		/* with a reference */
};

static void gdr_revoke_work(struct work_struct *work)
{
	struct gdr_revoke *r = container_of(work, struct gdr_revoke, work);
	struct gdr_pt *pt = r->pt;
	u32 act = gdr_event(pt, GDR_EV_INVALIDATE | GDR_EV_COVERS | GDR_EV_BLOCKABLE);

	/* As gdr_mn_invalidate_range_start; a table already at its end of life asks for nothing. */
	if (act & GDR_A_PUT_NOTIFIER)
		gdr_mn_put(pt);
	if (act & GDR_A_RUN_CALLBACK)
		gdr_fire(pt, false);
	gdr_pt_put(pt);
	kfree(r);
	atomic_inc(&revokes_done);
	/* The work runs on gdr_revoke_wq, which module exit drains: it never returns into freed text. */
	module_put(THIS_MODULE);
}

static enum hrtimer_restart gdr_revoke_fire(struct hrtimer *t)
{
	struct gdr_revoke *r = container_of(t, struct gdr_revoke, timer);

	queue_work_on(smp_processor_id(), gdr_revoke_wq, &r->work);
	return HRTIMER_NORESTART;
}

/* After a successful map, if revoke_after_map_us asks for it: arm the revoke of @pt on this CPU. */
static void gdr_revoke_later(struct gdr_pt *pt)
{
	unsigned int us = READ_ONCE(revoke_after_map_us);
	struct gdr_revoke *r;

	if (!us)
		return;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return;
	kref_get(&pt->ref);
	__module_get(THIS_MODULE);	/* until the work item's end: the timer and work code are ours */
	r->pt = pt;
	INIT_WORK(&r->work, gdr_revoke_work);
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	hrtimer_setup(&r->timer, gdr_revoke_fire, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED);
#else
	hrtimer_init(&r->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED);
	r->timer.function = gdr_revoke_fire;
#endif
	hrtimer_start(&r->timer, ns_to_ktime((u64)us * NSEC_PER_USEC), HRTIMER_MODE_REL_PINNED);
}

/* ---------------------------------------------------------------------------------------------------- */
/* mmu notifier */

static int gdr_mn_invalidate_range_start(struct mmu_notifier *mn, const struct mmu_notifier_range *range)
{
	struct gdr_pt *pt = container_of(mn, struct gdr_pt, mn);
	struct gdr_frame frame = { .task = current };
	u32 ev, act;

	if (!gdr_p2p_rs_covers(range->start, range->end, pt->vaddr))
		return 0;	/* NVIDIA's rule: only the page holding vaddr matters */
	ev = GDR_EV_INVALIDATE | GDR_EV_COVERS;
	if (mmu_notifier_range_blockable(range) || READ_ONCE(nonblock_callbacks))
		ev |= GDR_EV_BLOCKABLE;
	act = gdr_event(pt, ev);
	if (act & GDR_A_AGAIN)
		return -EAGAIN;
	/*
	 * Drop the notifier first, like NVIDIA. gdr_mn_put() is asynchronous (SRCU), so it is allowed from
	 * inside our own callback, and pt stays alive: the notifier's reference goes after a grace period.
	 */
	if (act & GDR_A_PUT_NOTIFIER)
		gdr_mn_put(pt);
	if (act & GDR_A_RUN_CALLBACK) {
		spin_lock(&gdr_frames_lock);
		list_add(&frame.node, &gdr_frames);
		spin_unlock(&gdr_frames_lock);
		gdr_fire(pt, true);
		spin_lock(&gdr_frames_lock);
		list_del(&frame.node);
		spin_unlock(&gdr_frames_lock);
	}
	return 0;
}

/* Process exit (exit_mmap), or our own mmu_notifier_unregister() from put_pages. */
static void gdr_mn_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct gdr_pt *pt = container_of(mn, struct gdr_pt, mn);
	u32 act = gdr_event(pt, GDR_EV_RELEASE);

	if (act & GDR_A_PUT_NOTIFIER)	/* allowed from .release, see gdr_mn_put() */
		gdr_mn_put(pt);
	if (act & GDR_A_RUN_CALLBACK)
		gdr_fire(pt, false);
}

#ifdef GDR_OLD_MMU_NOTIFIER
/* 4.x's form: void, the range as arguments, always blockable (so never GDR_A_AGAIN). */
static void gdr_mn_invalidate_range_start_old(struct mmu_notifier *mn, struct mm_struct *mm,
					      unsigned long start, unsigned long end)
{
	const struct mmu_notifier_range range = { .mm = mm, .start = start, .end = end };

	gdr_mn_invalidate_range_start(mn, &range);
}

static const struct mmu_notifier_ops gdr_mn_ops = {
	.release = gdr_mn_release,
	.invalidate_range_start = gdr_mn_invalidate_range_start_old,
};
#else
static void gdr_mn_free_notifier(struct mmu_notifier *mn)
{
	gdr_notifier_gone(container_of(mn, struct gdr_pt, mn));
}

static const struct mmu_notifier_ops gdr_mn_ops = {
	.release = gdr_mn_release,
	.invalidate_range_start = gdr_mn_invalidate_range_start,
	.free_notifier = gdr_mn_free_notifier,
};
#endif

/*
 * Publish @pub (before the notifier: the callback may fire, and the client look the table up, before
 * get_pages returns), then watch current->mm. On failure pt is as before (pinned, not published).
 */
static int gdr_pt_register(struct gdr_pt *pt, void *pub, u64 vaddr, void (*cb)(void *), void *data)
{
	int ret;

	pt->pub = pub;
	pt->mm = current->mm;
	pt->vaddr = vaddr;
	pt->free_callback = cb;
	pt->data = data;
	pt->state = GDR_STATE_INITIAL;
	pt->mn.ops = &gdr_mn_ops;
	gdr_reg_add(&pt->key, pub, pt, GDR_KIND_TABLE);

	/* The notifier's own references: on pt, and on this module (its ops live here). */
	kref_get(&pt->ref);
	__module_get(THIS_MODULE);
	ret = mmu_notifier_register(&pt->mn, current->mm);
	if (ret) {
		module_put(THIS_MODULE);
		gdr_pt_put(pt);
		gdr_reg_del(&pt->key);
		pt->pub = NULL;
	}
	return ret;
}

/* get_pages failed after pinning: unpin (nothing wrote the pages) and free pt. */
static void gdr_pt_abort(struct gdr_pt *pt)
{
	pt->pinned = false;
	unpin_user_pages(pt->pages, pt->npages);
	gdr_pt_put(pt);
}

/* Take the pages and the public table away from pt (once); the caller unpins and frees after unlocking. */
static struct nvidia_p2p_page_table *gdr_retire_locked(struct gdr_pt *pt, bool *pinned)
{
	struct nvidia_p2p_page_table *pub = pt->pub;

	lockdep_assert_held(&pt->map_lock);
	pt->pub = NULL;
	gdr_reg_del(&pt->key);
	*pinned = pt->pinned;
	pt->pinned = false;
	return pub;
}

#ifndef GDR_P2P_DGPU
/* ==================================== Jetson flavour ==================================== */

int nvidia_p2p_get_pages(u64 vaddr, u64 size, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	struct nvidia_p2p_page_table *pub;
	struct gdr_pt *pt;
	u32 npages;
	u64 first;
	int ret;

	if (!page_table || !free_callback || !data)
		return -EINVAL;
	ret = gdr_p2p_rs_jetson_span(vaddr, size, PAGE_SHIFT, &first, &npages);
	if (ret)
		return ret;

	pub = kzalloc(sizeof(*pub), GFP_KERNEL);
	if (!pub)
		return -ENOMEM;
	pt = gdr_pt_pin(first, npages);
	if (IS_ERR(pt)) {
		kfree(pub);
		return PTR_ERR(pt);
	}

	pub->version = NVIDIA_P2P_PAGE_TABLE_VERSION;
	pub->page_size = NVIDIA_P2P_PAGE_SIZE_4KB;
	pub->size = size;
	pub->entries = npages;
	pub->pages = pt->pages;
	pub->vaddr = vaddr;
	pub->mapped = NVIDIA_P2P_PINNED;
	pub->mm = current->mm;
	mutex_init(&pub->lock);		/* layout only: gdr_pt's map_lock is the lock used */
	pub->free_callback = free_callback;
	pub->data = data;

	*page_table = pub;	/* like NVIDIA: set before the notifier can fire */
	ret = gdr_pt_register(pt, pub, vaddr, free_callback, data);
	if (ret) {
		*page_table = NULL;
		kfree(pub);
		gdr_pt_abort(pt);
	}
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(struct nvidia_p2p_page_table *page_table)
{
	struct gdr_pt *pt;
	u32 act;

	if (!page_table)
		return -EINVAL;
	pt = gdr_reg_get(page_table, GDR_KIND_TABLE);
	if (!pt)
		return -EINVAL;
	act = gdr_event(pt, GDR_EV_PUT_JETSON);
	if (act & GDR_A_UNREGISTER) {
		/*
		 * Runs .release, which runs the callback, on this thread (or waits, through SRCU, for exit_mmap's
		 * .release running it): the callback has returned when this returns. The client may have freed
		 * page_table by now; only pt is touched below.
		 */
		mmu_notifier_unregister(&pt->mn, pt->mm);
		gdr_notifier_gone(pt);
		complete_all(&pt->done);
	} else if (act & GDR_A_WAIT) {
		gdr_wait(pt);
	}
	gdr_pt_put(pt);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct nvidia_p2p_page_table *pub;
	struct gdr_map *m = NULL;
	struct gdr_pt *pt;
	bool pinned = false;
	u32 act;

	if (!page_table)
		return 0;
	pt = gdr_reg_get(page_table, GDR_KIND_TABLE);
	if (!pt)
		return -EINVAL;

	act = gdr_event(pt, GDR_EV_FREE_TABLE);
	if (act & GDR_A_PUT_NOTIFIER)	/* freed without put_pages and before any callback: detach */
		gdr_mn_put(pt);

	mutex_lock(&pt->map_lock);
	pub = pt->pub;
	if (pub) {
		m = pt->map;
		/* NVIDIA WARNs and leaks the mapping; here it is unmapped. */
		if (WARN_ONCE(m, "gdr_nv_p2p: free_page_table with a live DMA mapping; unmapping it\n"))
			gdr_unmap_locked(pt, m);
		gdr_retire_locked(pt, &pinned);
		pub->pages = NULL;
		pub->mapped = NVIDIA_P2P_UNINITIALIZED;
	}
	mutex_unlock(&pt->map_lock);

	gdr_map_free(m);
	if (pinned)
		gdr_unpin(pt);
	if (pub)
		gdr_pt_put(pt);		/* the registry's reference */
	gdr_pt_put(pt);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

/* Build the sg table (merged physically contiguous runs, within the device's segment limits). */
static struct gdr_map *gdr_map_alloc(struct gdr_pt *pt, struct device *dev, enum dma_data_direction dir)
{
	u32 *first = NULL, *count = NULL;
	struct scatterlist *sg;
	struct gdr_map *m;
	u64 *phys;
	size_t n, i;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	phys = gdr_phys(pt);
	/* Zeroed: Rust makes &mut [u32] of them, which must hold initialised values. */
	first = kvcalloc(pt->npages, sizeof(*first), GFP_KERNEL);
	count = kvcalloc(pt->npages, sizeof(*count), GFP_KERNEL);
	if (!m || !phys || !first || !count)
		goto fail;
	INIT_HLIST_NODE(&m->key.node);
	m->dev = dev;
	m->dir = dir;
	n = gdr_p2p_rs_plan_segments(phys, pt->npages, PAGE_SHIFT, dma_get_max_seg_size(dev),
				     dma_get_seg_boundary(dev), first, count);
	if (sg_alloc_table(&m->sgt, n, GFP_KERNEL))
		goto fail;
	for_each_sgtable_sg(&m->sgt, sg, i)
		sg_set_page(sg, pt->pages[first[i]], count[i] << PAGE_SHIFT, 0);
	/* At most n DMA segments come back. */
	m->pub.hw_address = kcalloc(n, sizeof(*m->pub.hw_address), GFP_KERNEL);
	m->pub.hw_len = kcalloc(n, sizeof(*m->pub.hw_len), GFP_KERNEL);
	if (!m->pub.hw_address || !m->pub.hw_len)
		goto fail;
	kvfree(phys);
	kvfree(first);
	kvfree(count);
	return m;
fail:
	kvfree(phys);
	kvfree(first);
	kvfree(count);
	gdr_map_free(m);
	return NULL;
}

int nvidia_p2p_dma_map_pages(struct device *dev, struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **map, enum dma_data_direction direction)
{
	struct scatterlist *sg;
	struct gdr_map *m;
	struct gdr_pt *pt;
	int ret;
	u32 i;

	if (!map)
		return -EINVAL;
	*map = NULL;
	if (!dev || !page_table || !valid_dma_direction(direction))
		return -EINVAL;
	pt = gdr_reg_get(page_table, GDR_KIND_TABLE);
	if (!pt)
		return -EINVAL;

	m = gdr_map_alloc(pt, dev, direction);	/* GFP_KERNEL: before map_lock */
	if (!m) {
		gdr_pt_put(pt);
		return -ENOMEM;
	}

	mutex_lock(&pt->map_lock);
	if (!pt->pub || !pt->pinned || !gdr_may_map(pt))
		ret = -EINVAL;		/* freed, or its callback has been claimed */
	else if (pt->map)
		ret = -EBUSY;		/* one mapping per table (NVIDIA tracks only one, in a bit) */
	else
		ret = dma_map_sgtable(dev, &m->sgt, direction, 0);
	if (!ret) {
		m->pub.version = NVIDIA_P2P_DMA_MAPPING_VERSION;
		m->pub.entries = m->sgt.nents;
		for_each_sgtable_dma_sg(&m->sgt, sg, i) {
			m->pub.hw_address[i] = sg_dma_address(sg);
			m->pub.hw_len[i] = sg_dma_len(sg);
		}
		m->pub.sgt = &m->sgt;
		m->pub.dev = dev;
		m->pub.page_table = pt->pub;
		m->pub.direction = direction;
		gdr_reg_add(&m->key, &m->pub, pt, GDR_KIND_MAP);
		pt->map = m;
		pt->pub->mapped |= NVIDIA_P2P_MAPPED;
	}
	mutex_unlock(&pt->map_lock);

	if (ret) {
		gdr_map_free(m);	/* never 0 with *map == NULL */
	} else {
		*map = &m->pub;
		gdr_revoke_later(pt);
	}
	gdr_pt_put(pt);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct nvidia_p2p_dma_mapping *map)
{
	struct gdr_map *m;
	struct gdr_pt *pt;

	if (!map)
		return -EINVAL;
	pt = gdr_reg_get(map, GDR_KIND_MAP);
	if (!pt)
		return -EINVAL;		/* not mapped, or already unmapped */
	if (READ_ONCE(hold_callback_unmap) && gdr_in_invalidate())
		gdr_hold_unmap();
	mutex_lock(&pt->map_lock);
	m = pt->map;
	if (m && &m->pub == map)
		gdr_unmap_locked(pt, m);
	else
		m = NULL;
	mutex_unlock(&pt->map_lock);
	gdr_pt_put(pt);
	if (!m)
		return -EINVAL;
	gdr_map_free(m);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	return nvidia_p2p_dma_unmap_pages(dma_mapping);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

#else /* GDR_P2P_DGPU */
/* ===================================== dGPU flavour ===================================== */

/* Not a GPU: a UUID that says so ("gdr-nv-p2p-host" + version byte). */
static const u8 gdr_fake_uuid[NVIDIA_P2P_GPU_UUID_LEN] = {
	'g', 'd', 'r', '-', 'n', 'v', '-', 'p', '2', 'p', '-', 'h', 'o', 's', 't', 1
};

int nvidia_p2p_cap_persistent_pages;	/* 0: persistent pages are not provided */
EXPORT_SYMBOL_GPL(nvidia_p2p_cap_persistent_pages);

static void gdr_dgpu_pub_free(struct gdr_pt *pt, struct nvidia_p2p_page_table *pub)
{
	kfree(pt->gpages);
	pt->gpages = NULL;
	if (!pub)
		return;
	kfree(pub->gpu_uuid);
	kfree(pub->pages);
	kfree(pub);
}

/* Unmap, free the public table, unpin: NVIDIA's dGPU end of life (put_pages, or after the callback). */
static void gdr_teardown(struct gdr_pt *pt)
{
	struct nvidia_p2p_page_table *pub;
	struct gdr_map *m;
	bool pinned = false;

	mutex_lock(&pt->map_lock);
	pub = pt->pub;
	m = pt->map;
	if (m)
		gdr_unmap_locked(pt, m);
	if (pub)
		gdr_retire_locked(pt, &pinned);
	mutex_unlock(&pt->map_lock);

	gdr_map_free(m);
	if (pinned)
		gdr_unpin(pt);
	if (pub) {
		gdr_dgpu_pub_free(pt, pub);
		gdr_pt_put(pt);		/* the registry's reference */
	}
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address, u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	struct nvidia_p2p_page_table *pub = NULL;
	u32 npages, ngpu, i;
	struct gdr_pt *pt;
	u64 *phys;
	ssize_t bad;
	int ret;

	/* The tokens are deprecated (pass 0, 0); they name nothing here and are ignored. */
	if (!page_table || !free_callback)
		return -EINVAL;
	*page_table = NULL;
	ret = gdr_p2p_rs_gpu_span(virtual_address, length, PAGE_SHIFT, GDR_GPU_PAGE_SHIFT, &npages, &ngpu);
	if (ret)
		return ret;

	pt = gdr_pt_pin(virtual_address, npages);
	if (IS_ERR(pt))
		return PTR_ERR(pt);

	/* One bus address per 64 KiB page only makes sense for physically contiguous, aligned blocks. */
	phys = gdr_phys(pt);
	if (!phys) {
		ret = -ENOMEM;
		goto unpin;
	}
	bad = gdr_p2p_rs_check_gpu_pages(phys, npages, PAGE_SHIFT, GDR_GPU_PAGE_SHIFT);
	kvfree(phys);
	if (bad >= 0) {
		pr_info_ratelimited("gdr_nv_p2p: %#llx+%#llx: GPU page %zd is not one aligned, physically contiguous 64 KiB block (map /dev/gdr_nv_p2p_vram for such memory)\n",
				    virtual_address, length, bad);
		ret = -EINVAL;	/* what NVIDIA's driver says for memory that is not GPU memory */
		goto unpin;
	}

	ret = -ENOMEM;
	pub = kzalloc(sizeof(*pub), GFP_KERNEL);
	if (!pub)
		goto unpin;
	pub->pages = kcalloc(ngpu, sizeof(*pub->pages), GFP_KERNEL);
	pt->gpages = kcalloc(ngpu, sizeof(*pt->gpages), GFP_KERNEL);
	pub->gpu_uuid = kmemdup(gdr_fake_uuid, sizeof(gdr_fake_uuid), GFP_KERNEL);
	if (!pub->pages || !pt->gpages || !pub->gpu_uuid)
		goto unpin;
	pt->ngpu = ngpu;
	for (i = 0; i < ngpu; i++) {
		pt->gpages[i].physical_address =
			page_to_phys(pt->pages[(size_t)i << (GDR_GPU_PAGE_SHIFT - PAGE_SHIFT)]);
		pub->pages[i] = &pt->gpages[i];
	}
	pub->entries = ngpu;
	pub->page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	pub->version = NVIDIA_P2P_PAGE_TABLE_VERSION;

	*page_table = pub;
	ret = gdr_pt_register(pt, pub, virtual_address, free_callback, data);
	if (ret) {
		*page_table = NULL;
		goto unpin;
	}
	return 0;

unpin:
	gdr_dgpu_pub_free(pt, pub);
	gdr_pt_abort(pt);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	struct gdr_pt *pt;
	u32 act;

	if (!page_table)
		return 0;	/* NVIDIA */
	pt = gdr_reg_get(page_table, GDR_KIND_TABLE);
	if (!pt)
		return 0;	/* already freed after its callback: NVIDIA returns 0 too */
	if (virtual_address != pt->vaddr) {
		gdr_pt_put(pt);
		return -EINVAL;
	}
	act = gdr_event(pt, GDR_EV_PUT_DGPU);
	if (act & GDR_A_UNREGISTER) {
		/* Runs .release, which does nothing now: the dGPU put_pages does not run the callback. */
		mmu_notifier_unregister(&pt->mn, pt->mm);
		gdr_notifier_gone(pt);
		gdr_teardown(pt);
		complete_all(&pt->done);
	} else if (act & GDR_A_WAIT) {
		gdr_wait(pt);
	}
	gdr_pt_put(pt);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table, u32 flags)
{
	return -EOPNOTSUPP;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages_persistent(u64 virtual_address, struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	return -EOPNOTSUPP;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);

/* No-ops, as in NVIDIA's driver: the page table and its mappings are freed by the provider. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	u64 *seg_addr = NULL, *seg_len = NULL;
	struct scatterlist *sg;
	struct gdr_map *m;
	struct gdr_pt *pt;
	struct device *dev;
	int ret, nseg = 0;
	u32 i;

	if (!dma_mapping)
		return -EINVAL;
	*dma_mapping = NULL;
	if (!peer || !page_table)
		return -EINVAL;
	pt = gdr_reg_get(page_table, GDR_KIND_TABLE);
	if (!pt)
		return -EINVAL;
	dev = &peer->dev;

	/* One sg entry per GPU page (64 KiB, physically contiguous: checked by get_pages). */
	ret = -ENOMEM;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		goto out;
	INIT_HLIST_NODE(&m->key.node);
	m->dev = dev;
	m->dir = DMA_BIDIRECTIONAL;
	m->pub.dma_addresses = kcalloc(pt->ngpu, sizeof(*m->pub.dma_addresses), GFP_KERNEL);
	seg_addr = kvmalloc_array(pt->ngpu, sizeof(*seg_addr), GFP_KERNEL);
	seg_len = kvmalloc_array(pt->ngpu, sizeof(*seg_len), GFP_KERNEL);
	if (!m->pub.dma_addresses || !seg_addr || !seg_len || sg_alloc_table(&m->sgt, pt->ngpu, GFP_KERNEL))
		goto out;
	for_each_sgtable_sg(&m->sgt, sg, i)
		sg_set_page(sg, pt->pages[(size_t)i << (GDR_GPU_PAGE_SHIFT - PAGE_SHIFT)],
			    GDR_GPU_PAGE_SIZE, 0);

	mutex_lock(&pt->map_lock);
	if (!pt->pub || !pt->pinned || !gdr_may_map(pt))
		ret = -EINVAL;
	else if (pt->map)
		ret = -EBUSY;		/* one mapping (one peer) per table */
	else if (dma_get_max_seg_size(dev) < GDR_GPU_PAGE_SIZE)
		ret = -EINVAL;		/* the peer cannot take a 64 KiB segment */
	else
		ret = dma_map_sgtable(dev, &m->sgt, DMA_BIDIRECTIONAL, 0);
	if (!ret) {
		for_each_sgtable_dma_sg(&m->sgt, sg, i) {
			seg_addr[i] = sg_dma_address(sg);
			seg_len[i] = sg_dma_len(sg);
		}
		nseg = m->sgt.nents;
		ret = gdr_p2p_rs_gpu_bus_addrs(seg_addr, seg_len, nseg, GDR_GPU_PAGE_SHIFT,
					       m->pub.dma_addresses, pt->ngpu);
		if (ret)
			dma_unmap_sgtable(dev, &m->sgt, DMA_BIDIRECTIONAL, 0);
	}
	if (!ret) {
		m->pub.version = NVIDIA_P2P_DMA_MAPPING_VERSION;
		m->pub.page_size_type = NVIDIA_P2P_PAGE_SIZE_64KB;
		m->pub.entries = pt->ngpu;
		m->pub.private = m;
		m->pub.pci_dev = peer;
		gdr_reg_add(&m->key, &m->pub, pt, GDR_KIND_MAP);
		pt->map = m;
	}
	mutex_unlock(&pt->map_lock);

out:
	kvfree(seg_addr);
	kvfree(seg_len);
	if (ret) {
		gdr_map_free(m);
	} else {
		*dma_mapping = &m->pub;
		gdr_revoke_later(pt);
	}
	gdr_pt_put(pt);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct gdr_map *m;
	struct gdr_pt *pt;

	if (!peer || !page_table || !dma_mapping)
		return -EINVAL;
	pt = gdr_reg_get(dma_mapping, GDR_KIND_MAP);
	if (!pt)
		return 0;	/* already gone with its page table: NVIDIA returns 0 too */
	mutex_lock(&pt->map_lock);
	m = pt->map;
	if (m && &m->pub == dma_mapping && pt->pub == page_table) {
		WARN_ON_ONCE(peer != m->pub.pci_dev);
		gdr_unmap_locked(pt, m);
	} else {
		m = NULL;
	}
	mutex_unlock(&pt->map_lock);
	gdr_pt_put(pt);
	if (!m)
		return -EINVAL;
	gdr_map_free(m);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

#endif /* GDR_P2P_DGPU */

/* ---------------------------------------------------------------------------------------------------- */

int gdr_p2p_c_init(void)
{
	static const u32 events[7] = {
		GDR_EV_INVALIDATE, GDR_EV_RELEASE, GDR_EV_PUT_JETSON, GDR_EV_PUT_DGPU, GDR_EV_FREE_TABLE,
		GDR_EV_COVERS, GDR_EV_BLOCKABLE,
	};
	static const u32 actions[6] = {
		GDR_A_AGAIN, GDR_A_PUT_NOTIFIER, GDR_A_UNREGISTER, GDR_A_RUN_CALLBACK, GDR_A_WAIT,
		GDR_A_INVALID,
	};
	int ret;

	if (!gdr_p2p_rs_abi_matches(GDR_STATE_INITIAL, events, actions)) {
		pr_err("gdr_nv_p2p: internal.h and logic.rs disagree\n");
		return -EINVAL;
	}
	gdr_wq = alloc_workqueue("gdr_nv_p2p", WQ_UNBOUND, 0);
	if (!gdr_wq)
		return -ENOMEM;
	gdr_revoke_wq = alloc_workqueue("gdr_nv_p2p_revoke", WQ_HIGHPRI, 0);
	if (!gdr_revoke_wq) {
		destroy_workqueue(gdr_wq);
		return -ENOMEM;
	}
#ifdef GDR_P2P_DGPU
	ret = gdr_vram_init();
	if (ret) {
		destroy_workqueue(gdr_revoke_wq);
		destroy_workqueue(gdr_wq);
		return ret;
	}
#else
	ret = 0;
#endif
	pr_info("gdr_nv_p2p: nvidia_p2p provider %#x loaded (%s flavour; not NVIDIA's module)\n",
		gdr_nv_p2p_provider_version, GDR_FLAVOUR_NAME);
	return ret;
}

void gdr_p2p_c_exit(void)
{
#ifdef GDR_P2P_DGPU
	gdr_vram_exit();
#endif
	mmu_notifier_synchronize();	/* pending .free_notifier calls (gdr_mn_put) */
	destroy_workqueue(gdr_revoke_wq);	/* a revoke's tail after its module_put */
	destroy_workqueue(gdr_wq);	/* pending unpins */
	if (atomic_read(&gdr_live))
		pr_warn("gdr_nv_p2p: unloading with %d page tables never freed by their clients\n",
			atomic_read(&gdr_live));
}
