// SPDX-License-Identifier: GPL-2.0
/*
 * C half of picoevb.ko: kernel services that Linux 6.18's Rust `kernel` crate does not wrap (cached pins,
 * work items, MSI/INTx vector allocation, completions with a timeout; the pins themselves and their mmu
 * interval notifiers are pin.c's and watched.c's, shared with the 5.10 build). Each function
 * is a thin, policy-free wrapper; the driver's decisions stay in Rust.
 */
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/semaphore.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include "pin.h"
#include "watched.h"

struct pevb_pin;
int pevb_irq_vectors_alloc(struct pci_dev *pdev);
void pevb_irq_vectors_free(struct pci_dev *pdev);
void pevb_dma_setup(struct pci_dev *pdev, unsigned int max_seg);
int pevb_file_hold_module(struct file *file);
void pevb_disable_device(struct pci_dev *pdev);
void pevb_clear_master(struct pci_dev *pdev);
void pevb_completion_reinit(struct completion *c);
void pevb_completion_complete(struct completion *c);
long pevb_completion_wait_ms(struct completion *c, unsigned int ms);
void pevb_mutex_init(struct mutex *m, unsigned int class);
int pevb_mutex_lock_killable(struct mutex *m);
void pevb_mutex_lock(struct mutex *m);
unsigned long pevb_current_mm(void);
struct pevb_work;
struct pevb_cpin;
struct pevb_work *pevb_work_new(void (*fn)(void *data), void *data);
void pevb_work_free(struct pevb_work *w);
void pevb_work_drain(struct pevb_work *w);
void pevb_work_wait_pages(struct pevb_work *w, const u64 *frames, unsigned long n);
bool pevb_cpin_supported(void);
int pevb_cpin_new(struct device *dev, u64 uaddr, u64 len, struct pevb_work *sweep,
		  struct pevb_cpin **out);
bool pevb_cpin_stale(struct pevb_cpin *p);
struct pevb_pin *pevb_cpin_pin(struct pevb_cpin *p);
void pevb_cpin_sync(struct pevb_cpin *p, u64 offset, u64 len, bool to_device, bool for_device);
void pevb_cpin_release_later(struct pevb_cpin *p, bool dirty);
unsigned long pevb_cpin_npages(struct pevb_cpin *p);
u64 pevb_cpin_pfn(struct pevb_cpin *p, unsigned long i);

/*
 * A work item that calls back into Rust: the registration cache's sweep of invalidated buffers. It also
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
	return IS_ENABLED(CONFIG_MMU_NOTIFIER);
}

#ifdef CONFIG_MMU_NOTIFIER
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

/* One vector: MSI where the platform allows it, else the legacy INTx line. Returns 1 for MSI, 0 for INTx. */
int pevb_irq_vectors_alloc(struct pci_dev *pdev)
{
	int ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSI | PCI_IRQ_INTX);

	if (ret < 0)
		return ret;
	return pdev->msi_enabled ? 1 : 0;
}

void pevb_irq_vectors_free(struct pci_dev *pdev)
{
	pci_free_irq_vectors(pdev);
}

/*
 * The PCI core points dev.dma_parms at the pci_dev's own storage when it adds the device, but a driver
 * bound before us may have cleared it (NVIDIA's reference driver does on remove), and
 * dma_set_max_seg_size() warns without it: point it back at that same storage first.
 */
void pevb_dma_setup(struct pci_dev *pdev, unsigned int max_seg)
{
	if (!pdev->dev.dma_parms)
		pdev->dev.dma_parms = &pdev->dma_parms;
	/* Never more than one mapping can take (swiotlb bounces at most 256 KiB at once). */
	dma_set_max_seg_size(&pdev->dev, min_t(size_t, max_seg, dma_max_mapping_size(&pdev->dev)));
}

/*
 * Makes an open file hold picoevb.ko. The Rust misc device's file_operations have no owner in 6.18, so
 * misc_open() takes no module reference: without this, rmmod succeeds with files open and their release
 * jumps into freed text. We give the file a copy of those operations with .owner set: __fput() drops the
 * reference (fops_put) after ->release has returned, outside this module, and if the open fails after
 * this, do_dentry_open() drops it the same way. try_module_get() fails once rmmod has begun.
 * Called from ->open with the Rust operations as the file's, by misc_open() or by node.c's open. The latter
 * already holds the module through its cdev until after ->release, so there this reference is redundant
 * and balanced the same way. The two callers hold different locks, so the one fill has its own.
 */
int pevb_file_hold_module(struct file *file)
{
	static DEFINE_MUTEX(fill);
	static struct file_operations owned;

	if (!try_module_get(THIS_MODULE))
		return -ENODEV;
	mutex_lock(&fill);
	if (!owned.owner) {
		owned = *file->f_op;
		owned.owner = THIS_MODULE;
	}
	mutex_unlock(&fill);
	replace_fops(file, &owned);
	return 0;
}

void pevb_disable_device(struct pci_dev *pdev)
{
	pci_disable_device(pdev);
}

/* Bus mastering off; a config write is non-posted, so the device has it when this returns. */
void pevb_clear_master(struct pci_dev *pdev)
{
	pci_clear_master(pdev);
}

void pevb_completion_reinit(struct completion *c)
{
	reinit_completion(c);
}

void pevb_completion_complete(struct completion *c)
{
	complete(c);
}

/*
 * Returns > 0 if completed, 0 on timeout, -ERESTARTSYS when a fatal signal came first. Killable, not
 * interruptible: only a dying process gives up the wait, and its caller then stops the engine (and shows it
 * idle, or wedges the card) before a page is unpinned, exactly as after a timeout (run.rs).
 */
long pevb_completion_wait_ms(struct completion *c, unsigned int ms)
{
	return wait_for_completion_killable_timeout(c, msecs_to_jiffies(ms));
}

/*
 * killable.rs. One lock class per engine: H2C2H holds both (H2C first), which lockdep would otherwise
 * report as recursive locking of one class. mutex_lock and mutex_lock_killable are macros under lockdep.
 */
static struct lock_class_key pevb_mutex_keys[2];

void pevb_mutex_init(struct mutex *m, unsigned int class)
{
	static const char *const names[2] = { "picoevb_h2c", "picoevb_c2h" };

	class = min(class, 1u);
	__mutex_init(m, names[class], &pevb_mutex_keys[class]);
}

int pevb_mutex_lock_killable(struct mutex *m)
{
	return mutex_lock_killable(m);
}

void pevb_mutex_lock(struct mutex *m)
{
	mutex_lock(m);
}

/* Identity of the calling process's address space: two pins overlap only within one mm. */
unsigned long pevb_current_mm(void)
{
	return (unsigned long)current->mm;
}
