// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/picoevbN on 5.10: the ioctl ABI of crates/picoevb-abi, decoded and checked by the Rust logic
 * (pevb_ioctl_op/check/done/info), run on the card here. The glue copies the command's bytes in and out and
 * never interprets an ABI struct itself. The rules are kmod/picoevb/file.rs's: after hot removal a file
 * only lets go of what it holds; a request whose engine could not be shown idle keeps its pages pinned.
 */
#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "picoevb.h"

struct pevb_file {
	struct pevb_card *card;
	struct pevb_surfaces surfaces;	/* GPU surfaces pinned through this file */
	struct pevb_cache *cache;	/* host buffers cached through this file (regcache.c) */
	u64 ram_member;			/* its part in the card RAM's ownership (ram.c), under ram_lock */
};

static int pevb_open(struct inode *inode, struct file *file)
{
	/*
	 * The node's door (node.c) gave us the card and holds pevb_node_lock around this call; removal shuts
	 * the door under that lock before it puts the binding's reference: the card is alive.
	 */
	struct pevb_card *card = file->private_data;
	struct pevb_file *pf = kzalloc(sizeof(*pf), GFP_KERNEL);

	if (!pf)
		return -ENOMEM;
	if (pevb_cache_open(card, &pf->cache)) {
		kfree(pf);
		return -ENOMEM;
	}
	kref_get(&card->ref);
	pf->card = card;
	pevb_surfaces_init(&pf->surfaces);
	file->private_data = pf;
	/* No file position (the ioctls carry their addresses): lseek fails with ESPIPE, as on 6.18, whose
	 * open drops FMODE_LSEEK for file operations without llseek. */
	return nonseekable_open(inode, file);
}

static int pevb_release(struct inode *inode, struct file *file)
{
	struct pevb_file *pf = file->private_data;

	pevb_surfaces_unpin_all(&pf->surfaces);
	pevb_cache_release(pf->card, pf->cache);
	/* No request of this file is in flight any more: the RAM is free if this was its owner's last file. */
	pevb_ram_closed(pf->card, &pf->ram_member);
	pevb_card_put(pf->card);
	kfree(pf);
	return 0;
}

/*
 * One transfer's holds, taken and let go of in the order the shared gate decides (kmod/logic/src/gate.rs,
 * through rust/gate_glue.rs, which calls the pevb_gate_* services below and nothing else touches @side).
 * A side holds a pin of user memory for this request, a use of a cached buffer, or a use of a GPU surface.
 */
struct pevb_xfer {
	struct pevb_file *pf;
	struct {
		struct pevb_pin *pin;
		struct pevb_cuse *cuse;
		struct pevb_use use;	/* use.s: held */
	} side[2];			/* 0: the source (the device reads it), 1: the destination */
};

/* prefault.c: before the request holds the device (removal drains that hold) or any lock of the card. */
int pevb_gate_prefault(u64 addr, u64 len, bool device_writes)
{
	return pevb_user_prefault(addr, len, device_writes);
}

int pevb_gate_begin(struct pevb_xfer *x)
{
	return pevb_card_begin(x->pf->card);
}

void pevb_gate_end(struct pevb_xfer *x)
{
	pevb_card_end(x->pf->card);
}

int pevb_gate_ram_begin(struct pevb_xfer *x)
{
	return pevb_ram_use(x->pf->card, &x->pf->ram_member);
}

void pevb_gate_ram_end(struct pevb_xfer *x)
{
	pevb_ram_unuse(x->pf->card);
}

int pevb_gate_pin(struct pevb_xfer *x, u32 side, u64 addr, u64 len)
{
	return pevb_cache_get(x->pf->cache, x->pf->card, addr, len, side == 0, &x->side[side].cuse,
			      &x->side[side].pin);
}

void pevb_gate_unpin(struct pevb_xfer *x, u32 side)
{
	if (x->side[side].cuse)
		pevb_cuse_end(x->side[side].cuse);
	else
		pevb_unpin_user(x->side[side].pin);
}

