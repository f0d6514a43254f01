// SPDX-License-Identifier: GPL-2.0
/*
 * picoevb.ko: C shim onto NVIDIA's nvidia_p2p API (pinning CUDA memory for GPUDirect RDMA). Jetson variant
 * by default; NVIDIA's dGPU variant with GDR_P2P_DGPU. See docs/nvidia-p2p.md.
 *
 * Provider lookup. The provider's functions are resolved at RUN time with symbol_get()/symbol_put(), so
 * picoevb.ko has no "depends:" on any provider and loads where there is none (GPU pinning then reports
 * -EOPNOTSUPP). Whichever module exports the names is used: gdr's gdr_nv_p2p.ko (test VMs, mainline) or
 * NVIDIA's (nvidia-p2p / nvidia-oot on L4T, nvidia.ko for dGPU). Caveat: since Linux 6.5, symbol_get()
 * only resolves EXPORT_SYMBOL_GPL symbols. gdr_nv_p2p.ko exports GPL; NVIDIA's Tegra module exports with
 * plain EXPORT_SYMBOL, so on L4T kernels >= 6.5 build with GDR_P2P_LINKED (direct calls, a hard module
 * dependency, KBUILD_EXTRA_SYMBOLS pointing at the provider's Module.symvers). L4T R35 (5.10) and R36 (5.15)
 * resolve at run time.
 *
 * Header. By default the gdr header (kmod/include/nv-p2p.h: R32-final/R36 layout, "version" first).
 * A build against a real L4T kernel must use that kernel's header (some R35 revisions have no "version"
 * field): define GDR_P2P_SYSTEM_HEADER to include <linux/nv-p2p.h> (dGPU: <nv-p2p.h>) instead.
 *
 * Lifecycle contract (the driver's side):
 *   - pevb_p2p_get() before pinning, pevb_p2p_put() once per successful get. Each pin also holds the
 *     provider's symbols itself until it is completely freed, so the order of put and a late callback does
 *     not matter.
 *   - pevb_p2p_pin() stores p in *out BEFORE free_cb can run for it, so free_cb may find p through data
 *     (pass an out pointer inside the driver's own per-pin struct).
 *   - pevb_p2p_pin() registers the driver's free_cb(data). Exactly one call of free_cb(data) ends every
 *     successful pin: from the provider (process exit, the memory freed or unmapped: asynchronous, in mmu
 *     notifier context) or from pevb_p2p_unpin() (synchronously, on the unpinning thread). free_cb must
 *     release the driver's own state for the pin, make sure the device no longer DMAs to it, and call
 *     pevb_p2p_free_from_callback(p) exactly once. It may sleep briefly but must not wait for long (no lock
 *     held across a whole DMA), must not allocate with GFP_KERNEL while holding a lock that is also held
 *     around such an allocation (lockdep: it runs in reclaim context), and must not call pevb_p2p_unpin().
 *   - pevb_p2p_unpin(p) at most once per pin, once no DMA uses it (it drops the device's mapping). free_cb
 *     may have begun on another thread before, or begin while unpin runs: the shim then skips the
 *     provider's put; the driver must not free (pevb_p2p_free_from_callback) before unpin has returned.
 *   - If the memory goes away while pevb_p2p_pin() is still running, the pin fails (-EFAULT) and free_cb is
 *     never called for it.
 *   - Segments (pevb_p2p_segments) are built at pin time in the shim's own struct, bus-contiguous
 *     neighbours merged, and never change; the array may be read until the driver calls
 *     pevb_p2p_free_from_callback(p). So a DMA borrows them under its use of the surface and allocates
 *     nothing while it holds one (the callback, which waits for uses, may run from reclaim on that thread).
 *   - pevb_p2p_use_acquire()/_release() bracket each DMA's use of a surface and free_cb calls
 *     pevb_p2p_uses_awaited() before it waits for them: lockdep annotations (no-ops without lockdep) that
 *     show an allocation or a lock a callback needs taken while a use is held, since free_cb is ordered
 *     after fs_reclaim (invalidations) and the wait itself is invisible to lockdep.
 *
 * Inside the shim: the provider gets a trampoline as its callback, which (a) drops a callback that arrives
 * while pinning is still in progress (the pin then fails and cleans up), (b) lets free_cb run once only,
 * even if a provider were to call twice. struct pevb_p2p is refcounted: one reference for the pin (dropped
 * by pevb_p2p_free_from_callback), one held by pevb_p2p_unpin() while it runs. Jetson's put_pages runs the
 * callback synchronously, so free_from_callback usually runs INSIDE put_pages; the page table struct is
 * kfree()d (NVIDIA's Tegra free_page_table does not free it: the jetson-rdma-picoevb leak fix) only when
 * the last reference goes, i.e. after put_pages has returned, because NVIDIA's put_pages still touches the
 * table's embedded mmu notifier after the callback. Likewise, when NVIDIA's Tegra module (not gdr's) ran the
 * callback from an invalidation or from process exit, its notifier is still linked or queued for an SRCU
 * free inside the table, so that kfree() waits for both (see pevb_p2p_destroy).
 *
 * Pinned host memory (PIN_HOST; Thor, and Orin after CUDA 14, where NVIDIA's guide says to pin
 * cuMemHostAlloc memory instead of calling nvidia_p2p): pevb_p2p_pin_host() gives the driver the same
 * struct pevb_p2p, under the same contract, with no provider behind it. The pages are a watched pin
 * (watched.c: long-term, charged to RLIMIT_MEMLOCK, under an mmu interval notifier); the notifier plays
 * the provider's part and calls the trampoline once the memory is unmapped, from the invalidation that
 * unmaps it. The trampoline's free_cb waits for the DMAs and free_from_callback drops the device's
 * mapping there; the unpin and the notifier's removal come with the last reference, which the trampoline
 * leaves to pevb_p2p_wq (a notifier is never removed from its own callback, and unpinning dirty pages
 * takes folio locks an invalidation may hold). pevb_p2p_unpin() calls free_cb itself, as on dGPU.
 *
 * An imported dma-buf (IMPORT_DMABUF): pevb_p2p_import_dmabuf() gives the same struct pevb_p2p again, over
 * dmabuf.c's dynamic attachment. The exporter's move_notify plays the provider's part: it calls the
 * trampoline with the buffer's reservation lock held, and free_cb's wait and unmap run there, so the card
 * no longer reaches the memory when the exporter moves it. The detach comes with the last reference, on
 * pevb_p2p_wq when the callback dropped it. pevb_p2p_unpin() calls free_cb itself, as for host memory.
 *
 * Two rules about context:
 *   - free_cb never runs from a non-blockable invalidation (the OOM reaper, process_mrelease). NVIDIA's
 *     Tegra module calls it from those too, and it sleeps (NVIDIA's own mutexes, and the driver waits for
 *     its DMAs). So each Jetson pin also holds a "guard" interval notifier on its range, inserted before
 *     get_pages: the kernel calls interval notifiers before classic ones (__mmu_notifier_invalidate_range_start)
 *     and stops at the first refusal, so the guard's refusal of a non-blockable range keeps the provider's
 *     notifier from ever seeing it. The reaper then leaves this mm to exit_mmap, which may sleep. (Linux 4.x
 *     has no interval notifier and no guard, and needs none: every invalidation there may sleep, and its
 *     OOM reaper skips an mm that has notifiers, mm/oom_kill.c.)
 *   - The last reference to a pin is dropped inline only on a thread that holds picoevb.ko by other means
 *     (an ioctl or close of one of its files) and is not inside the provider's callback. Otherwise (the
 *     callback, possibly inside an invalidation where the guard cannot be removed) the free is queued on
 *     pevb_p2p_wq, which module exit drains: a queued free never runs on freed module text, and nobody
 *     waits for one (pevb_p2p_put returns at once). The callback itself still has to return through this
 *     module's text after that free may have run: module exit also waits for the mmu notifiers' SRCU
 *     (pevb_p2p_exit says why that covers it).
 */
