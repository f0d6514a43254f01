// SPDX-License-Identifier: GPL-2.0
/*
 * Pinning user memory (as kmod/picoevb/helpers.c's pin_map, in 5.10's API): pin the pages, build an
 * sg_table that merges physically contiguous pages, DMA-map it, and hand the Rust logic the bus segments,
 * coalesced. For one request (FOLL_PIN, writable only when the device writes them) or for the registration
 * cache (FOLL_LONGTERM, writable, bidirectional, never a shared mapping of a file system's file:
 * long_pin_allowed; regcache.c syncs each request's bytes).
 */
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/hugetlb_inline.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/sched/signal.h>
#include <linux/scatterlist.h>
#include <linux/semaphore.h>
#include <linux/slab.h>
#include <linux/sort.h>
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
	bool slot;			/* holds one of oneoff_writes */
};

/*
 * One-off pins the device writes that may exist at once, module-wide: requests pin before they queue for
 * their engine, and DMA-API debug supports at most seven overlapping mappings of a cache line the device
 * may write. Four, plus one long-lived mapping per card on two cards, stays within that. helpers.c's
 * pevb_oneoff_writes (6.18) says why in full.
 */
#define ONEOFF_WRITES 4
static struct semaphore oneoff_writes = __SEMAPHORE_INITIALIZER(oneoff_writes, ONEOFF_WRITES);

static void slot_put(struct pevb_pin *p)
{
	if (p->slot) {
		p->slot = false;
		up(&oneoff_writes);
	}
}

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
	if (!to_device) {
		/* Killable: a process being killed does not wait for other requests' engines. */
		if (down_killable(&oneoff_writes)) {
			kfree(p);
			return -EINTR;
		}
		p->slot = true;
	}
	ret = pin_map(p, uaddr, len, to_device ? 0 : FOLL_WRITE);
	if (ret) {
		slot_put(p);
		kfree(p);
		return ret;
	}
	dma_sync_sgtable_for_device(dev, &p->sgt, p->dir);
	*out = p;
	return 0;
}

/*
 * Whether [uaddr, uaddr + len) of the caller's memory may be pinned long-term for the device to write:
 * -EOPNOTSUPP where a shared mapping of a file system's file covers part of it. The file system writes
 * such pages back, cleans them and may release their buffers while the device still writes them (the GUP
 * vs writeback problem). Linux 6.5+ refuses them in GUP itself for FOLL_LONGTERM | FOLL_WRITE
 * (writable_file_mapping_allowed); 5.10's FOLL_LONGTERM refuses only DAX (check_dax_vmas), so the rule is
 * here. Allowed: anonymous memory, private file mappings (FOLL_WRITE pins anonymous copies: COW is broken
 * first), tmpfs and memfd (shmem: no writeback) and hugetlbfs. shmem is told by its superblock's magic
 * because 5.10 exports neither vma_is_shmem() nor shmem_mapping(). Checked after the caller's notifier
 * began its read (regcache.c's cpin_new): a mapping replaced after the check bumps the sequence, and the
 * retry checks again.
 */
static int long_pin_allowed(u64 uaddr, u64 len)
{
	unsigned long start = uaddr & PAGE_MASK, end = PAGE_ALIGN(uaddr + len);
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	int ret = 0;

	if (!mm)
		return -EFAULT;
	mmap_read_lock(mm);
	for (vma = find_vma(mm, start); vma && vma->vm_start < end; vma = vma->vm_next) {
		if (!(vma->vm_flags & VM_SHARED) || !vma->vm_file || is_vm_hugetlb_page(vma))
			continue;
		if (file_inode(vma->vm_file)->i_sb->s_magic != TMPFS_MAGIC) {
			ret = -EOPNOTSUPP;
			break;
		}
	}
	mmap_read_unlock(mm);
	return ret;
}

/*
 * A registration-cache pin (helpers.c's pevb_cpin_new pins the same way): FOLL_LONGTERM (CMA pages migrate
 * first), writable, one bidirectional mapping serving H2C and C2H; shared file mappings that need writeback
 * are refused here (long_pin_allowed), as 6.5+'s GUP does. DMA_ATTR_SKIP_CPU_SYNC and no sync here:
 * pevb_pin_sync_window hands over each request's bytes.
 */