/* Until unbind: the engine may still touch the pages. */
void pevb_gate_quarantine(struct pevb_xfer *x, u32 side)
{
	if (x->side[side].cuse)
		pevb_card_quarantine_cached(x->pf->card, x->side[side].cuse);
	else
		pevb_card_quarantine(x->pf->card, x->side[side].pin);
}

int pevb_gate_enter(struct pevb_xfer *x, u32 side, u32 handle, u64 at, u64 len)
{
	return pevb_surfaces_enter(&x->pf->surfaces, handle, at, len, side == 0, &x->side[side].use);
}

void pevb_gate_exit(struct pevb_xfer *x, u32 side)
{
	pevb_use_end(&x->side[side].use);
}

bool pevb_gate_wedged(struct pevb_xfer *x)
{
	return pevb_card_wedged(x->pf->card);
}

/*
 * The window at @at of the request: a host pin holds just the window, a surface use the whole surface, so
 * *@off is where the window starts in the returned segments.
 */
static const struct pevb_seg *segments(struct pevb_xfer *x, u32 side, u64 at, size_t *n, u64 *off)
{
	*off = 0;
	if (x->side[side].use.s) {
		*off = at;
		return pevb_use_segments(&x->side[side].use, n);
	}
	if (x->side[side].cuse)
		return pevb_cuse_segments(x->side[side].cuse, n);
	return pevb_pin_segments(x->side[side].pin, n);
}

/*
 * @dir 0: H2C from the source, 1: C2H into the destination, so @dir is also the side (gate.rs's Side::of).
 * Killable: the engine may be busy with another request for up to its timeout.
 */
int pevb_gate_one_way(struct pevb_xfer *x, u32 dir, u64 fpga, u64 at, u64 len, u64 *ns)
{
	struct pevb_card *card = x->pf->card;
	struct pevb_engine *e = &card->eng[dir];
	const struct pevb_seg *segs;
	size_t n;
	u64 t0, off;
	int ret;

	segs = segments(x, dir, at, &n, &off);
	ret = mutex_lock_killable(&e->lock);
	if (ret)
		return ret;
	t0 = ktime_get_ns();
	ret = pevb_transfer(card, e, segs, n, off, fpga, len);
	*ns = ktime_get_ns() - t0;
	mutex_unlock(&e->lock);
	return ret;
}

/* Source -> FPGA RAM -> destination, pipelined (duplex.c), both engines locked H2C first. */
int pevb_gate_round_trip(struct pevb_xfer *x, u64 at, u64 len, u64 *ns)
{
	struct pevb_card *card = x->pf->card;
	const struct pevb_seg *src, *dst;
	size_t nsrc, ndst;
	u64 t0, src_at, dst_at;
	int ret;

	src = segments(x, 0, at, &nsrc, &src_at);
	dst = segments(x, 1, at, &ndst, &dst_at);
	ret = mutex_lock_killable(&card->eng[0].lock);
	if (ret)
		return ret;
	ret = mutex_lock_killable(&card->eng[1].lock);
	if (ret) {
		mutex_unlock(&card->eng[0].lock);
		return ret;
	}
	t0 = ktime_get_ns();
	ret = pevb_round_trip(card, src, nsrc, src_at, dst, ndst, dst_at, len);
	*ns = ktime_get_ns() - t0;
	mutex_unlock(&card->eng[1].lock);
	mutex_unlock(&card->eng[0].lock);
	return ret;
}

static int transfer(struct pevb_file *pf, const struct pevb_req *r, u64 *ns)
{
	struct pevb_xfer x = { .pf = pf };

	return pevb_gate_transfer(&x, r, ns);
}

static int set_leds(struct pevb_card *card, u32 value)
{
	int ret = pevb_card_begin(card);

	if (ret)
		return ret;
	ret = pevb_user_set_leds(card, value);
	pevb_card_end(card);
	return ret;
}

/*
 * ABI_INFO from the card now, so the agent's health check sees a card that stopped answering (as card.rs's
 * abi_info does): a config block reading all ones is ENODEV (gone, confirmed) or EIO; the ID block is read again.
 */
