// SPDX-License-Identifier: GPL-2.0
/*
 * Pinning user memory for one request (as kmod/picoevb/helpers.c's pevb_pin_user, in 5.10's API): pin the
 * pages (FOLL_PIN, writable only when the device writes them), build an sg_table that merges physically
 * contiguous pages, DMA-map it, and hand the Rust logic the bus segments, coalesced.
 */
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include "picoevb.h"

struct pevb_pin {
	struct sg_table sgt;
	struct page **pages;
	unsigned long npages;
	struct device *dev;
	enum dma_data_direction dir;
	struct pevb_seg *segs;
	size_t nsegs;
	struct list_head parked;	/* on a wedged card's quarantine list */
};

static int pin_map(struct pevb_pin *p, u64 uaddr, u64 len, unsigned int gup)
{
	unsigned long first, done = 0;
	struct scatterlist *sg, *last;
	int ret, i;

	if (!len || uaddr + len < uaddr)
		return -EINVAL;
	first = uaddr >> PAGE_SHIFT;
	p->npages = ((uaddr + len - 1) >> PAGE_SHIFT) - first + 1;
	if (p->npages > INT_MAX)
		return -EINVAL;
	p->pages = kvmalloc_array(p->npages, sizeof(*p->pages), GFP_KERNEL);
	if (!p->pages)
		return -ENOMEM;
	/* pin_user_pages_fast may pin fewer pages than asked: keep going until all are pinned. */
	while (done < p->npages) {
		ret = pin_user_pages_fast((first + done) << PAGE_SHIFT, p->npages - done, gup,
					  p->pages + done);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			goto err_unpin;
		}
		done += ret;
	}
	/* 5.10 has no sg_alloc_table_from_pages_segment(); this is what it wraps there. */
	last = __sg_alloc_table_from_pages(&p->sgt, p->pages, p->npages, offset_in_page(uaddr), len,
					   dma_get_max_seg_size(p->dev), NULL, 0, GFP_KERNEL);
	if (IS_ERR(last)) {
		ret = PTR_ERR(last);
		goto err_unpin;
	}
	ret = dma_map_sgtable(p->dev, &p->sgt, p->dir, DMA_ATTR_SKIP_CPU_SYNC);
	if (ret)
		goto err_sgt;
	p->segs = kvmalloc_array(p->sgt.nents, sizeof(*p->segs), GFP_KERNEL);
	if (!p->segs) {
		ret = -ENOMEM;
		goto err_map;
	}
	for_each_sgtable_dma_sg(&p->sgt, sg, i) {
		p->segs[i].addr = sg_dma_address(sg);
		p->segs[i].len = sg_dma_len(sg);
	}
	p->nsegs = pevb_segments_coalesce(p->segs, p->sgt.nents);
	return 0;

err_map:
	dma_unmap_sgtable(p->dev, &p->sgt, p->dir, DMA_ATTR_SKIP_CPU_SYNC);
err_sgt:
	sg_free_table(&p->sgt);
err_unpin:
	unpin_user_pages(p->pages, done);
	kvfree(p->pages);
	return ret;
}

/*
 * Mapped with DMA_ATTR_SKIP_CPU_SYNC and synced once here and once at unpin, as the 6.18 module does, so a
 * buffer that shares cache lines with another mapping of the same memory never syncs behind its back.
 */
int pevb_pin_user(struct device *dev, u64 uaddr, u64 len, bool to_device, struct pevb_pin **out)
{
	struct pevb_pin *p = kzalloc(sizeof(*p), GFP_KERNEL);
	int ret;

	if (!p)
		return -ENOMEM;
	p->dev = dev;
	p->dir = to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
	ret = pin_map(p, uaddr, len, to_device ? 0 : FOLL_WRITE);
	if (ret) {
		kfree(p);
		return ret;
	}
	dma_sync_sgtable_for_device(dev, &p->sgt, p->dir);
	*out = p;
	return 0;
}

const struct pevb_seg *pevb_pin_segments(struct pevb_pin *p, size_t *n)
{
	*n = p->nsegs;
	return p->segs;
}

void pevb_unpin_user(struct pevb_pin *p)
{
	bool dirty = p->dir == DMA_FROM_DEVICE;

	if (dirty)
		dma_sync_sgtable_for_cpu(p->dev, &p->sgt, p->dir);
	kvfree(p->segs);
	dma_unmap_sgtable(p->dev, &p->sgt, p->dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(&p->sgt);
	unpin_user_pages_dirty_lock(p->pages, p->npages, dirty);
	kvfree(p->pages);
	kfree(p);
}

/* Keeps a pin on @q until pevb_pin_release_all(): its engine was not shown idle (the card is wedged). */
void pevb_pin_park(struct list_head *q, struct pevb_pin *p)
{
	list_add_tail(&p->parked, q);
}

void pevb_pin_release_all(struct list_head *q)
{
	struct pevb_pin *p, *n;

	list_for_each_entry_safe(p, n, q, parked) {
		list_del(&p->parked);
		pevb_unpin_user(p);
	}
}
