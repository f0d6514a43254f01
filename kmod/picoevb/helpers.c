// SPDX-License-Identifier: GPL-2.0
/*
 * C half of picoevb.ko: kernel services that Linux 6.18's Rust `kernel` crate does not wrap (MSI/INTx
 * vector allocation, completions with a timeout, mutexes with a lock class; the pins, cached pins and
 * their mmu interval notifiers are pin.c's, cpin.c's and watched.c's, shared with the 5.10 build). Each
 * function is a thin, policy-free wrapper; the driver's decisions stay in Rust.
 */
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>

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
