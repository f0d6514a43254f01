// SPDX-License-Identifier: GPL-2.0
/*
 * dGPU flavour only: /dev/gdr_nv_p2p_vram, the bench's stand-in for GPU memory.
 *
 * NVIDIA's dGPU API hands out one bus address per 64 KiB GPU page, valid for the whole page, because GPU
 * memory (BAR1) is made of such pages. Ordinary user memory on a guest without an IOMMU, THP or hugetlbfs
 * is scattered 4 KiB pages, so it cannot honestly be described that way (and copying it through a kernel
 * bounce buffer would not be zero-copy). A test that wants "GPU memory" therefore mmap()s this device
 * instead of calling cudaMalloc: every 64 KiB of the mapping is one naturally aligned, physically
 * contiguous 64 KiB block of host RAM (an order-4 allocation), zeroed, at a 64 KiB-aligned user address.
 * The memory is then pinned by nvidia_p2p_get_pages exactly like any other user memory (pin_user_pages),
 * and the device DMAs into the very pages the process sees. It is freed when the last mapping and the last
 * pin are gone. Any other memory that happens to be built of such blocks (THP, hugetlbfs) works as well.
 *
 * Use: fd = open("/dev/gdr_nv_p2p_vram", O_RDWR); p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
 * fd, 0) with len a multiple of 64 KiB; each mmap() gets fresh memory (the offset is ignored).
 */
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/module.h>
#include <linux/sched.h>

#include "internal.h"

#define GDR_VRAM_ORDER		(GDR_GPU_PAGE_SHIFT - PAGE_SHIFT)
#define GDR_VRAM_NR		(1U << GDR_VRAM_ORDER)
#define GDR_VRAM_MAX_MAP	(256UL << 20)	/* per mmap() */

/* A free range with room to start it on a 64 KiB boundary. */
static unsigned long gdr_vram_get_unmapped_area(struct file *file, unsigned long addr, unsigned long len,
						unsigned long pgoff, unsigned long flags)
{
	unsigned long a;

	if (len > GDR_VRAM_MAX_MAP)
		return -ENOMEM;
	if (flags & MAP_FIXED)
		return IS_ALIGNED(addr, GDR_GPU_PAGE_SIZE) ? addr : -EINVAL;
	a = mm_get_unmapped_area(current->mm, file, 0, len + GDR_GPU_PAGE_SIZE - PAGE_SIZE, pgoff, flags);
	if (IS_ERR_VALUE(a))
		return a;
	return ALIGN(a, GDR_GPU_PAGE_SIZE);
}

static int gdr_vram_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start, addr;
	struct page *pages[GDR_VRAM_NR];
	unsigned int i;

	/* Shared: a private mapping would copy-on-write into ordinary anonymous pages. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (!IS_ALIGNED(vma->vm_start, GDR_GPU_PAGE_SIZE) || !IS_ALIGNED(len, GDR_GPU_PAGE_SIZE) ||
	    len > GDR_VRAM_MAX_MAP)
		return -EINVAL;
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);

	for (addr = vma->vm_start; addr < vma->vm_end; addr += GDR_GPU_PAGE_SIZE) {
		struct page *block = alloc_pages(GFP_HIGHUSER | __GFP_ZERO | __GFP_NOWARN, GDR_VRAM_ORDER);
		unsigned long left = GDR_VRAM_NR;
		int ret;

		if (!block)
			return -ENOMEM;	/* the caller unmaps what was inserted, freeing it */
		/* Each 4 KiB page gets its own refcount, as vm_insert_pages() requires. */
		split_page(block, GDR_VRAM_ORDER);
		for (i = 0; i < GDR_VRAM_NR; i++)
			pages[i] = block + i;
		ret = vm_insert_pages(vma, addr, pages, &left);
		/* The page tables hold their own references now; drop the allocation's. */
		for (i = 0; i < GDR_VRAM_NR; i++)
			put_page(pages[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static const struct file_operations gdr_vram_fops = {
	.owner = THIS_MODULE,
	.mmap = gdr_vram_mmap,
	.get_unmapped_area = gdr_vram_get_unmapped_area,
};

static struct miscdevice gdr_vram_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdr_nv_p2p_vram",
	.fops = &gdr_vram_fops,
	.mode = 0600,
};

int gdr_vram_init(void)
{
	return misc_register(&gdr_vram_dev);
}

void gdr_vram_exit(void)
{
	misc_deregister(&gdr_vram_dev);
}