#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/dma-direction.h>
#include <linux/dma-mapping.h>
#include <linux/errno.h>
#include <linux/iommu.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include "dmabuf.h"
#include "p2p.h"
#include "pin.h"
#include "watched.h"

#ifdef GDR_P2P_SYSTEM_HEADER
#ifdef GDR_P2P_DGPU
#include <nv-p2p.h>
#else
#include <linux/nv-p2p.h>
#endif
#else
#include "../include/nv-p2p.h"
#endif

/* gdr_nv_p2p.ko's marker (kmod/include/nv-p2p.h); declared here too for builds with NVIDIA's header. */
extern const u32 gdr_nv_p2p_provider_version;
#ifndef GDR_NV_P2P_PROVIDER_DGPU
#define GDR_NV_P2P_PROVIDER_DGPU	0x00000001U
#define GDR_NV_P2P_PROVIDER_FLAVOUR_MASK 0x000000ffU
#endif

#ifdef GDR_P2P_DGPU
#define PEVB_P2P_FLAVOUR	GDR_NV_P2P_PROVIDER_DGPU
#define PEVB_GPU_PAGE_SHIFT	16		/* dGPU GPU pages are 64 KiB */
#else
#define PEVB_P2P_FLAVOUR	0
#define PEVB_GPU_PAGE_SHIFT	PAGE_SHIFT	/* Tegra get_pages pins size >> PAGE_SHIFT from va & PAGE_MASK */
#endif
#define PEVB_GPU_PAGE_SIZE	(1ULL << PEVB_GPU_PAGE_SHIFT)

/* ---- the provider's functions, resolved at run time ---- */

struct pevb_p2p_ops {
	typeof(&nvidia_p2p_get_pages) get_pages;
	typeof(&nvidia_p2p_put_pages) put_pages;
	typeof(&nvidia_p2p_free_page_table) free_page_table;
	typeof(&nvidia_p2p_dma_map_pages) dma_map_pages;
	typeof(&nvidia_p2p_dma_unmap_pages) dma_unmap_pages;
	typeof(&nvidia_p2p_free_dma_mapping) free_dma_mapping;
	bool gdr;		/* gdr_nv_p2p.ko (it has the marker), not NVIDIA's module */
};

static DEFINE_MUTEX(pevb_p2p_ops_lock);
static unsigned int pevb_p2p_users;	/* pevb_p2p_get() references + live pins */
static struct pevb_p2p_ops pevb_p2p_ops;	/* valid while pevb_p2p_users > 0 */
static struct workqueue_struct *pevb_p2p_wq;	/* deferred frees; drained at module exit */

#ifdef GDR_P2P_LINKED
/* Direct calls: picoevb.ko depends on the provider (see the top of this file). */
#define PEVB_SYM_GET(x)	(&(x))
#define PEVB_SYM_PUT(x)	do { } while (0)
#else
#define PEVB_SYM_GET(x)	symbol_get(x)
#define PEVB_SYM_PUT(x)	symbol_put(x)
#endif

static void pevb_p2p_ops_drop(struct pevb_p2p_ops *o)
{
	if (o->get_pages)
		PEVB_SYM_PUT(nvidia_p2p_get_pages);
	if (o->put_pages)
		PEVB_SYM_PUT(nvidia_p2p_put_pages);
	if (o->free_page_table)
		PEVB_SYM_PUT(nvidia_p2p_free_page_table);
	if (o->dma_map_pages)
		PEVB_SYM_PUT(nvidia_p2p_dma_map_pages);
	if (o->dma_unmap_pages)
		PEVB_SYM_PUT(nvidia_p2p_dma_unmap_pages);
	if (o->free_dma_mapping)
		PEVB_SYM_PUT(nvidia_p2p_free_dma_mapping);
	memset(o, 0, sizeof(*o));
}

