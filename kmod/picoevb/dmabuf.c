// SPDX-License-Identifier: GPL-2.0
/*
 * IMPORT_DMABUF: a window of another driver's dma-buf (a dGPU's memory exported by NVIDIA's open modules,
 * a memfd through udmabuf, a heap's pages) mapped for the card, for p2p.c, which gives it the driver as a
 * surface under its one pin contract.
 *
 * The attachment is dynamic: its move_notify is the exporter telling us the buffer moves (or is revoked),
 * and plays the GPU provider's free callback. It runs with the buffer's reservation lock held by the
 * exporter; p2p.c's trampoline waits there for the DMAs through the surface and drops the mapping before
 * returning, so the exporter never moves memory the card still reaches. A moved buffer is not mapped
 * again: the surface is dead, as after the free callback, and the application imports anew.
 *
 * Locks. The reservation lock (a ww_mutex, taken alone, so no acquire context) guards the mapping:
 * map, unmap and @sgt are under it (the dma-buf locking convention). It is ordered before fs_reclaim
 * (dma_resv_lockdep), so allocating under it is allowed. A thread that holds a DMA use of the surface must
 * never sleep on it, since move_notify holds it while it waits for those uses: removal, which unmaps
 * under such a use, only tries it (pevb_dmabuf_try_unmap).
 *
 * One mapping of a buffer per device: an exporter maps the whole buffer for each attachment (udmabuf,
 * this bench's), so a second import of it by the same card would map every page twice, which the DMA API
 * does not support (dma-debug: "overlapping mappings aren't supported") and a non-coherent system would
 * get wrong. It is EBUSY, as PIN_CUDA of a page another surface holds; one import of the whole buffer
 * serves any window. pevb_dmabuf_mapped lists the live mappings.
 *
 * The importer never reads the table's struct pages (CONFIG_DMABUF_DEBUG scrambles them): segments come
 * from the DMA addresses, and where they lie from the IOMMU's translation or the direct mapping.
 * CPU-cache and bounce-buffer coherence is the exporter's: its map made the bytes visible to the card and
 * its unmap makes the card's writes visible to the CPU (swiotlb copies there); CPU access in between is
 * DMA_BUF_IOCTL_SYNC on the buffer, the exporter's business.
 */
#include <linux/device.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/iommu.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include "dmabuf.h"
#include "pin.h"

#if PEVB_HAVE_DMABUF
MODULE_IMPORT_NS("DMA_BUF");

/* Imports whose buffer is (about to be) mapped, by buffer and device; the lock is taken alone. */
static LIST_HEAD(pevb_dmabuf_mapped);
static DEFINE_MUTEX(pevb_dmabuf_mapped_lock);

struct pevb_dmabuf {
	struct dma_buf *buf;			/* our reference, from dma_buf_get */
	struct device *dev;			/* ours too: the attachment names it until detach */
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;			/* under the reservation lock; NULL once unmapped */
	struct task_struct *notifying;		/* in move_notify: the exporter holds the lock for us */
	void (*moved)(void *owner);
	void *owner;
	u64 moves;				/* move_notify calls, under the reservation lock */
	u64 moves_at_map;
	u32 placement;
	struct list_head mapped;		/* in pevb_dmabuf_mapped until unmapped; empty after */
	size_t nseg;
	struct pevb_seg *segs;			/* the window's bus segments, built once at import */
};

/* Runs with the reservation lock held by the exporter (dma_buf_move_notify asserts it). */
static void pevb_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	struct pevb_dmabuf *b = attach->importer_priv;

	WRITE_ONCE(b->moves, b->moves + 1);	/* before the owner's lock, which its stale check takes */
	WRITE_ONCE(b->notifying, current);
	b->moved(b->owner);
	WRITE_ONCE(b->notifying, NULL);
}

static const struct dma_buf_attach_ops pevb_dmabuf_importer = {
	.allow_peer2peer = true,	/* a peer's BAR is as good as RAM to the card */
	.move_notify = pevb_dmabuf_move_notify,
};

