// SPDX-License-Identifier: GPL-2.0
/*
 * gdr_exporter.ko: a bench-only dma-buf exporter (/dev/gdr_exporter, API in gdr_exporter.h) whose buffers move
 * on request. picoevb.ko imports dma-bufs through a dynamic attachment; only an exporter that really moves its
 * storage proves that picoevb stops using the old pages when move_notify tells it to: a move copies the bytes
 * to new pages and frees the old ones, so what a late DMA still wrote is missing from the buffer (READ shows
 * it), and a mapping not given back in time leaves the buffer unmoved (EBUSY).
 *
 * A buffer is system memory, one order-0 page at a time (not contiguous on purpose, one scatterlist entry per
 * page). It is a dynamic exporter (it has pin/unpin), so with CONFIG_DMABUF_MOVE_NOTIFY a dynamic importer's
 * mapping does not pin it. All of a buffer's state (its pages and counters) is guarded by the buffer's
 * reservation lock, the lock the dma-buf core holds around pin, unpin, map and unmap.
 *
 * No user memory is touched with that lock held: lockdep knows mmap_lock as taken before any reservation lock
 * (dma_resv_lockdep()), so WRITE and READ copy through a bounce page, one page at a time.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "gdr_exporter.h"

/* One exported buffer (dma_buf->priv). Every field but npages is guarded by the dma-buf's resv lock. */
struct gdr_exp_buf {
	struct page **pages;
	unsigned int npages;	/* fixed for the buffer's life */
	u32 mapped;		/* map_dma_buf calls not yet unmapped */
	u32 attachments;
	u32 pins;
	u64 moves;
};

static void gdr_exp_free_pages(struct page **pages, unsigned int npages)
{
	unsigned int i;

	for (i = 0; i < npages; i++)
		__free_page(pages[i]);
	kvfree(pages);
}

static struct page **gdr_exp_alloc_pages(unsigned int npages)
{
	struct page **pages = kvcalloc(npages, sizeof(*pages), GFP_KERNEL);
	unsigned int i;

	if (!pages)
		return NULL;
	for (i = 0; i < npages; i++) {
		pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!pages[i]) {
			gdr_exp_free_pages(pages, i);
			return NULL;
		}
	}
	return pages;
}

/* attach and detach are called without the resv lock (dma-buf locking convention), so they take it. */
static int gdr_exp_attach(struct dma_buf *dmabuf, struct dma_buf_attachment *attach)
{
	struct gdr_exp_buf *buf = dmabuf->priv;

	dma_resv_lock(dmabuf->resv, NULL);
	buf->attachments++;
	dma_resv_unlock(dmabuf->resv);
	return 0;
}

static void gdr_exp_detach(struct dma_buf *dmabuf, struct dma_buf_attachment *attach)
{
	struct gdr_exp_buf *buf = dmabuf->priv;

	dma_resv_lock(dmabuf->resv, NULL);
	buf->attachments--;
	dma_resv_unlock(dmabuf->resv);
}

/* Only counted: a pinned buffer is simply never moved (GDR_EXP_MOVE refuses it). */
static int gdr_exp_pin(struct dma_buf_attachment *attach)
{
	struct gdr_exp_buf *buf = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	buf->pins++;
	return 0;
}

static void gdr_exp_unpin(struct dma_buf_attachment *attach)
{
	struct gdr_exp_buf *buf = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	buf->pins--;
}

static struct sg_table *gdr_exp_map(struct dma_buf_attachment *attach, enum dma_data_direction dir)
{
	struct gdr_exp_buf *buf = attach->dmabuf->priv;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned int i;
	int ret;