static int pevb_p2p_ops_resolve(struct pevb_p2p_ops *o)
{
	const u32 *marker;

	o->get_pages = PEVB_SYM_GET(nvidia_p2p_get_pages);
	o->put_pages = PEVB_SYM_GET(nvidia_p2p_put_pages);
	o->free_page_table = PEVB_SYM_GET(nvidia_p2p_free_page_table);
	o->dma_map_pages = PEVB_SYM_GET(nvidia_p2p_dma_map_pages);
	o->dma_unmap_pages = PEVB_SYM_GET(nvidia_p2p_dma_unmap_pages);
	o->free_dma_mapping = PEVB_SYM_GET(nvidia_p2p_free_dma_mapping);
	if (!o->get_pages || !o->put_pages || !o->free_page_table || !o->dma_map_pages ||
	    !o->dma_unmap_pages || !o->free_dma_mapping) {
		pevb_p2p_ops_drop(o);
		return -EOPNOTSUPP;
	}

#ifndef GDR_P2P_LINKED
	/* Which provider? gdr's says so, and which API flavour it was built for. */
	marker = symbol_get(gdr_nv_p2p_provider_version);
	if (marker) {
		u32 v = *marker;

		symbol_put(gdr_nv_p2p_provider_version);
		if ((v & GDR_NV_P2P_PROVIDER_FLAVOUR_MASK) != PEVB_P2P_FLAVOUR) {
			pr_err("picoevb: gdr_nv_p2p (%#x) implements the %s nvidia_p2p API, this driver was built for the %s one\n",
			       v, (v & GDR_NV_P2P_PROVIDER_DGPU) ? "dGPU" : "Jetson",
			       PEVB_P2P_FLAVOUR ? "dGPU" : "Jetson");
			pevb_p2p_ops_drop(o);
			return -EOPNOTSUPP;
		}
		o->gdr = true;
		pr_info("picoevb: nvidia_p2p provider: gdr_nv_p2p %#x\n", v);
	} else {
		pr_info("picoevb: nvidia_p2p provider: NVIDIA's module\n");
	}
#else
	marker = NULL;
	(void)marker;
	pr_info("picoevb: nvidia_p2p provider linked at build time\n");
#endif
	return 0;
}

/* One more user of the provider's functions. */
static int pevb_p2p_ops_get(void)
{
	int ret = 0;

	mutex_lock(&pevb_p2p_ops_lock);
	if (!pevb_p2p_users)
		ret = pevb_p2p_ops_resolve(&pevb_p2p_ops);
	if (!ret)
		pevb_p2p_users++;
	mutex_unlock(&pevb_p2p_ops_lock);
	return ret;
}

static void pevb_p2p_ops_put(void)
{
	mutex_lock(&pevb_p2p_ops_lock);
	if (!WARN_ON(!pevb_p2p_users) && !--pevb_p2p_users)
		pevb_p2p_ops_drop(&pevb_p2p_ops);
	mutex_unlock(&pevb_p2p_ops_lock);
}

int pevb_p2p_get(void)
{
	return pevb_p2p_ops_get();
}

void pevb_p2p_put(void)
{
	pevb_p2p_ops_put();
}

/*
 * Module init and exit (picoevb_main.rs). Exit runs when no pin is left (each holds the module until
 * pevb_p2p_destroy's module_put), but code of this module may still be running on other threads after that
 * last module_put, and exit must wait for all of it before the module's text is freed:
 *   - a queued free finishing after its module_put: destroy_workqueue() waits for the work function to
 *     return (it flushes the queue).
 *   - the trampoline (pevb_p2p_trampoline) returning to the provider after it queued that free: the work
 *     may run, module_put and let rmmod reach here while the trampoline's thread has yet to execute its
 *     last instructions. A thread cannot hold its own module across its own return, so the wait must come
 *     from the caller: every provider call of the callback on Jetson comes from an mmu notifier op (NVIDIA's
 *     Tegra module and gdr's: .invalidate_range_start, .release from exit_mmap or from put_pages'
 *     mmu_notifier_unregister), and mm/mmu_notifier.c calls those ops inside srcu_read_lock(&srcu) ...
 *     srcu_read_unlock(&srcu) (mn_hlist_invalidate_range_start, mn_hlist_release, mmu_notifier_unregister).
 *     That read section began before the callback queued the free, so before the module_put and before
 *     this exit; mmu_notifier_synchronize() is synchronize_srcu(&srcu), which returns only after every such
 *     section has ended, i.e. after the trampoline has returned into the provider and the provider into
 *     mm/mmu_notifier.c. The same covers a trampoline that found its pin PINNING or already claimed.
 *     Not covered (no SRCU section around the call): gdr_nv_p2p's test-only revoke_after_map_us switch,
 *     which calls the callback from its own work item, and NVIDIA's dGPU driver, which calls it from its
 *     own free paths; there the window is the trampoline's return instructions after its queue_work().
 * The order matters: the queued frees first (one may be the trampoline's), then the notifier sections.
 */
int pevb_p2p_init(void)
{
	pevb_p2p_wq = alloc_workqueue("picoevb_p2p", WQ_UNBOUND, 0);
	return pevb_p2p_wq ? 0 : -ENOMEM;
}

void pevb_p2p_exit(void)
{
	destroy_workqueue(pevb_p2p_wq);
	mmu_notifier_synchronize();
}

/* ---- one pin ---- */

enum pevb_p2p_state {
	PEVB_P2P_PINNING,	/* pevb_p2p_pin() is running; the driver does not know p yet */
	PEVB_P2P_DEAD,		/* the provider's callback came while pinning: the pin fails */
	PEVB_P2P_LIVE,		/* returned to the driver */
};

/* One bus-contiguous range: the layout of the logic's segments::Segment (repr(C)) and 5.10's pevb_seg. */
struct pevb_p2p_seg {
	u64 addr;
	u64 len;
};

struct pevb_p2p {
	refcount_t ref;
	spinlock_t lock;			/* state, cb_claimed */
	enum pevb_p2p_state state;
	bool cb_claimed;			/* free_cb has been (or is being) called */
	bool put_done;				/* put_pages has returned (Jetson: its unregister is over) */
#ifndef GDR_P2P_DGPU
	bool from_release;			/* NVIDIA's callback came with its notifier still linked: exit */
#ifndef GDR_NO_INTERVAL_NOTIFIER
	bool guarded;				/* guard is inserted */
	bool torn_down;				/* guard saw exit_mmap's unmap (after the notifiers' release) */
	struct mmu_interval_notifier guard;	/* refuses non-blockable invalidations of the range */
#endif
#endif
	struct task_struct *undo_task;		/* pin failed: this thread's own put_pages runs the callback */
	struct completion pinned;		/* pevb_p2p_pin() has left PINNING */

	struct nvidia_p2p_page_table *pt;
	struct mutex map_lock;			/* map, host_mapped: unmapped exactly once */
	struct nvidia_p2p_dma_mapping *map;
	bool host;				/* pinned host memory (PIN_HOST): no provider, no pt, no map */
	struct pevb_watched *host_pin;		/* host: set once pinned */
	bool host_mapped;
	bool dmabuf;				/* an imported dma-buf (IMPORT_DMABUF): no provider either */
	struct pevb_dmabuf *buf;		/* dmabuf: set once imported */
	struct device *dev;
	u64 gpu_va;				/* va rounded down to the GPU page */