/* System RAM, a peer's BAR, or (neither bit) an address this kernel cannot translate back. */
static u32 pevb_dmabuf_place(struct device *dev, dma_addr_t addr)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(dev);
	phys_addr_t phys;

	if (dom && dom->type != IOMMU_DOMAIN_IDENTITY)
		phys = iommu_iova_to_phys(dom, addr);	/* 0: not in the domain (a bus address) */
	else if (!dev->dma_range_map)
		phys = addr;				/* the direct mapping */
	else
		return 0;
	if (!phys)
		return PEVB_DMABUF_PEER;
	return page_is_ram(PHYS_PFN(phys)) ? PEVB_DMABUF_SYSTEM : PEVB_DMABUF_PEER;
}

/*
 * The bytes [offset, offset + len) of the mapping as bus segments in @out (room for sgt->nents), neighbours
 * merged; how many, or -EINVAL.
 */
static ssize_t pevb_dmabuf_window(struct device *dev, struct sg_table *sgt, u64 offset, u64 len,
				  struct pevb_seg *out, u32 *placement)
{
	u64 pos = 0, end = offset + len;
	struct scatterlist *sg;
	size_t n = 0;
	int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		u64 a = sg_dma_address(sg), l = sg_dma_len(sg);
		u64 from = max(pos, offset), to = min(pos + l, end);

		if (from < to) {
			out[n].addr = a + (from - pos);
			out[n].len = to - from;
			*placement |= pevb_dmabuf_place(dev, out[n].addr);
			n++;
		}
		pos += l;
		if (pos >= end)
			return pevb_segments_coalesce(out, n);
	}
	return -EINVAL;	/* the exporter mapped less than its size */
}

/* Lists @b as the mapping of its buffer for its device; false if another import has that already. */
static bool pevb_dmabuf_claim(struct pevb_dmabuf *b)
{
	struct pevb_dmabuf *o;

	guard(mutex)(&pevb_dmabuf_mapped_lock);
	list_for_each_entry(o, &pevb_dmabuf_mapped, mapped)
		if (o->buf == b->buf && o->dev == b->dev)
			return false;
	list_add(&b->mapped, &pevb_dmabuf_mapped);
	return true;
}

static void pevb_dmabuf_unclaim(struct pevb_dmabuf *b)
{
	guard(mutex)(&pevb_dmabuf_mapped_lock);
	list_del_init(&b->mapped);
}

static void pevb_dmabuf_unmap_locked(struct pevb_dmabuf *b)
{
	dma_resv_assert_held(b->buf->resv);
	if (!b->sgt)
		return;
	dma_buf_unmap_attachment(b->attach, b->sgt, DMA_BIDIRECTIONAL);
	b->sgt = NULL;
	pevb_dmabuf_unclaim(b);
}

/*
 * Attaches and maps [offset, offset + len) of dma-buf @fd for @dev. @moved(@owner) is called, with the
 * reservation lock held, each time the exporter moves the buffer once this returns. -EINVAL for a window
 * not in whole host pages or beyond the buffer, and for an fd that is not a dma-buf; -EBADF for no fd.
 */
int pevb_dmabuf_import(struct device *dev, int fd, u64 offset, u64 len, void (*moved)(void *owner), void *owner,
		       struct pevb_dmabuf **out)
{
	struct pevb_dmabuf *b;
	struct sg_table *sgt;
	struct dma_buf *buf;
	ssize_t n;
	int ret;

