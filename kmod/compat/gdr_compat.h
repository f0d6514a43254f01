/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What Linux 4.9 and 4.14 (JetPack 4, DRIVE OS 5.2) lack that the 5.10 glue uses, in 5.10's names, so that
 * one glue builds for 4.9.x, 4.14.x and 5.10 or later (issue 23; docs/kernels-4x.md says where each API
 * appeared and how it was read). Force-included into every C file of the 5.10 modules (their Kbuild files),
 * and of the 6.18 ones so that CI compiles it there too; on 5.10 and later it defines nothing but an empty
 * GDR_COMPAT_PIN_COUNTER(). kmod/compat/include/ holds the headers 4.x lacks, searched only after the
 * kernel's own.
 */
#ifndef GDR_COMPAT_H
#define GDR_COMPAT_H
#include <linux/version.h>

#if LINUX_VERSION_CODE >= KERNEL_VERSION(4, 15, 0) && LINUX_VERSION_CODE < KERNEL_VERSION(5, 10, 0)
#error "the 5.10 glue builds for Linux 4.9.x, 4.14.x and 5.10 or later"
#endif

#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 10, 0)
/* /proc/vmstat counts FOLL_PIN pins (nr_foll_pin_*): nothing to add. */
#define GDR_COMPAT_PIN_COUNTER() static_assert(1, "no pin counter")
#else
#include <linux/atomic.h>
#include <linux/moduleparam.h>

/*
 * 4.x counts no pins (FOLL_PIN is 5.6; a pin is a page reference), so the bench could not see a leaked or a
 * missing one. Pages pinned through the shims below are counted instead, per module, and shown read-only
 * as the module parameter compat_pinned_pages, which the guest suite reads where 5.x has
 * nr_foll_pin_acquired - nr_foll_pin_released. Each module says GDR_COMPAT_PIN_COUNTER() once.
 */
extern atomic_long_t gdr_compat_pinned_pages;
#define GDR_COMPAT_PIN_COUNTER()                                                                   \
	atomic_long_t gdr_compat_pinned_pages = ATOMIC_LONG_INIT(0);                               \
	static int gdr_compat_pinned_get(char *buf, const struct kernel_param *kp)                 \
	{                                                                                          \
		return sprintf(buf, "%ld\n", atomic_long_read(&gdr_compat_pinned_pages));        \
	}                                                                                          \
	static const struct kernel_param_ops gdr_compat_pinned_ops = { .get = gdr_compat_pinned_get }; \
	module_param_cb(compat_pinned_pages, &gdr_compat_pinned_ops, NULL, 0444)

/* No mmu interval notifier (5.5): no watched pins (the registration cache, PIN_HOST), no guard in p2p.c.
 * Shared files test this name, defined for 4.x only: 5.10 and 6.18 keep all of them. */
#define GDR_NO_INTERVAL_NOTIFIER 1

#include <linux/compat.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/rcupdate.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/swiotlb.h>
#include <linux/vmalloc.h>

/* ---- pinning user memory ---- */

/* FOLL_* end at FOLL_ANON 0x8000 on 4.9/4.14: a private bit that pin_user_pages_fast turns into
 * get_user_pages_longterm (a stable backport in both). */
#define FOLL_LONGTERM 0x10000000

/* 4.x has no FOLL_PIN: a pin is a page reference, as a get_user_pages caller's. */
static inline int pin_user_pages_fast(unsigned long start, int nr, unsigned int gup, struct page **pages)
{
	long got;

	if (!(gup & FOLL_LONGTERM)) {
		got = get_user_pages_fast(start, nr, !!(gup & FOLL_WRITE), pages);
	} else {
		down_read(&current->mm->mmap_sem);
		got = get_user_pages_longterm(start, nr, gup & ~FOLL_LONGTERM, pages, NULL);
		up_read(&current->mm->mmap_sem);
	}
	if (got > 0)
		atomic_long_add(got, &gdr_compat_pinned_pages);
	return got;
}

static inline void unpin_user_pages(struct page **pages, unsigned long n)
{
	atomic_long_sub(n, &gdr_compat_pinned_pages);
	while (n)
		put_page(pages[--n]);
}

static inline void unpin_user_pages_dirty_lock(struct page **pages, unsigned long n, bool dirty)
{
	unsigned long i;

	atomic_long_sub(n, &gdr_compat_pinned_pages);
	for (i = 0; i < n; i++) {
		if (dirty && !PageDirty(pages[i]))
			set_page_dirty_lock(pages[i]);
		put_page(pages[i]);
	}
}