	void (*free_cb)(void *data);
	void *data;

	u32 nseg;
	struct pevb_p2p_seg *segs;		/* the provider's entries, trimmed: what syncs walk */
	u32 nrun;
	struct pevb_p2p_seg *runs;		/* the same bytes, bus-contiguous neighbours merged: for DMA */
	struct work_struct free_work;
};

/* The pin's bus segments for DMA, built at pin time: valid until pevb_p2p_free_from_callback(p). */
const struct pevb_p2p_seg *pevb_p2p_segments(struct pevb_p2p *p, u32 *n)
{
	if (p->host || p->dmabuf) {
		size_t k;
		const struct pevb_seg *segs = p->dmabuf ? pevb_dmabuf_segments(p->buf, &k) :
							  pevb_pin_segments(pevb_watched_pin(p->host_pin), &k);

		*n = k;
		return (const struct pevb_p2p_seg *)segs;
	}
	*n = p->nrun;
	return p->runs;
}

/*
 * A DMA's use of a surface, as lockdep sees it: held (recursively, for reading: one request may hold two)
 * while the use lasts; free_cb takes it for writing before it waits for the uses to end. Invalidations,
 * and so free_cb, are ordered after fs_reclaim (__mmu_notifier_register primes that; the bench provider's
 * reclaim_callbacks does it for the other callers), so a GFP_KERNEL allocation under a use is reported:
 * reclaim could run free_cb on that very thread, which would wait for the use forever (issue 24 defect 8).
 */
#ifdef CONFIG_LOCKDEP
static struct lockdep_map pevb_p2p_use_map = { .name = "picoevb_surface_use" };

void pevb_p2p_use_acquire(void)
{
	lock_map_acquire_read(&pevb_p2p_use_map);
}

void pevb_p2p_use_release(void)
{
	lock_map_release(&pevb_p2p_use_map);
}

void pevb_p2p_uses_awaited(void)
{
	lock_map_acquire(&pevb_p2p_use_map);
	lock_map_release(&pevb_p2p_use_map);
}
#else
void pevb_p2p_use_acquire(void) {}
void pevb_p2p_use_release(void) {}
void pevb_p2p_uses_awaited(void) {}
#endif

#ifndef GDR_P2P_DGPU
#ifndef GDR_NO_INTERVAL_NOTIFIER
static DECLARE_WAIT_QUEUE_HEAD(pevb_p2p_torn);

/*
 * The guard (see the top of this file). A blockable invalidation passes: the provider's notifier decides.
 * mm_users is 0 only in exit_mmap, whose unmap_vmas() invalidates the whole address space after
 * mmu_notifier_release() has called every classic notifier's .release, unlinked them all and waited for
 * their SRCU readers: from then on NVIDIA's notifier inside the table is no longer reachable.
 */
static bool pevb_p2p_guard_invalidate(struct mmu_interval_notifier *mni, const struct mmu_notifier_range *range,
				      unsigned long cur_seq)
{
	struct pevb_p2p *p = container_of(mni, struct pevb_p2p, guard);

	if (!mmu_notifier_range_blockable(range))
		return false;
	if (!atomic_read(&range->mm->mm_users)) {
		WRITE_ONCE(p->torn_down, true);
		wake_up_all(&pevb_p2p_torn);
	}
	return true;
}

static const struct mmu_interval_notifier_ops pevb_p2p_guard_ops = {
	.invalidate = pevb_p2p_guard_invalidate,
};
#endif

/*
 * NVIDIA's Tegra module (not gdr's) ran the callback without put_pages, so its notifier embedded in the
 * table may still be in use: from exit_mmap's .release it is still linked (wait until exit_mmap is past
 * the notifiers, which the guard sees); from an invalidation it was mmu_notifier_put() first (wait for
 * that SRCU-deferred free). Never a poll, never a free of a table that may be linked.
 */
static void pevb_p2p_wait_notifier(struct pevb_p2p *p)
{
	if (!p->pt || pevb_p2p_ops.gdr || p->put_done)
		return;
#ifndef GDR_NO_INTERVAL_NOTIFIER
	if (p->from_release)
		while (!wait_event_timeout(pevb_p2p_torn, READ_ONCE(p->torn_down), 10 * HZ))
			pr_warn("picoevb: a GPU page table waits for its process's exit_mmap\n");
#endif
	/*
	 * Before 5.5 (no guard) there is nothing to wait for first: 4.x's __mmu_notifier_release unlinks every
	 * notifier inside the SRCU read section that ran the .release callbacks (mm/mmu_notifier.c), so one
	 * grace period after the callback (gdr_compat.h's mmu_notifier_synchronize) NVIDIA's is unreachable.
	 */
	mmu_notifier_synchronize();
}
#endif

/* The last reference is gone: free the page table struct (Jetson), the segments and p. */
static void pevb_p2p_destroy(struct pevb_p2p *p)
{
	if (p->host) {
		/* Unmapped already (unpin, the callback or removal); unpinned dirty: the device may have written. */
		pevb_pin_unpin(pevb_watched_end(p->host_pin), true);
		kfree(p);
		module_put(THIS_MODULE);
		return;
	}
	if (p->dmabuf) {
		/* Unmapped already; the detach waits out a move_notify still returning here (dmabuf.c). */
		pevb_dmabuf_release(p->buf);
		kfree(p);
		module_put(THIS_MODULE);
		return;
	}
#ifndef GDR_P2P_DGPU
	/* The provider's free_page_table has run (free_from_callback or pin cleanup); the struct is ours. */
	pevb_p2p_wait_notifier(p);
#ifndef GDR_NO_INTERVAL_NOTIFIER
	if (p->guarded)
		mmu_interval_notifier_remove(&p->guard);
#endif
	kfree(p->pt);
#endif
	kfree(p->segs);
	kfree(p->runs);
	kfree(p);
	pevb_p2p_ops_put();
	/* Last: the pin's hold on picoevb.ko (taken in pevb_p2p_pin), see there. */
	module_put(THIS_MODULE);
}

static void pevb_p2p_free_work(struct work_struct *work)
{
	pevb_p2p_destroy(container_of(work, struct pevb_p2p, free_work));
}

/*
 * Drops a reference. @queued: the caller is the provider's callback (maybe inside an invalidation, and
 * holding picoevb.ko by nothing but this pin), so the free goes to pevb_p2p_wq; so does one that must wait
 * for NVIDIA's notifier.
 */