	buf = dma_buf_get(fd);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	if (!len || !PAGE_ALIGNED(offset) || !PAGE_ALIGNED(len) || offset > buf->size || len > buf->size - offset) {
		dev_info_ratelimited(dev, "IMPORT_DMABUF refused: [%llu, +%llu) of a %zu-byte buffer (whole %lu-byte pages inside it)\n",
				     offset, len, buf->size, PAGE_SIZE);
		ret = -EINVAL;
		goto put;
	}
	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b) {
		ret = -ENOMEM;
		goto put;
	}
	b->buf = buf;
	b->dev = get_device(dev);	/* a removed card's file may hold the import until close */
	b->moved = moved;
	b->owner = owner;
	INIT_LIST_HEAD(&b->mapped);
	if (!pevb_dmabuf_claim(b)) {
		dev_info_ratelimited(dev, "IMPORT_DMABUF refused: this card maps that buffer already (import it once)\n");
		ret = -EBUSY;
		goto free;
	}
	/* move_notify may come as soon as the attachment exists: the owner ignores it until it goes live. */
	b->attach = dma_buf_dynamic_attach(buf, dev, &pevb_dmabuf_importer, b);
	if (IS_ERR(b->attach)) {
		ret = PTR_ERR(b->attach);
		goto free;
	}
	ret = dma_resv_lock_interruptible(buf->resv, NULL);
	if (ret)
		goto detach;
	sgt = dma_buf_map_attachment(b->attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {	/* unclaimed below */
		ret = PTR_ERR(sgt);
		goto unlock;
	}
	b->sgt = sgt;
	b->moves_at_map = b->moves;
	/* A dynamic importer waits for the exporter's own moves (kernel fences) before using the memory. */
	n = dma_resv_wait_timeout(buf->resv, DMA_RESV_USAGE_KERNEL, true, MAX_SCHEDULE_TIMEOUT);
	if (n > 0) {
		/* At most one segment per mapped entry: one walk fills and merges them. */
		b->segs = kmalloc_array(sgt->nents, sizeof(*b->segs), GFP_KERNEL);
		n = b->segs ? pevb_dmabuf_window(dev, sgt, offset, len, b->segs, &b->placement) : -ENOMEM;
	}
	if (n <= 0) {
		pevb_dmabuf_unmap_locked(b);
		ret = n ?: -EINVAL;
		goto unlock;
	}
	b->nseg = n;
	dma_resv_unlock(buf->resv);
	*out = b;
	return 0;

unlock:
	dma_resv_unlock(buf->resv);
detach:
	dma_buf_detach(buf, b->attach);
free:
	pevb_dmabuf_unclaim(b);
	put_device(b->dev);
	kfree(b->segs);
	kfree(b);
put:
	dma_buf_put(buf);
	return ret;
}

/*
 * Whether the buffer moved since it was mapped. p2p.c asks once, under the pin's spinlock, before going
 * live; move_notify counts before it calls the owner, which takes that lock, so a move the owner ignored
 * (still pinning) is seen here.
 */
bool pevb_dmabuf_stale(struct pevb_dmabuf *b)
{
	return READ_ONCE(b->moves) != b->moves_at_map;
}

const struct pevb_seg *pevb_dmabuf_segments(struct pevb_dmabuf *b, size_t *n)
{
	*n = b->nseg;
	return b->segs;
}

u32 pevb_dmabuf_placement(struct pevb_dmabuf *b)
{
	return b->placement;
}

/* Drops the card's mapping, once. Inside move_notify the exporter holds the lock already. */
void pevb_dmabuf_unmap(struct pevb_dmabuf *b)
{
	if (READ_ONCE(b->notifying) == current) {
		pevb_dmabuf_unmap_locked(b);
		return;
	}
	dma_resv_lock(b->buf->resv, NULL);
	pevb_dmabuf_unmap_locked(b);
	dma_resv_unlock(b->buf->resv);
}

/* pevb_dmabuf_unmap for a thread holding a DMA use: false, unmapping nothing, if the lock is taken. */
bool pevb_dmabuf_try_unmap(struct pevb_dmabuf *b)
{
	if (READ_ONCE(b->notifying) == current) {
		pevb_dmabuf_unmap_locked(b);
		return true;
	}
	if (!dma_resv_trylock(b->buf->resv))
		return false;
	pevb_dmabuf_unmap_locked(b);
	dma_resv_unlock(b->buf->resv);
	return true;
}

/*
 * Unmapped already. dma_buf_detach takes the reservation lock, so a move_notify still returning through
 * this module's text has returned once it is done: p2p.c frees the pin's module reference only after this.
 */
void pevb_dmabuf_release(struct pevb_dmabuf *b)
{
	dma_buf_detach(b->buf, b->attach);
	dma_buf_put(b->buf);
	put_device(b->dev);
	kfree(b->segs);
	kfree(b);
}
#endif