static int live_facts(struct pevb_card *card, struct pevb_facts *facts)
{
	int ret = pevb_card_begin(card);

	if (ret)
		return ret;
	if (pevb_rd(card, PEVB_REGS.blocks[3]) == U32_MAX)
		ret = pevb_card_vanished(card) ? -ENODEV : -EIO;
	else if (facts->id_block) {
		ret = pevb_user_identity(card, &facts->design_version, &facts->build_hash, &facts->stream);
		/* 0: the ID block probe found has vanished, so this is not the card probe found. */
		ret = ret > 0 ? 0 : (ret ?: -EIO);
	}
	pevb_card_end(card);
	return ret;
}

static long pevb_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct pevb_file *pf = file->private_data;
	struct pevb_card *card = pf->card;
	struct pevb_facts facts;
	void __user *uarg = (void __user *)arg;
	size_t size = _IOC_SIZE(cmd);
	u64 buf[16], ns = 0;	/* the largest argument (REG_CACHE) is 104 bytes */
	struct pevb_req req;
	int op = pevb_ioctl_op(cmd), ret;

	/* After hot removal a file only lets go of what it holds. */
	if (pevb_card_gone(card) && op != PEVB_OP_UNPIN_CUDA)
		return -ENODEV;
	if (op < 0)
		return op;
	if (size > sizeof(buf))
		return -ENOTTY;
	if (op != PEVB_OP_LED && (_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(buf, uarg, size))
		return -EFAULT;
	ret = pevb_ioctl_check(op, arg, buf, size, &card->facts, &req);
	if (ret)
		return ret;
	switch (op) {
	case PEVB_OP_LED:
		return set_leds(card, req.value);
	case PEVB_OP_CARD_INFO:
	case PEVB_OP_ABI_INFO:
		facts = card->facts;
		if (op == PEVB_OP_ABI_INFO) {
			ret = live_facts(card, &facts);
			if (ret)
				return ret;
		}
		facts.provider = pevb_provider_available();
		facts.reg_cache = 1;	/* regcache.c, on every kernel this module builds for */
		ret = pevb_ioctl_info(op, buf, size, &facts);
		break;
	case PEVB_OP_H2C:
	case PEVB_OP_C2H:
	case PEVB_OP_H2C2H:
		ret = transfer(pf, &req, &ns) ?: pevb_ioctl_done(op, buf, size, ns, 0);
		break;
	case PEVB_OP_PIN_CUDA:
	case PEVB_OP_PIN_HOST: {
		u32 handle;

		ret = pevb_surfaces_pin(&pf->surfaces, card, op == PEVB_OP_PIN_HOST, req.src.addr, req.len);
		if (ret < 0)
			return ret;
		handle = ret;
		ret = pevb_ioctl_done(op, buf, size, 0, handle);
		/* The caller never learns the handle if the copy-out faults: nothing may stay pinned under it. */
		if (!ret && copy_to_user(uarg, buf, size)) {
			pevb_surfaces_unpin(&pf->surfaces, handle);
			return -EFAULT;
		}
		return ret;
	}
	case PEVB_OP_UNPIN_CUDA:
		return pevb_surfaces_unpin(&pf->surfaces, req.value);
	case PEVB_OP_REG_CACHE:
		ret = pevb_cache_control(pf->cache, buf, size);
		break;
	case PEVB_OP_STREAM:
		ret = pevb_card_begin(card);
		if (ret)
			return ret;
		ret = pevb_user_stream(card, buf, size);
		pevb_card_end(card);
		break;
	case PEVB_OP_RAM_OWNER: {
		u32 state;

		ret = pevb_ram_control(card, &pf->ram_member, req.value, &state) ?:
		      pevb_ioctl_done(op, buf, size, 0, state);
		break;
	}
	default:
		return -ENOTTY;
	}
	if (ret)
		return ret;
	return copy_to_user(uarg, buf, size) ? -EFAULT : 0;
}

const struct file_operations pevb_fops = {
	.owner = THIS_MODULE,	/* an open file holds the module: rmmod waits for close */
	.open = pevb_open,
	.release = pevb_release,
	.unlocked_ioctl = pevb_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = no_llseek,
};
