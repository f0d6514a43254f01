// SPDX-License-Identifier: GPL-2.0
/*
 * User memory pinned and DMA-mapped: one source for both builds (the 5.10 module includes it as it does
 * p2p.c and prefault.c). Pin the pages, build an sg_table that merges physically contiguous pages, DMA-map
 * it with DMA_ATTR_SKIP_CPU_SYNC, and build its bus segments once (coalesced by the shared logic's
 * pevb_segments_coalesce), so a request only borrows them. For one request (FOLL_PIN, writable only where
 * the device writes) or long-term for the registration cache (FOLL_LONGTERM, writable, bidirectional; each
 * request's bytes are synced by pevb_pin_sync_window). Policy-free: what is pinned how is the driver's.
 */
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/hugetlb_inline.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/scatterlist.h>
#include <linux/semaphore.h>
#include <linux/slab.h>
#include <linux/version.h>

#include "pin.h"

struct pevb_pin {
	struct sg_table sgt;
	struct page **pages;
	unsigned long npages;
	struct device *dev;
	enum dma_data_direction dir;
	struct pevb_seg *segs;		/* bus segments, built at pin time, coalesced */
	size_t nsegs;
	struct list_head parked;	/* 5.10: on a wedged card's quarantine list */
	bool slot;			/* holds one of pevb_oneoff_writes */
};


/* An sg_table over @n pages, physically contiguous ones merged up to @max_seg bytes. */
static int pevb_sg_from_pages(struct sg_table *sgt, struct page **pages, unsigned long n, unsigned int off,
			      u64 len, unsigned int max_seg)
{
#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 15, 0)
	/* No sg_alloc_table_from_pages_segment() before 5.15; this is what it wraps there. */
	return PTR_ERR_OR_ZERO(__sg_alloc_table_from_pages(sgt, pages, n, off, len, max_seg, NULL, 0,
							   GFP_KERNEL));
#else
	return sg_alloc_table_from_pages_segment(sgt, pages, n, off, len, max_seg, GFP_KERNEL);
#endif
}

/*
 * Pin [uaddr, uaddr + len) of the caller's memory with @gup flags, build an sg_table that merges physically
 * contiguous pages, DMA-map it for @dev in direction @dir (no CPU sync: the callers sync what each DMA
 * touches) and build its bus segments.
 */
static int pevb_pin_map(struct pevb_pin *p, struct device *dev, u64 uaddr, u64 len, unsigned int gup,
			enum dma_data_direction dir)
{
	unsigned long first, npages, done = 0;
	struct scatterlist *sg;
	int ret, i;

	if (!len || uaddr + len < uaddr)
		return -EINVAL;
	first = uaddr >> PAGE_SHIFT;
	npages = ((uaddr + len - 1) >> PAGE_SHIFT) - first + 1;
	if (npages > INT_MAX)
		return -EINVAL;

	p->dev = dev;
	p->dir = dir;
	p->pages = kvmalloc_array(npages, sizeof(*p->pages), GFP_KERNEL);
	if (!p->pages)
		return -ENOMEM;
	/* pin_user_pages_fast may pin fewer pages than asked: keep going until all are pinned. */
	while (done < npages) {
		ret = pin_user_pages_fast((first + done) << PAGE_SHIFT, npages - done, gup, p->pages + done);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			goto err_unpin;
		}
		done += ret;
	}
	p->npages = npages;
	ret = pevb_sg_from_pages(&p->sgt, p->pages, npages, offset_in_page(uaddr), len,
				 dma_get_max_seg_size(dev));
	if (ret)
		goto err_unpin;
	ret = dma_map_sgtable(dev, &p->sgt, p->dir, DMA_ATTR_SKIP_CPU_SYNC);
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
	dma_unmap_sgtable(dev, &p->sgt, p->dir, DMA_ATTR_SKIP_CPU_SYNC);
err_sgt:
	sg_free_table(&p->sgt);
err_unpin:
	unpin_user_pages(p->pages, done);
	kvfree(p->pages);
	return ret;
}

/*
 * One-off pins the device writes (DMA_FROM_DEVICE) that may exist at once, module-wide. A request pins its
 * memory before it queues for its engine, and DMA-API debug supports at most seven overlapping mappings of
 * a cache line the device may write (ACTIVE_CACHELINE_MAX_OVERLAP in kernel/dma/debug.c; one more is a
 * WARNING): without a bound, threads writing into one page would each hold a mapping of it while they
 * queue. Four, plus the one long-lived mapping a page may have per card (a GPU surface or a cached buffer)
 * on two cards, stays within that. A request holds at most one (H2C2H's source is read by the device), and
 * holds it only up to its engine, which ends in bounded time: no wait for one holds another. It also
 * bounds the memory one-off pins hold while queued.
 */
