// SPDX-License-Identifier: GPL-2.0
/*
 * C half of picoevb.ko: kernel services that Linux 6.18's Rust `kernel` crate does not wrap (pinning user
 * pages into a DMA-mapped sg_table, MSI/INTx vector allocation, completions with a timeout). Each function
 * is a thin, policy-free wrapper; the driver's decisions stay in Rust.
 */
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/slab.h>

struct pevb_pin {
	struct sg_table sgt;
	struct page **pages;
	unsigned long npages;
	struct device *dev;
	enum dma_data_direction dir;
};

int pevb_pin_user(struct device *dev, u64 uaddr, u64 len, bool to_device,
		  struct pevb_pin **out);
struct sg_table *pevb_pin_sgt(struct pevb_pin *p);
void pevb_unpin_user(struct pevb_pin *p);
int pevb_irq_vectors_alloc(struct pci_dev *pdev);
void pevb_irq_vectors_free(struct pci_dev *pdev);
void pevb_dma_setup(struct device *dev, unsigned int max_seg);
void pevb_disable_device(struct pci_dev *pdev);
void pevb_completion_reinit(struct completion *c);
void pevb_completion_complete(struct completion *c);
long pevb_completion_wait_ms(struct completion *c, unsigned int ms);
unsigned long pevb_current_mm(void);

/*
 * Pin [uaddr, uaddr + len) with FOLL_LONGTERM (writable only when the device writes it), build an sg_table
 * that merges physically contiguous pages, and DMA-map it for @dev.
 */
int pevb_pin_user(struct device *dev, u64 uaddr, u64 len, bool to_device,
		  struct pevb_pin **out)
{
	unsigned int gup = FOLL_LONGTERM | (to_device ? 0 : FOLL_WRITE);
	unsigned long first, npages, done = 0;
	struct pevb_pin *p;
	int ret;

	if (!len || uaddr + len < uaddr)
		return -EINVAL;
	first = uaddr >> PAGE_SHIFT;
	npages = ((uaddr + len - 1) >> PAGE_SHIFT) - first + 1;
	if (npages > INT_MAX)
		return -EINVAL;

	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	p->dev = dev;
	p->dir = to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
	p->pages = kvmalloc_array(npages, sizeof(*p->pages), GFP_KERNEL);
	if (!p->pages) {
		ret = -ENOMEM;
		goto err_free;
	}
	/* pin_user_pages_fast may pin fewer pages than asked: keep going until all are pinned. */
	while (done < npages) {
		ret = pin_user_pages_fast((first + done) << PAGE_SHIFT, npages - done, gup,
					  p->pages + done);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			goto err_unpin;
		}
		done += ret;
	}
	p->npages = npages;
	ret = sg_alloc_table_from_pages_segment(&p->sgt, p->pages, npages, offset_in_page(uaddr),
						len, dma_get_max_seg_size(dev), GFP_KERNEL);
	if (ret)
		goto err_unpin;
	ret = dma_map_sgtable(dev, &p->sgt, p->dir, 0);
	if (ret)
		goto err_sgt;
	*out = p;
	return 0;

err_sgt:
	sg_free_table(&p->sgt);
err_unpin:
	unpin_user_pages(p->pages, done);
	kvfree(p->pages);
err_free:
	kfree(p);
	return ret;
}

struct sg_table *pevb_pin_sgt(struct pevb_pin *p)
{
	return &p->sgt;
}

/* Undo pevb_pin_user; pages the device wrote are marked dirty so the data is not lost. */
void pevb_unpin_user(struct pevb_pin *p)
{
	dma_unmap_sgtable(p->dev, &p->sgt, p->dir, 0);
	sg_free_table(&p->sgt);
	unpin_user_pages_dirty_lock(p->pages, p->npages, p->dir == DMA_FROM_DEVICE);
	kvfree(p->pages);
	kfree(p);
}

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

void pevb_dma_setup(struct device *dev, unsigned int max_seg)
{
	dma_set_max_seg_size(dev, max_seg);
}

void pevb_disable_device(struct pci_dev *pdev)
{
	pci_disable_device(pdev);
}

void pevb_completion_reinit(struct completion *c)
{
	reinit_completion(c);
}

void pevb_completion_complete(struct completion *c)
{
	complete(c);
}

/* Returns > 0 if completed, 0 on timeout. Uninterruptible: a signal must not abandon a running engine. */
long pevb_completion_wait_ms(struct completion *c, unsigned int ms)
{
	return wait_for_completion_timeout(c, msecs_to_jiffies(ms));
}

/* Identity of the calling process's address space: two pins overlap only within one mm. */
unsigned long pevb_current_mm(void)
{
	return (unsigned long)current->mm;
}