static void pevb_p2p_unref(struct pevb_p2p *p, bool queued)
{
	if (!refcount_dec_and_test(&p->ref))
		return;
#ifndef GDR_P2P_DGPU
	queued = queued || (p->pt && !pevb_p2p_ops.gdr && !p->put_done);
#endif
	if (queued) {
		INIT_WORK(&p->free_work, pevb_p2p_free_work);
		queue_work(pevb_p2p_wq, &p->free_work);
	} else {
		pevb_p2p_destroy(p);
	}
}

/* Unmap the one DMA mapping, once, whoever comes first. */
static void pevb_p2p_unmap(struct pevb_p2p *p, bool in_callback)
{
	struct nvidia_p2p_dma_mapping *map;

	if (p->dmabuf) {
		/* Under the buffer's own lock, never inside map_lock: move_notify holds that lock when it unmaps. */
		pevb_dmabuf_unmap(p->buf);
		return;
	}
	mutex_lock(&p->map_lock);
	if (p->host_mapped) {
		pevb_pin_unmap(pevb_watched_pin(p->host_pin));
		p->host_mapped = false;
	}
	map = p->map;
	p->map = NULL;
	if (map) {
#ifdef GDR_P2P_DGPU
		/* NVIDIA: in the callback, free_dma_mapping; the driver unmaps after the callback returns. */
		if (in_callback)
			pevb_p2p_ops.free_dma_mapping(map);
		else
			pevb_p2p_ops.dma_unmap_pages(to_pci_dev(p->dev), p->pt, map);
#else
		pevb_p2p_ops.dma_unmap_pages(map);
#endif
	}
	mutex_unlock(&p->map_lock);
}

/* The provider's free callback. */
static void pevb_p2p_trampoline(void *data)
{
	struct pevb_p2p *p = data;
	bool wait = false;

	spin_lock(&p->lock);
	if (p->state == PEVB_P2P_PINNING && (p->undo_task == current || p->host || p->dmabuf)) {
		/*
		 * The failed pin's own put_pages (Jetson): nothing to pass on. Pinned host memory or a dma-buf:
		 * the watched pin's sequence or the import's move count says the memory changed, and
		 * pevb_p2p_go_live() checks it before LIVE.
		 */
		spin_unlock(&p->lock);
		return;
	}
	if (p->state == PEVB_P2P_PINNING) {
		/*
		 * pevb_p2p_pin() has not returned: it fails and cleans up, the driver never hears of this pin.
		 * dGPU: the provider frees the table and mapping once this returns, so wait until the pinning
		 * thread no longer reads them (gdr's provider only: NVIDIA's may hold locks the pinning thread
		 * needs while it calls us).
		 */
		p->state = PEVB_P2P_DEAD;
#ifdef GDR_P2P_DGPU
		if (pevb_p2p_ops.gdr) {
			refcount_inc(&p->ref);
			wait = true;
		}
#endif
		spin_unlock(&p->lock);
		if (wait) {
			wait_for_completion(&p->pinned);
			pevb_p2p_unref(p, true);
		}
		return;
	}
	if (p->state != PEVB_P2P_LIVE || p->cb_claimed) {
		spin_unlock(&p->lock);
		return;		/* a second callback for this pin: never passed on */
	}
	p->cb_claimed = true;
#ifndef GDR_P2P_DGPU
	/* NVIDIA drops its notifier before an invalidation's callback, not before exit's .release. */
	p->from_release = p->pt && !hlist_unhashed_lockless(&p->pt->mn.hlist);
#endif
	refcount_inc(&p->ref);	/* the last reference, if it goes here, is dropped by a queued free */
	spin_unlock(&p->lock);
	p->free_cb(p->data);	/* the driver calls pevb_p2p_free_from_callback(p) */
	/*
	 * The queued free may module_put before this function has returned: module exit waits for this
	 * return through mmu_notifier_synchronize() (see pevb_p2p_exit for which callers that covers).
	 */
	pevb_p2p_unref(p, true);
}

/*
 * Copy the mapping's bus segments, with the head offset and the tail trimmed to the user's range, and the
 * same bytes with bus-contiguous neighbours merged (fewer descriptors) for DMA. Before the pin is live, so
 * no surface use is held: a DMA later only borrows them.
 */
static int pevb_p2p_collect(struct pevb_p2p *p, struct nvidia_p2p_dma_mapping *map, u64 head, u64 len)
{
	u32 n, i, out = 0;
	u64 skip = head, left = len;

	n = map->entries;
	p->segs = kcalloc(n ? n : 1, sizeof(*p->segs), GFP_KERNEL);
	if (!p->segs)
		return -ENOMEM;
	for (i = 0; i < n && left; i++) {
#ifdef GDR_P2P_DGPU
		u64 a = map->dma_addresses[i], l = PEVB_GPU_PAGE_SIZE;
#else
		u64 a = map->hw_address[i], l = map->hw_len[i];
#endif
		if (skip >= l) {
			skip -= l;
			continue;
		}
		a += skip;
		l -= skip;
		skip = 0;
		if (l > left)
			l = left;
		p->segs[out].addr = a;
		p->segs[out].len = l;
		out++;
		left -= l;
	}
	if (left)
		return -EIO;	/* the provider mapped less than it pinned */
	p->nseg = out;
	p->runs = kcalloc(out ? out : 1, sizeof(*p->runs), GFP_KERNEL);
	if (!p->runs)
		return -ENOMEM;
	for (i = 0, n = 0; i < out; i++) {
		struct pevb_p2p_seg *last = n ? &p->runs[n - 1] : NULL;

		if (last && last->addr + last->len == p->segs[i].addr)
			last->len += p->segs[i].len;
		else
			p->runs[n++] = p->segs[i];
	}
	p->nrun = n;
	return 0;
}

/* Both pins' argument checks; *out is NULL until a pin succeeds. */
static int pevb_p2p_pin_args(struct device *dev, u64 va, u64 len, void (*free_cb)(void *),
			     struct pevb_p2p **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	return !dev || !len || !free_cb || va + len < va ? -EINVAL : 0;
}

/*
 * A new pin, PINNING, with one reference. It holds picoevb.ko until it is completely freed: its free
 * callback may come from the provider (or the notifier) after the last file closed (an invalidation that
 * began before close), and the deferred free runs later still. Taken under the ioctl's own file
 * reference, so the module is live.
 */
