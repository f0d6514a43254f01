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
};

static int pevb_open(struct inode *inode, struct file *file)
{
	/* misc_open() holds misc_mtx around this call and removal deregisters under it: the card is alive. */
	struct pevb_card *card = container_of(file->private_data, struct pevb_card, misc);
	struct pevb_file *pf = kzalloc(sizeof(*pf), GFP_KERNEL);

	if (!pf)
		return -ENOMEM;
	kref_get(&card->ref);
	pf->card = card;
	file->private_data = pf;
	return 0;
}

static int pevb_release(struct inode *inode, struct file *file)
{
	struct pevb_file *pf = file->private_data;

	pevb_card_put(pf->card);
	kfree(pf);
	return 0;
}

/* Lets go of one side of a finished request; a wedged card keeps a failed request's pages (file.rs). */
static void release_pin(struct pevb_card *card, struct pevb_pin *p, int result)
{
	if (result && pevb_card_wedged(card))
		pevb_card_quarantine(card, p);
	else
		pevb_unpin_user(p);
}

/* GPU surfaces need a provider this build does not attach yet: an unknown handle, as on 6.18. */
static int host_side(const struct pevb_side *s)
{
	return s->cuda ? -EINVAL : 0;
}

static int one_way(struct pevb_card *card, const struct pevb_req *r, u64 *ns)
{
	bool h2c = r->op == PEVB_OP_H2C;
	const struct pevb_side *host = h2c ? &r->src : &r->dst;
	struct pevb_engine *e = &card->eng[h2c ? 0 : 1];
	const struct pevb_seg *segs;
	struct pevb_pin *p;
	size_t n;
	u64 t0;
	int ret;

	ret = host_side(host);
	if (ret)
		return ret;
	ret = pevb_card_begin(card);
	if (ret)
		return ret;
	ret = pevb_pin_user(&card->pdev->dev, host->addr, r->len, h2c, &p);
	if (ret)
		goto out;
	segs = pevb_pin_segments(p, &n);
	mutex_lock(&e->lock);
	t0 = ktime_get_ns();
	ret = pevb_engine_transfer(card, e, segs, n, 0, r->fpga, r->len);
	*ns = ktime_get_ns() - t0;
	mutex_unlock(&e->lock);
	release_pin(card, p, ret);
out:
	pevb_card_end(card);
	return ret;
}

/* Host memory -> FPGA RAM -> host memory, in RAM-sized windows, both engines locked H2C first. */
static int round_trip(struct pevb_card *card, const struct pevb_req *r, u64 *ns)
{
	const struct pevb_seg *src_segs, *dst_segs;
	struct pevb_pin *src, *dst;
	size_t ns_src, ns_dst;
	u64 done = 0, n, t0;
	int ret;

	ret = host_side(&r->src) ?: host_side(&r->dst);
	if (ret)
		return ret;
	ret = pevb_card_begin(card);
	if (ret)
		return ret;
	ret = pevb_pin_user(&card->pdev->dev, r->src.addr, r->len, true, &src);
	if (ret)
		goto out;
	ret = pevb_pin_user(&card->pdev->dev, r->dst.addr, r->len, false, &dst);
	if (ret) {
		pevb_unpin_user(src);
		goto out;
	}
	src_segs = pevb_pin_segments(src, &ns_src);
	dst_segs = pevb_pin_segments(dst, &ns_dst);
	mutex_lock(&card->eng[0].lock);
	mutex_lock(&card->eng[1].lock);
	t0 = ktime_get_ns();
	while (!ret && done < r->len) {
		n = min(r->len - done, card->facts.ram_size);
		ret = pevb_engine_transfer(card, &card->eng[0], src_segs, ns_src, done, 0, n) ?:
		      pevb_engine_transfer(card, &card->eng[1], dst_segs, ns_dst, done, 0, n);
		done += n;
	}
	*ns = ktime_get_ns() - t0;
	mutex_unlock(&card->eng[1].lock);
	mutex_unlock(&card->eng[0].lock);
	release_pin(card, dst, ret);
	release_pin(card, src, ret);
out:
	pevb_card_end(card);
	return ret;
}

static int set_leds(struct pevb_card *card, u32 value)
{
	int ret = pevb_card_begin(card);

	if (ret)
		return ret;
	iowrite32(value, card->bar_user + PEVB_REGS.gpio_data);
	/* Read back: MMIO writes are posted, and the caller may look at the LEDs as soon as we return. */
	ioread32(card->bar_user + PEVB_REGS.gpio_data);
	pevb_card_end(card);
	return 0;
}

static long pevb_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct pevb_card *card = ((struct pevb_file *)file->private_data)->card;
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
	ret = pevb_ioctl_check(op, arg, buf, size, card->facts.ram_size, &req);
	if (ret)
		return ret;
	switch (op) {
	case PEVB_OP_LED:
		return set_leds(card, req.value);
	case PEVB_OP_CARD_INFO:
	case PEVB_OP_ABI_INFO:
		ret = pevb_ioctl_info(op, buf, size, &card->facts);
		break;
	case PEVB_OP_H2C:
	case PEVB_OP_C2H:
		ret = one_way(card, &req, &ns) ?: pevb_ioctl_done(op, buf, size, ns, 0);
		break;
	case PEVB_OP_H2C2H:
		ret = round_trip(card, &req, &ns) ?: pevb_ioctl_done(op, buf, size, ns, 0);
		break;
	case PEVB_OP_PIN_CUDA:
		return -EOPNOTSUPP;	/* no GPU-memory provider attached in this build yet */
	case PEVB_OP_UNPIN_CUDA:
		return -EINVAL;		/* no handle was ever given out */
	default:
		return -ENOTTY;		/* REG_CACHE: no registration cache in this build (no CAP_REG_CACHE) */
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
	.llseek = noop_llseek,
};