#define PEVB_ONEOFF_WRITES 4
static struct semaphore pevb_oneoff_writes = __SEMAPHORE_INITIALIZER(pevb_oneoff_writes, PEVB_ONEOFF_WRITES);

static void pevb_pin_slot_put(struct pevb_pin *p)
{
	if (p->slot) {
		p->slot = false;
		up(&pevb_oneoff_writes);
	}
}

/*
 * Pin for one request: plain FOLL_PIN (the pin ends with the request, so FOLL_LONGTERM's refusals of file
 * mappings that need writeback and its CMA migrations would only cost), writable only when the device
 * writes the memory. Mapped like a cached pin (DMA_ATTR_SKIP_CPU_SYNC, the whole buffer handed to the
 * device here and back to the CPU at unpin), so it may share cache lines with a cached buffer of the same
 * memory without being an overlapping mapping that syncs on its own.
 */
int pevb_pin_user(struct device *dev, u64 uaddr, u64 len, bool to_device, struct pevb_pin **out)
{
	struct pevb_pin *p = kzalloc(sizeof(*p), GFP_KERNEL);
	int ret;

	if (!p)
		return -ENOMEM;
	if (!to_device) {
		/* Killable: a process being killed does not wait for other requests' engines. */
		if (down_killable(&pevb_oneoff_writes)) {
			kfree(p);
			return -EINTR;
		}
		p->slot = true;
	}
	ret = pevb_pin_map(p, dev, uaddr, len, to_device ? 0 : FOLL_WRITE,
			   to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
	if (ret) {
		pevb_pin_slot_put(p);
		kfree(p);
		return ret;
	}
	dma_sync_sgtable_for_device(dev, &p->sgt, p->dir);
	*out = p;
	return 0;
}

/* Ends a one-off pin: back to the CPU if the device wrote it, then unmapped and unpinned (dirtied). */
void pevb_unpin_user(struct pevb_pin *p)
{
	bool dirty = p->dir == DMA_FROM_DEVICE;

	if (dirty)
		dma_sync_sgtable_for_cpu(p->dev, &p->sgt, p->dir);
	pevb_pin_drop(p, dirty);
}

/*
 * The pin stays until unbind (its card is wedged): it gives its slot back now, so a wedged card's pins do
 * not hold up other cards' requests. Its mapping is no longer counted; a wedged card moves no data.
 */
void pevb_pin_quarantined(struct pevb_pin *p)
{
	pevb_pin_slot_put(p);
}

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 5, 0)
/*
 * Whether [uaddr, uaddr + len) of the caller's memory may be pinned long-term for the device to write:
 * -EOPNOTSUPP where a shared mapping of a file system's file covers part of it. The file system writes
 * such pages back, cleans them and may release their buffers while the device still writes them (the GUP
 * vs writeback problem). Linux 6.5+ refuses them in GUP itself for FOLL_LONGTERM | FOLL_WRITE
 * (writable_file_mapping_allowed); before, FOLL_LONGTERM refuses only DAX (check_dax_vmas), so the rule is
 * here. Allowed: anonymous memory, private file mappings (FOLL_WRITE pins anonymous copies: COW is broken
 * first), tmpfs and memfd (shmem: no writeback) and hugetlbfs. shmem is told by its superblock's magic
 * because 5.10 exports neither vma_is_shmem() nor shmem_mapping(). Checked after the caller's notifier
 * began its read (the cache's pin): a mapping replaced after the check bumps the sequence, and the retry
 * checks again.
 */