	dma_resv_assert_held(attach->dmabuf->resv);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	/*
	 * One entry per page even where pages happen to be adjacent: the importer always sees a real scatter
	 * list, and no entry is ever longer than a device's maximum segment (dma-debug would object).
	 */
	ret = sg_alloc_table(sgt, buf->npages, GFP_KERNEL);
	if (ret)
		goto err_free;
	for_each_sgtable_sg(sgt, sg, i)
		sg_set_page(sg, buf->pages[i], PAGE_SIZE, 0);
	ret = dma_map_sgtable(attach->dev, sgt, dir, 0);
	if (ret)
		goto err_table;
	buf->mapped++;
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void gdr_exp_unmap(struct dma_buf_attachment *attach, struct sg_table *sgt, enum dma_data_direction dir)
{
	struct gdr_exp_buf *buf = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	buf->mapped--;
}

/* The last reference is gone, so no importer can hold a mapping: one left behind is an importer's leak. */
static void gdr_exp_release(struct dma_buf *dmabuf)
{
	struct gdr_exp_buf *buf = dmabuf->priv;

	WARN_ON(buf->mapped || buf->attachments || buf->pins);
	gdr_exp_free_pages(buf->pages, buf->npages);
	kfree(buf);
}

static const struct dma_buf_ops gdr_exp_ops = {
	.attach = gdr_exp_attach,
	.detach = gdr_exp_detach,
	.pin = gdr_exp_pin,
	.unpin = gdr_exp_unpin,
	.map_dma_buf = gdr_exp_map,
	.unmap_dma_buf = gdr_exp_unmap,
	.release = gdr_exp_release,
};

/* The dma-buf behind @fd, with a reference, if this module exported it; dma_buf_get()'s errors pass through. */
static struct dma_buf *gdr_exp_get(int fd)
{
	struct dma_buf *dmabuf = dma_buf_get(fd);

	if (IS_ERR(dmabuf))
		return dmabuf;
	if (dmabuf->ops != &gdr_exp_ops) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-EINVAL);
	}
	return dmabuf;
}

static long gdr_exp_create(struct gdr_exp_create __user *uarg)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct gdr_exp_create arg;
	struct gdr_exp_buf *buf;
	struct dma_buf *dmabuf;
	int fd;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || !arg.size || arg.size > GDR_EXP_MAX_SIZE || !PAGE_ALIGNED(arg.size))
		return -EINVAL;
	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	buf->npages = arg.size >> PAGE_SHIFT;
	buf->pages = gdr_exp_alloc_pages(buf->npages);
	if (!buf->pages) {
		kfree(buf);
		return -ENOMEM;
	}

	/* exp_info.owner is THIS_MODULE: each buffer holds the module until its release. */
	exp_info.exp_name = "gdr_exporter";
	exp_info.ops = &gdr_exp_ops;
	exp_info.size = arg.size;
	exp_info.flags = O_RDWR;
	exp_info.priv = buf;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		gdr_exp_free_pages(buf->pages, buf->npages);
		kfree(buf);
		return PTR_ERR(dmabuf);
	}

	/* dma_buf_fd() split in two: the fd is installed only once the caller has its number, so EFAULT leaks none. */
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(dmabuf);
		return fd;
	}
	if (put_user(fd, &uarg->fd)) {
		put_unused_fd(fd);
		dma_buf_put(dmabuf);
		return -EFAULT;
	}
	fd_install(fd, dmabuf->file);
	return 0;
}

static long gdr_exp_move(struct gdr_exp_fd __user *uarg)
{
	struct page **pages, **old;
	struct gdr_exp_buf *buf;
	struct dma_buf *dmabuf;
	struct gdr_exp_fd arg;
	unsigned int i;
	long ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.flags & ~GDR_EXP_MOVE_HOLD)
		return -EINVAL;
	dmabuf = gdr_exp_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	buf = dmabuf->priv;

	/* The new pages are allocated before the lock is taken, so no reclaim runs under it. */
	pages = gdr_exp_alloc_pages(buf->npages);
	if (!pages) {
		ret = -ENOMEM;
		goto out_put;
	}
	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (ret)
		goto out_free;
	/* A pin (a static importer's mapping, or dma_buf_pin()) promises that the pages stay where they are. */
	if (buf->pins) {
		ret = -EBUSY;
		goto out_unlock;
	}
	/* An exporter busy with the buffer before it tells: an importer must not sleep on the lock meanwhile. */
	if (arg.flags & GDR_EXP_MOVE_HOLD)
		msleep(GDR_EXP_HOLD_MS);
	dma_buf_move_notify(dmabuf);
	/* As any exporter does, the storage goes only once every fence on it has signalled. */
	ret = dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_BOOKKEEP, true, MAX_SCHEDULE_TIMEOUT);
	if (ret < 0)
		goto out_unlock;
	if (buf->mapped) {
		pr_warn("%u mapping(s) still live after move_notify, buffer not moved\n", buf->mapped);
		ret = -EBUSY;
		goto out_unlock;
	}
	for (i = 0; i < buf->npages; i++)
		copy_highpage(pages[i], buf->pages[i]);
	old = buf->pages;
	buf->pages = pages;
	pages = old;
	buf->moves++;
	ret = 0;