int pevb_pin_long(struct device *dev, u64 uaddr, u64 len, struct pevb_pin **out)
{
	struct pevb_pin *p;
	int ret;

	ret = long_pin_allowed(uaddr, len);
	if (ret)
		return ret;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	p->dev = dev;
	p->dir = DMA_BIDIRECTIONAL;
	ret = pin_map(p, uaddr, len, FOLL_LONGTERM | FOLL_WRITE);
	if (ret) {
		kfree(p);
		return ret;
	}
	*out = p;
	return 0;
}

/*
 * Hands the bytes [offset, offset + len) of a long pin to the device (before a DMA) or back to the CPU (after
 * a C2H), in the request's direction: helpers.c's pevb_cpin_sync, whose comment says why exact bytes (never
 * rounded to cache lines: swiotlb would copy stale bytes over a neighbour's) and why only where
 * dma_need_sync() says a sync does something.
 */
void pevb_pin_sync_window(struct pevb_pin *p, u64 offset, u64 len, bool to_device, bool for_device)
{
	enum dma_data_direction dir = to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
	struct scatterlist *sg;
	u64 at = 0, end = offset + len;
	int i;

	for_each_sgtable_dma_sg(&p->sgt, sg, i) {
		u64 seg = sg_dma_len(sg), from = max(at, offset), to = min(at + seg, end);
		dma_addr_t a = sg_dma_address(sg) + (from - at);

		if (from < to && dma_need_sync(p->dev, a))
			pevb_sync_pieces(p->dev, a, to - from, dir, for_device);
		at += seg;
		if (at >= end)
			break;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The pages a pin holds, by page frame number, sorted (the per-card overlap rules key on them). */
int pevb_pin_frames(struct pevb_pin *p, u64 **out, size_t *n)
{
	u64 *f = kvmalloc_array(p->npages, sizeof(*f), GFP_KERNEL);
	unsigned long i;

	if (!f)
		return -ENOMEM;
	for (i = 0; i < p->npages; i++)
		f[i] = page_to_pfn(p->pages[i]);
	sort(f, p->npages, sizeof(*f), cmp_u64, NULL);
	*out = f;
	*n = p->npages;
	return 0;
}

/*
 * The pages [first, end) of the caller's memory map now, sorted, or none (*n = 0) where they are not
 * writable struct pages. Takes no pin: the numbers name pages for the overlap rules, never DMA. Looked up
 * for writing, as the long pins that follow (cached pins, the provider's): a COW or zero page is replaced
 * now, not by the pin after us.
 */
int pevb_user_frames(u64 first, u64 end, u64 **out, size_t *n)
{
	size_t want = (end - first) >> PAGE_SHIFT, i;
	u64 *f = kvmalloc_array(want, sizeof(*f), GFP_KERNEL);
	struct page *pg;

	*out = NULL;
	*n = 0;
	if (!f)
		return -ENOMEM;
	for (i = 0; i < want; i++) {
		if (get_user_pages_fast(first + (i << PAGE_SHIFT), 1, FOLL_WRITE, &pg) != 1) {
			kvfree(f);
			return 0;
		}
		f[i] = page_to_pfn(pg);
		put_page(pg);
	}
	sort(f, want, sizeof(*f), cmp_u64, NULL);
	*out = f;
	*n = want;
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
	pevb_pin_drop(p, dirty);
}

/* Unmaps (no sync) and unpins; pages the device may have written are marked dirty (@dirty). */
void pevb_pin_drop(struct pevb_pin *p, bool dirty)
{
	kvfree(p->segs);
	dma_unmap_sgtable(p->dev, &p->sgt, p->dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(&p->sgt);
	unpin_user_pages_dirty_lock(p->pages, p->npages, dirty);
	kvfree(p->pages);
	slot_put(p);
	kfree(p);
}

/* Keeps a pin on @q until pevb_pin_release_all(): its engine was not shown idle (the card is wedged). */
void pevb_pin_park(struct list_head *q, struct pevb_pin *p)
{
	slot_put(p);	/* a wedged card moves no data: its pins do not hold up other cards' requests */
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