static struct pevb_p2p *pevb_p2p_new(struct device *dev, void (*free_cb)(void *), void *data)
{
	struct pevb_p2p *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	__module_get(THIS_MODULE);
	refcount_set(&p->ref, 1);
	spin_lock_init(&p->lock);
	mutex_init(&p->map_lock);
	init_completion(&p->pinned);
	p->state = PEVB_P2P_PINNING;
	p->dev = dev;
	p->free_cb = free_cb;
	p->data = data;
	return p;
}

int pevb_p2p_pin(struct device *dev, u64 va, u64 len, void (*free_cb)(void *), void *data,
		 struct pevb_p2p **out)
{
	struct nvidia_p2p_dma_mapping *map = NULL;
	u64 start, end, head;
	struct pevb_p2p *p;
	bool dead;
	int ret;

	ret = pevb_p2p_pin_args(dev, va, len, free_cb, out);
	if (ret)
		return ret;
#ifdef GDR_P2P_DGPU
	if (!dev_is_pci(dev))
		return -EINVAL;
#endif
	start = va & ~(PEVB_GPU_PAGE_SIZE - 1);
	end = round_up(va + len, PEVB_GPU_PAGE_SIZE);
	if (end < va + len)
		return -EINVAL;
	head = va - start;

	ret = pevb_p2p_ops_get();	/* this pin's own hold on the provider */
	if (ret)
		return ret;
	p = pevb_p2p_new(dev, free_cb, data);
	if (!p) {
		pevb_p2p_ops_put();
		return -ENOMEM;
	}
	p->gpu_va = start;

#ifdef GDR_P2P_DGPU
	ret = pevb_p2p_ops.get_pages(0, 0, start, end - start, &p->pt, pevb_p2p_trampoline, p);
#else
#ifndef GDR_NO_INTERVAL_NOTIFIER
	/* Before the provider's notifier exists, so that no non-blockable invalidation ever reaches it. */
	ret = current->mm ? mmu_interval_notifier_insert(&p->guard, current->mm, start, end - start,
							  &pevb_p2p_guard_ops) : -EINVAL;
	if (ret)
		goto out_free;
	p->guarded = true;
#else
	/* 4.x: every invalidation may sleep (no non-blockable one exists), so there is nothing to guard. */
#endif
	ret = pevb_p2p_ops.get_pages(start, end - start, &p->pt, pevb_p2p_trampoline, p);
#endif
	if (ret) {
		p->pt = NULL;
		goto out_free;
	}
#ifdef GDR_P2P_DGPU
	ret = pevb_p2p_ops.dma_map_pages(to_pci_dev(dev), p->pt, &map);
#else
	ret = pevb_p2p_ops.dma_map_pages(dev, p->pt, &map, DMA_BIDIRECTIONAL);
#endif
	if (!ret && !map)
		ret = -EIO;	/* NVIDIA's Tegra dma_map_pages can return 0 without a mapping */
	if (ret)
		map = NULL;
	else
		ret = pevb_p2p_collect(p, map, head, len);

	/* *out before LIVE: free_cb may run as soon as p is live, and may look for p where out points. */
	if (!ret)
		*out = p;
	spin_lock(&p->lock);
	dead = p->state == PEVB_P2P_DEAD;
	if (!ret && !dead) {
		p->map = map;
		p->state = PEVB_P2P_LIVE;
	}
	/*
	 * Under the lock: once p is LIVE and the lock dropped, the callback may claim it and free p before this
	 * thread runs again (a preempted pin; seen by the bench as a KASAN use-after-free in complete_all).
	 */
	complete_all(&p->pinned);
	spin_unlock(&p->lock);
	if (!ret && !dead)
		return 0;	/* p is the driver's now: not touched again here */
	*out = NULL;
	if (dead)
		ret = -EFAULT;	/* the memory went away while pinning (whatever failed because of it) */

	/* Undo. The driver never saw p, so nothing else refers to it but the provider. */
#ifdef GDR_P2P_DGPU
	if (!dead) {
		if (map)
			pevb_p2p_ops.dma_unmap_pages(to_pci_dev(dev), p->pt, map);
		/* Frees the table; no callback on dGPU (gdr's waits for one already running). */
		pevb_p2p_ops.put_pages(0, 0, start, p->pt);
		spin_lock(&p->lock);
		if (p->state == PEVB_P2P_DEAD)
			ret = -EFAULT;	/* the memory went away during the undo as well */
		spin_unlock(&p->lock);
	}
	/* dead: the provider frees the table and mapping itself after the (dropped) callback. */
	p->pt = NULL;
#else
	if (map)
		pevb_p2p_ops.dma_unmap_pages(map);
	spin_lock(&p->lock);
	dead = p->state == PEVB_P2P_DEAD;
	if (!dead)
		p->undo_task = current;
	spin_unlock(&p->lock);
	if (!dead) {
		/*
		 * Runs the callback synchronously on this thread; the trampoline drops it. (Never put_pages
		 * after the callback ran from an invalidation: NVIDIA's notifier is gone then.)
		 */
		pevb_p2p_ops.put_pages(p->pt);
		p->put_done = true;
		spin_lock(&p->lock);
		dead = p->state == PEVB_P2P_DEAD;	/* an invalidation's callback came first */
		spin_unlock(&p->lock);
	}
	if (dead)
		ret = -EFAULT;
	pevb_p2p_ops.free_page_table(p->pt);
#endif
out_free:
	pevb_p2p_unref(p, false);	/* frees p, and (Jetson) the table struct */
	return ret;
}

/* The watched pin's notifier or the exporter's move_notify: the memory is going away. */
static void pevb_p2p_gone(void *owner)
{
	pevb_p2p_trampoline(owner);
}

/*
 * A pin with no provider (host memory, a dma-buf), mapped: live, unless the memory changed while it was
 * being pinned. The trampoline ignored that change (still PINNING); the notifier set the watched pin's
 * sequence, or the exporter counted its move, before either called it, and this check takes the same lock.
 */