/* get_user_pages_fast's third argument is `int write` before 5.2: FOLL_WRITE is 1, so callers passing
 * FOLL_WRITE or 0 mean the same thing on both. */

/* ---- DMA mapping ---- */

static inline int dma_map_sgtable(struct device *dev, struct sg_table *sgt, enum dma_data_direction dir,
				  unsigned long attrs)
{
	int n = dma_map_sg_attrs(dev, sgt->sgl, sgt->orig_nents, dir, attrs);

	if (n <= 0)
		return -ENOMEM;
	sgt->nents = n;
	return 0;
}

static inline void dma_unmap_sgtable(struct device *dev, struct sg_table *sgt, enum dma_data_direction dir,
				     unsigned long attrs)
{
	dma_unmap_sg_attrs(dev, sgt->sgl, sgt->orig_nents, dir, attrs);
}

static inline void dma_sync_sgtable_for_cpu(struct device *dev, struct sg_table *sgt,
					    enum dma_data_direction dir)
{
	dma_sync_sg_for_cpu(dev, sgt->sgl, sgt->orig_nents, dir);
}

static inline void dma_sync_sgtable_for_device(struct device *dev, struct sg_table *sgt,
					       enum dma_data_direction dir)
{
	dma_sync_sg_for_device(dev, sgt->sgl, sgt->orig_nents, dir);
}

#define for_each_sgtable_sg(sgt, sg, i) for_each_sg((sgt)->sgl, sg, (sgt)->orig_nents, i)
#define for_each_sgtable_dma_sg(sgt, sg, i) for_each_sg((sgt)->sgl, sg, (sgt)->nents, i)

/* A sync does something only for a non-coherent device (arm64) or a bounce buffer (swiotlb=force, which 4.x
 * does not show modules). Never "always": 4.x dma-debug cannot match a partial sync of an address two
 * mappings share (lib/dma-debug.c __hash_bucket_find). */
static inline bool dma_need_sync(struct device *dev, dma_addr_t addr)
{
#ifdef CONFIG_ARM64
	return !is_device_dma_coherent(dev);
#else
	return false;
#endif
}

static inline size_t dma_max_mapping_size(struct device *dev)
{
	return IS_ENABLED(CONFIG_SWIOTLB) ? (size_t)IO_TLB_SEGSIZE << IO_TLB_SHIFT : SIZE_MAX;
}

/* 5.10's __sg_alloc_table_from_pages (pin.c's < 5.15 branch) for a whole table: 4.x's
 * sg_alloc_table_from_pages has no segment limit. Pfn-contiguous pages merged up to @max_segment. */
static inline struct scatterlist *gdr_sg_alloc_table_from_pages(struct sg_table *sgt, struct page **pages,
		unsigned int n_pages, unsigned int offset, unsigned long size, unsigned int max_segment,
		struct scatterlist *prv, unsigned int left_pages, gfp_t gfp)
{
	unsigned int i, cur, chunks = 0, seg = 0;
	struct scatterlist *s;
	int ret;

	if (WARN_ON(prv || left_pages || max_segment < PAGE_SIZE || !n_pages))
		return ERR_PTR(-EINVAL);
	max_segment &= PAGE_MASK;
	for (i = 0; i < n_pages; i++) {
		if (!i || seg + PAGE_SIZE > max_segment ||
		    page_to_pfn(pages[i]) != page_to_pfn(pages[i - 1]) + 1) {
			chunks++;
			seg = 0;
		}
		seg += PAGE_SIZE;
	}
	ret = sg_alloc_table(sgt, chunks, gfp);
	if (ret)
		return ERR_PTR(ret);
	cur = 0;
	for_each_sg(sgt->sgl, s, sgt->orig_nents, i) {
		unsigned int j = cur + 1;
		unsigned long len;

		seg = PAGE_SIZE;
		while (j < n_pages && seg + PAGE_SIZE <= max_segment &&
		       page_to_pfn(pages[j]) == page_to_pfn(pages[j - 1]) + 1) {
			j++;
			seg += PAGE_SIZE;
		}
		len = min_t(unsigned long, size, seg - offset);
		sg_set_page(s, pages[cur], len, offset);
		size -= len;
		offset = 0;
		cur = j;
	}
	return sgt->sgl;
}
#define __sg_alloc_table_from_pages gdr_sg_alloc_table_from_pages