static int pevb_long_pin_allowed(u64 uaddr, u64 len)
{
	unsigned long start = uaddr & PAGE_MASK, end = PAGE_ALIGN(uaddr + len);
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	int ret = 0;

	if (!mm)
		return -EFAULT;
	mmap_read_lock(mm);
	for (vma = find_vma(mm, start); vma && vma->vm_start < end; vma = find_vma(mm, vma->vm_end)) {
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
#else
static int pevb_long_pin_allowed(u64 uaddr, u64 len)
{
	return 0;	/* GUP refuses FOLL_LONGTERM | FOLL_WRITE on such mappings itself */
}
#endif

/*
 * A registration-cache pin: FOLL_LONGTERM (CMA pages migrate first), writable, one bidirectional mapping
 * serving H2C and C2H; shared file mappings that need writeback are refused (-EOPNOTSUPP or GUP's error).
 * No sync here: pevb_pin_sync_window hands over each request's bytes.
 */
int pevb_pin_long(struct device *dev, u64 uaddr, u64 len, struct pevb_pin **out)
{
	struct pevb_pin *p;
	int ret;

	ret = pevb_long_pin_allowed(uaddr, len);
	if (ret)
		return ret;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	ret = pevb_pin_map(p, dev, uaddr, len, FOLL_LONGTERM | FOLL_WRITE, DMA_BIDIRECTIONAL);
	if (ret) {
		kfree(p);
		return ret;
	}
	*out = p;
	return 0;
}

/* The first half of ending a pin (no sync): the device no longer reaches the pages. */
void pevb_pin_unmap(struct pevb_pin *p)
{
	dma_unmap_sgtable(p->dev, &p->sgt, p->dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(&p->sgt);
}

/* The second half: pages the device may have written are marked dirty (@dirty), then p is freed. */
void pevb_pin_unpin(struct pevb_pin *p, bool dirty)
{
	unpin_user_pages_dirty_lock(p->pages, p->npages, dirty);
	kvfree(p->pages);
	kvfree(p->segs);
	pevb_pin_slot_put(p);
	kfree(p);
}

/* Unmaps (no sync) and unpins. */
void pevb_pin_drop(struct pevb_pin *p, bool dirty)
{
	pevb_pin_unmap(p);
	pevb_pin_unpin(p, dirty);
}

/*
 * Hands the bytes [offset, offset + len) of the buffer to the device (before a DMA) or back to the CPU
 * (after a C2H), in the request's direction: only what the request touches, so a C2H never overwrites
 * (swiotlb) or invalidates (a non-coherent cache) the CPU's writes to the rest of a cached buffer, which
 * may be another buffer merged into it. Exact bytes, not rounded to cache lines: the architecture handles
 * partial lines at the edges (arm64 cleans and invalidates them), and swiotlb would copy stale bytes over
 * a neighbour's. Synced per mapped segment in page pieces (pevb_sync_pieces: behind an IOMMU a segment's
 * pages are not physically contiguous), and only where the DMA API says a sync does something
 * (dma_need_sync: a non-coherent device or a bounce buffer): DMA-API debug matches a partial sync to the
 * one mapping that contains it, and finds none when two mappings of one page share their addresses (no
 * IOMMU, no bounce buffer), which is exactly where a sync does nothing. pevb_sync_needed() asks it, and
 * says yes everywhere behind an IOMMU while the check_syncs bench switch is on (p2p.c).
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

		if (from < to && pevb_sync_needed(p->dev, a))
			pevb_sync_pieces(p->dev, a, to - from, dir, for_device);
		at += seg;
		if (at >= end)
			break;
	}
}

/* The bus segments, in order, bus-contiguous neighbours merged: valid until the pin is unmapped. */
const struct pevb_seg *pevb_pin_segments(struct pevb_pin *p, size_t *n)
{
	*n = p->nsegs;
	return p->segs;
}

/* The pages behind a pin, by page frame number: the driver's overlap rules key on them. */
unsigned long pevb_pin_npages(struct pevb_pin *p)
{
	return p->npages;
}

u64 pevb_pin_pfn(struct pevb_pin *p, unsigned long i)
{
	return i < p->npages ? page_to_pfn(p->pages[i]) : 0;
}

/*
 * The page frame numbers that [uaddr, uaddr + len) of the caller's memory maps now, one per page from the
 * page holding uaddr, into @out (@n entries, exactly the range's pages). Takes no pin: the numbers name
 * pages for the overlap rules (one long-lived mapping per page and card), they are not used for DMA.
 * Looked up for writing, as the pins that follow (cached pins, the provider's) take them: a page not yet
 * written (the shared zero page) or shared copy-on-write is replaced now, not by the pin after us.
 * -EFAULT where the range is not all mapped writable by struct pages (read-only memory, a dGPU's BAR).
 */
int pevb_user_pfns(u64 uaddr, u64 len, u64 *out, unsigned long n)
{
	struct page *pages[16];
	unsigned long first, npages, done = 0;

	if (!len || uaddr + len < uaddr)
		return -EINVAL;
	first = uaddr >> PAGE_SHIFT;
	npages = ((uaddr + len - 1) >> PAGE_SHIFT) - first + 1;
	if (npages != n)
		return -EINVAL;
	while (done < npages) {
		int want = min_t(unsigned long, npages - done, ARRAY_SIZE(pages));
		int got = get_user_pages_fast((first + done) << PAGE_SHIFT, want, FOLL_WRITE, pages);
		int i;

		if (got <= 0)
			return got ? got : -EFAULT;
		for (i = 0; i < got; i++) {
			out[done + i] = page_to_pfn(pages[i]);
			put_page(pages[i]);
		}
		done += got;
	}
	return 0;
}