static int pevb_p2p_go_live(struct pevb_p2p *p, struct pevb_p2p **out, int stale_err)
{
	bool stale;

	*out = p;
	spin_lock(&p->lock);
	stale = p->dmabuf ? pevb_dmabuf_stale(p->buf) : pevb_watched_stale(p->host_pin);
	if (!stale)
		p->state = PEVB_P2P_LIVE;
	complete_all(&p->pinned);
	spin_unlock(&p->lock);
	if (!stale)
		return 0;
	*out = NULL;
	pevb_p2p_unmap(p, false);
	pevb_p2p_unref(p, false);
	return stale_err;
}

/*
 * Pinned host memory (PIN_HOST): [va, va + len) of the caller's memory, pinned long-term and DMA-mapped
 * for @dev, under the contract at the top of this file with no provider behind it. -ENOMEM over
 * RLIMIT_MEMLOCK (without CAP_IPC_LOCK), -EFAULT where the memory is not all there or went away while it
 * was being pinned, -EOPNOTSUPP for a shared file mapping that needs writeback (pin.c).
 */
int pevb_p2p_pin_host(struct device *dev, u64 va, u64 len, void (*free_cb)(void *), void *data,
		      struct pevb_p2p **out)
{
	struct pevb_p2p *p;
	int ret;

	ret = pevb_p2p_pin_args(dev, va, len, free_cb, out);
	if (ret)
		return ret;
	p = pevb_p2p_new(dev, free_cb, data);
	if (!p)
		return -ENOMEM;
	p->host = true;
	ret = pevb_watched_new_gone(dev, va, len, pevb_p2p_gone, p, &p->host_pin);
	if (ret) {
		kfree(p);
		module_put(THIS_MODULE);
		return ret;
	}
	p->host_mapped = true;
	return pevb_p2p_go_live(p, out, -EFAULT);
}

/* Whether this build imports dma-bufs (dmabuf.h: Linux 6.2's locking convention, CONFIG_DMA_SHARED_BUFFER). */
bool pevb_p2p_dmabuf_supported(void)
{
	return PEVB_HAVE_DMABUF;
}

/*
 * IMPORT_DMABUF: bytes [offset, offset + len) of dma-buf @fd, in whole host pages, mapped for @dev under
 * the contract at the top of this file; the exporter's move_notify plays the provider's callback.
 * *@placement: where the bytes lie (PEVB_DMABUF_*). -EINVAL for a window outside the buffer or not in
 * whole pages and for an fd that is no dma-buf, -EBADF for no fd, -EAGAIN if the buffer moved while it
 * was being imported, -EOPNOTSUPP where the kernel has no dma-buf.
 */
int pevb_p2p_import_dmabuf(struct device *dev, int fd, u64 offset, u64 len, void (*free_cb)(void *), void *data,
			   struct pevb_p2p **out, u32 *placement)
{
	struct pevb_p2p *p;
	int ret;

	if (!dev || !free_cb || !out || !placement)
		return -EINVAL;
	p = pevb_p2p_new(dev, free_cb, data);
	if (!p)
		return -ENOMEM;
	p->dmabuf = true;
	ret = pevb_dmabuf_import(dev, fd, offset, len, pevb_p2p_gone, p, &p->buf);
	if (ret) {
		kfree(p);
		module_put(THIS_MODULE);
		return ret;
	}
	*placement = pevb_dmabuf_placement(p->buf);
	return pevb_p2p_go_live(p, out, -EAGAIN);
}

void pevb_p2p_unpin(struct pevb_p2p *p)
{
	bool claimed;
#ifdef GDR_P2P_DGPU
	bool run_cb = false;
#endif

	refcount_inc(&p->ref);	/* unpin's own: p outlives the callback that put_pages may run */
	spin_lock(&p->lock);
	claimed = p->cb_claimed;
	if (p->host || p->dmabuf)
		p->cb_claimed = true;	/* as on dGPU, the shim calls free_cb itself (below) */
	spin_unlock(&p->lock);

	pevb_p2p_unmap(p, false);
	/* claimed: an invalidation or process exit runs free_cb; never put_pages after that (NVIDIA). */
	if (!claimed && (p->host || p->dmabuf)) {
		p->free_cb(p->data);
	} else if (!claimed) {
#ifdef GDR_P2P_DGPU
		/* NVIDIA's dGPU put_pages frees the table and does not call the callback... */
		pevb_p2p_ops.put_pages(0, 0, p->gpu_va, p->pt);
		p->put_done = true;
		spin_lock(&p->lock);
		if (!p->cb_claimed) {
			p->cb_claimed = true;
			run_cb = true;
		}
		spin_unlock(&p->lock);
		/* ...so, to mirror Jetson, the shim calls it now, unless the provider got there first. */
		if (run_cb)
			p->free_cb(p->data);
#else
		/* Jetson: runs free_cb synchronously (unless an invalidation is running it right now). */
		pevb_p2p_ops.put_pages(p->pt);
		p->put_done = true;
#endif
	}
	pevb_p2p_unref(p, false);
}

void pevb_p2p_free_from_callback(struct pevb_p2p *p)
{
	pevb_p2p_unmap(p, true);
	if (p->host || p->dmabuf) {
		/* The unpin (detach) and the notifier's removal come with the last reference (see the top). */
		pevb_p2p_unref(p, false);
		return;
	}
#ifdef GDR_P2P_DGPU
	/* The provider frees the table after its callback; after put_pages it is already gone. */
	if (!p->put_done)
		pevb_p2p_ops.free_page_table(p->pt);
#else
	pevb_p2p_ops.free_page_table(p->pt);	/* unpins; the struct is freed with p's last reference */
#endif
	pevb_p2p_unref(p, false);	/* the pin's reference (inside the callback, the trampoline holds one) */
}

/*
 * The device is going away (hot removal, unbind): drop the DMA mapping now, since a device must not keep
 * mappings past its unbind. The pin stays until pevb_p2p_unpin() or the callback; both then find nothing
 * to unmap. The driver calls this while holding off the callback (as for a DMA in flight).
 */
bool pevb_p2p_unmap_device(struct pevb_p2p *p)
{
	if (!p->dmabuf) {
		pevb_p2p_unmap(p, false);
		return true;
	}
	/*
	 * A dma-buf's move_notify holds the buffer's lock while its callback waits for this use, so never
	 * sleep on that lock here: once a callback has claimed the pin, it unmaps after the use ends.
	 */
	while (!pevb_dmabuf_try_unmap(p->buf)) {
		if (READ_ONCE(p->cb_claimed))
			return false;
		usleep_range(100, 1000);
	}
	return true;
}