/* ---- allocation, ids, lists ---- */

#if LINUX_VERSION_CODE < KERNEL_VERSION(4, 12, 0)
static inline void *kvmalloc_array(size_t n, size_t size, gfp_t flags)
{
	size_t bytes;
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	bytes = n * size;
	p = kmalloc(bytes, flags | (bytes > PAGE_SIZE ? __GFP_NOWARN | __GFP_NORETRY : 0));
	if (!p && bytes > PAGE_SIZE)
		p = __vmalloc(bytes, flags | __GFP_HIGHMEM, PAGE_KERNEL);
	return p;
}
#endif
#define kvcalloc(n, size, flags) kvmalloc_array(n, size, (flags) | __GFP_ZERO)

#define ida_alloc_max(ida, max, gfp) ida_simple_get(ida, 0, (max) + 1, gfp)
#define ida_free(ida, id) ida_simple_remove(ida, id)

#if LINUX_VERSION_CODE < KERNEL_VERSION(4, 11, 0)
/* idr_remove returns the entry since 4.11; callers hold the idr's lock, so find + remove is one step. */
static inline void *gdr_idr_remove(struct idr *idr, int id)
{
	void *p = idr_find(idr, id);

	if (p)
		idr_remove(idr, id);
	return p;
}
#define idr_remove gdr_idr_remove
#endif

static inline int hlist_unhashed_lockless(const struct hlist_node *h)
{
	return !READ_ONCE(h->pprev);
}

/* ---- mmu notifiers ---- */

/* 4.x's mmu_notifier_synchronize() is srcu_barrier(): it waits for queued call_srcu() callbacks, not for
 * notifier methods still running. One queued callback first makes it wait a full grace period, as 5.x's
 * synchronize_srcu() does. */
static inline void gdr_srcu_noop(struct rcu_head *r)
{
}

static inline void gdr_mmu_notifier_synchronize(void)
{
	struct rcu_head r;

	init_rcu_head_on_stack(&r);
	mmu_notifier_call_srcu(&r, gdr_srcu_noop);
	mmu_notifier_synchronize();
	destroy_rcu_head_on_stack(&r);
}
#define mmu_notifier_synchronize() gdr_mmu_notifier_synchronize()

/* The classic notifier's 4.x form: invalidate_range_start is void and takes the range as arguments (always
 * blockable, no event), and there is no mmu_notifier_put / .free_notifier (5.4). The provider's bodies take
 * 5.x's range; its 4-argument wrappers fill this one. */
#define GDR_OLD_MMU_NOTIFIER 1
struct mmu_notifier_range {
	struct mm_struct *mm;
	unsigned long start;
	unsigned long end;
};

static inline bool mmu_notifier_range_blockable(const struct mmu_notifier_range *range)
{
	return true;
}

/* ---- files, time, checks ---- */

#ifdef CONFIG_COMPAT
static inline long gdr_compat_ptr_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	if (!f->f_op->unlocked_ioctl)
		return -ENOIOCTLCMD;
	return f->f_op->unlocked_ioctl(f, cmd, (unsigned long)compat_ptr(arg));
}
#define compat_ptr_ioctl gdr_compat_ptr_ioctl
#else
#define compat_ptr_ioctl NULL
#endif

#define DEFINE_SHOW_ATTRIBUTE(__name)                                                      \
	static int __name##_open(struct inode *inode, struct file *file)                   \
	{                                                                                  \
		return single_open(file, __name##_show, inode->i_private);                 \
	}                                                                                  \
	static const struct file_operations __name##_fops = {                              \
		.owner = THIS_MODULE,                                                      \
		.open = __name##_open,                                                     \
		.read = seq_read,                                                          \
		.llseek = seq_lseek,                                                       \
		.release = single_release,                                                 \
	}

static inline void fsleep(unsigned long us)
{
	if (us <= 10)
		udelay(us);
	else if (us <= 20000)
		usleep_range(us, 2 * us);
	else
		msleep(DIV_ROUND_UP(us, 1000));
}

#define static_assert(expr, ...) __gdr_static_assert(expr, ##__VA_ARGS__, #expr)
#define __gdr_static_assert(expr, msg, ...) _Static_assert(expr, msg)

#endif /* < 5.10 */
#endif /* GDR_COMPAT_H */