out_unlock:
	dma_resv_unlock(dmabuf->resv);
out_free:
	/* After a move the old pages, which no one maps any more; else the new ones, unused. */
	gdr_exp_free_pages(pages, buf->npages);
out_put:
	dma_buf_put(dmabuf);
	return ret;
}

static long gdr_exp_io(struct gdr_exp_io __user *uarg, bool write)
{
	struct gdr_exp_buf *buf;
	struct dma_buf *dmabuf;
	struct gdr_exp_io arg;
	void *bounce;
	long ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.flags)
		return -EINVAL;
	dmabuf = gdr_exp_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	buf = dmabuf->priv;
	if (arg.len > dmabuf->size || arg.offset > dmabuf->size - arg.len) {
		ret = -EINVAL;
		goto out_put;
	}
	/* A write from memory that is not all readable fails before it changes a byte of the buffer. */
	if (write && fault_in_readable(u64_to_user_ptr(arg.uaddr), arg.len)) {
		ret = -EFAULT;
		goto out_put;
	}
	bounce = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!bounce) {
		ret = -ENOMEM;
		goto out_put;
	}

	ret = 0;
	while (arg.len) {
		void __user *user = u64_to_user_ptr(arg.uaddr);
		unsigned int off = offset_in_page(arg.offset);
		size_t n = min_t(u64, arg.len, PAGE_SIZE - off);
		struct page *page;

		if (write && copy_from_user(bounce, user, n)) {
			ret = -EFAULT;
			break;
		}
		ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
		if (ret)
			break;
		/* Looked up under the lock, page by page: a MOVE in between swaps the pages. */
		page = buf->pages[arg.offset >> PAGE_SHIFT];
		if (write)
			memcpy_to_page(page, off, bounce, n);
		else
			memcpy_from_page(bounce, page, off, n);
		dma_resv_unlock(dmabuf->resv);
		if (!write && copy_to_user(user, bounce, n)) {
			ret = -EFAULT;
			break;
		}
		arg.offset += n;
		arg.uaddr += n;
		arg.len -= n;
	}
	kfree(bounce);
out_put:
	dma_buf_put(dmabuf);
	return ret;
}

static long gdr_exp_state(struct gdr_exp_state __user *uarg)
{
	struct gdr_exp_state arg;
	struct gdr_exp_buf *buf;
	struct dma_buf *dmabuf;
	int ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.reserved[0] || arg.reserved[1])
		return -EINVAL;
	dmabuf = gdr_exp_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	buf = dmabuf->priv;
	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (!ret) {
		arg.mapped = buf->mapped;
		arg.attachments = buf->attachments;
		arg.pins = buf->pins;
		arg.moves = buf->moves;
		dma_resv_unlock(dmabuf->resv);
	}
	dma_buf_put(dmabuf);
	if (ret)
		return ret;
	return copy_to_user(uarg, &arg, sizeof(arg)) ? -EFAULT : 0;
}

static long gdr_exp_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case GDR_EXP_CREATE:
		return gdr_exp_create(uarg);
	case GDR_EXP_MOVE:
		return gdr_exp_move(uarg);
	case GDR_EXP_WRITE:
		return gdr_exp_io(uarg, true);
	case GDR_EXP_READ:
		return gdr_exp_io(uarg, false);
	case GDR_EXP_STATE:
		return gdr_exp_state(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations gdr_exp_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = gdr_exp_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice gdr_exp_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdr_exporter",
	.fops = &gdr_exp_fops,
	.mode = 0600,
};
module_misc_device(gdr_exp_misc);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gdr bench: a dma-buf exporter whose buffers move on request");
MODULE_IMPORT_NS("DMA_BUF");