/*
 * Bench switch (docs/driver.md, "Bench switches"): check_syncs=1 proves that every piece
 * pevb_sync_pieces hands to dma_sync_single_* is physically contiguous behind an IOMMU, i.e. that the
 * sync cleans or invalidates exactly the pages the card reads or writes (iommu_iova_to_phys at both ends
 * of the piece). A piece that is not counts in syncs_wrong and WARNs (a splat the harness fails on). With
 * the switch on, syncs also run where dma_need_sync() says they do nothing (a coherent device: the
 * bench's arm64 guest and a Jetson), so that the check sees every window a non-coherent device would sync.
 */
static bool check_syncs;
module_param(check_syncs, bool, 0644);
MODULE_PARM_DESC(check_syncs, "test only: check behind an IOMMU that every DMA sync piece is physically contiguous");
static atomic_long_t pevb_syncs_checked = ATOMIC_LONG_INIT(0);
static atomic_long_t pevb_syncs_wrong = ATOMIC_LONG_INIT(0);

static int pevb_counter_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%ld\n", atomic_long_read((atomic_long_t *)kp->arg));
}

static const struct kernel_param_ops pevb_counter_ops = {
	.get = pevb_counter_get,
};
module_param_cb(syncs_checked, &pevb_counter_ops, &pevb_syncs_checked, 0444);
MODULE_PARM_DESC(syncs_checked, "sync pieces check_syncs has checked");
module_param_cb(syncs_wrong, &pevb_counter_ops, &pevb_syncs_wrong, 0444);
MODULE_PARM_DESC(syncs_wrong, "sync pieces check_syncs found physically discontiguous");

/* The IOMMU domain translating @dev's DMA, or NULL (none, or an identity one: bus address = physical). */
static struct iommu_domain *pevb_translating_domain(struct device *dev)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(dev);

	return dom && dom->type != IOMMU_DOMAIN_IDENTITY ? dom : NULL;
}

/* Whether [addr, ...) of @dev needs a sync: where the DMA API says so, and everywhere check_syncs checks. */
bool pevb_sync_needed(struct device *dev, dma_addr_t addr)
{
	return dma_need_sync(dev, addr) || (READ_ONCE(check_syncs) && pevb_translating_domain(dev));
}

static void pevb_check_piece(struct device *dev, dma_addr_t addr, u64 n)
{
	struct iommu_domain *dom = pevb_translating_domain(dev);
	phys_addr_t first, last;

	if (!dom)
		return;
	first = iommu_iova_to_phys(dom, addr);
	last = iommu_iova_to_phys(dom, addr + n - 1);
	atomic_long_inc(&pevb_syncs_checked);
	if (WARN_ONCE(!first || last != first + n - 1,
		      "picoevb: a DMA sync of %pad+%llu spans discontiguous pages (%pa .. %pa)\n",
		      &addr, n, &first, &last))
		atomic_long_inc(&pevb_syncs_wrong);
}

/*
 * Syncs [addr, addr + len) of one DMA segment for the CPU or for the device, in pieces that never cross a
 * 4 KiB boundary of the bus address. Behind an IOMMU a segment is contiguous in IOVA only: the pages behind
 * it may lie anywhere, and dma_sync_single_* translates the start alone (iommu_dma_sync_single_for_*:
 * iommu_iova_to_phys(dma_handle), then arch_sync_dma_* and swiotlb over [phys, phys + size)), so one call
 * over a page boundary would clean or invalidate whatever memory follows the first page physically. Every
 * IOMMU granule and CPU page is a multiple of 4 KiB, mapped aligned, so each piece is physically
 * contiguous. Without an IOMMU a segment is physically contiguous anyway (only such pages are merged) and
 * the pieces cost a few calls more. Callers sync only where pevb_sync_needed() says so (dma_need_sync(),
 * or the check_syncs switch behind an IOMMU). Shared by pin.c's syncs of cached pins (both builds; one-off
 * pins are synced whole, dma_sync_sgtable_*) and the surfaces here.
 */
void pevb_sync_pieces(struct device *dev, dma_addr_t addr, u64 len, enum dma_data_direction dir,
		      bool for_device)
{
	while (len) {
		u64 n = min_t(u64, len, SZ_4K - (addr & (SZ_4K - 1)));

		if (READ_ONCE(check_syncs))
			pevb_check_piece(dev, addr, n);
		if (for_device)
			dma_sync_single_for_device(dev, addr, n, dir);
		else
			dma_sync_single_for_cpu(dev, addr, n, dir);
		addr += n;
		len -= n;
	}
}

/*
 * Hands the first @len bytes of the surface to the device (before a DMA) or back to the CPU (after a C2H),
 * in the request's direction. Jetson: GPU memory is system memory that the provider DMA-mapped once, and
 * the CPU writes it through its caches (or, under swiotlb, the device sees a bounce copy). Each segment is
 * synced inside one of the provider's mapped entries (pevb_p2p_collect), page piece by page piece
 * (pevb_sync_pieces). dGPU: the bus addresses
 * are the GPU's BAR, which the CPU does not cache: nothing to do. The caller holds off the callback (a
 * use), so the mapping is live.
 */
/* The provider's surfaces, Jetson: see pevb_p2p_sync. */
static void pevb_p2p_sync_provider(struct pevb_p2p *p, u64 at, u64 len, bool to_device, bool for_device)
{
#ifndef GDR_P2P_DGPU
	enum dma_data_direction dir = to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
	u32 i;

	for (i = 0; i < p->nseg && len; i++) {
		u64 skip = min(p->segs[i].len, at);
		u64 n = min(p->segs[i].len - skip, len);

		at -= skip;
		if (!n)
			continue;
		/* Only where it does something: see pevb_pin_sync_window (pin.c) for why. */
		if (pevb_sync_needed(p->dev, p->segs[i].addr + skip))
			pevb_sync_pieces(p->dev, p->segs[i].addr + skip, n, dir, for_device);
		len -= n;
	}
#endif
}

void pevb_p2p_sync(struct pevb_p2p *p, u64 at, u64 len, bool to_device, bool for_device)
{
	if (p->dmabuf)
		return;	/* the exporter's map and unmap (dmabuf.c) */
	if (p->host)
		pevb_pin_sync_window(pevb_watched_pin(p->host_pin), at, len, to_device, for_device);
	else
		pevb_p2p_sync_provider(p, at, len, to_device, for_device);
}
