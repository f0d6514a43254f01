// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/picoevbN: the cards' own character devices, major "picoevb" in /proc/devices and minor N, so that a
 * sandbox admits exactly them (systemd's DeviceAllow=char-picoevb) and not every misc device. One source
 * for both builds (the 5.10 module includes it, as it does pin.c).
 *
 * Each card has a door: the file operations and private data its node's files get. An open does what
 * misc_open() does for a misc device: under pevb_node_lock it finds the door, gives the file the door's
 * private data and operations, and runs their ->open. pevb_node_del() shuts the door under the same lock
 * before anything else, so an ->open never runs after it returns: the caller may then free what the
 * private data points to once its own files let go of it.
 *
 * The cdev is cdev_alloc()'d: a file opened through it holds the cdev (and this module, cdev->owner) until
 * __fput(), after ->release, and the cdev frees itself with its last reference (cdev_dynamic_release).
 */
#include <linux/cdev.h>
#include <linux/device.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/version.h>
#include "node.h"

/* As many as the glues' card numbers (/dev/picoevb0..7). */
#define PEVB_NODES 8

struct pevb_node {
	struct cdev *cdev;
	unsigned int index;
};

static dev_t pevb_node_base;
static struct class *pevb_node_class;

/* The doors, by minor; an empty door has no fops. */
static DEFINE_MUTEX(pevb_node_lock);
static struct {
	const struct file_operations *fops;
	void *private;
} pevb_node_doors[PEVB_NODES];

static int pevb_node_open(struct inode *inode, struct file *file)
{
	unsigned int i = iminor(inode);
	const struct file_operations *fops = NULL;
	int err = -ENODEV;

	mutex_lock(&pevb_node_lock);
	if (i < PEVB_NODES && pevb_node_doors[i].fops)
		fops = fops_get(pevb_node_doors[i].fops);
	if (fops) {
		file->private_data = pevb_node_doors[i].private;
		replace_fops(file, fops);
		err = file->f_op->open ? file->f_op->open(inode, file) : 0;
	}
	mutex_unlock(&pevb_node_lock);
	return err;
}

static const struct file_operations pevb_node_fops = {
	.owner = THIS_MODULE,
	.open = pevb_node_open,
	.llseek = noop_llseek,
};

/* Module init, before the PCI driver registers. */
int pevb_nodes_init(void)
{
	int err = alloc_chrdev_region(&pevb_node_base, 0, PEVB_NODES, "picoevb");

	if (err)
		return err;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	pevb_node_class = class_create("picoevb");
#else
	pevb_node_class = class_create(THIS_MODULE, "picoevb");
#endif
	if (IS_ERR(pevb_node_class)) {
		unregister_chrdev_region(pevb_node_base, PEVB_NODES);
		return PTR_ERR(pevb_node_class);
	}
	return 0;
}

/* Module exit, after the PCI driver is gone (every node deleted). */
void pevb_nodes_exit(void)
{
	class_destroy(pevb_node_class);
	unregister_chrdev_region(pevb_node_base, PEVB_NODES);
}

/*
 * Opens door @index with @fops and @private, then creates /dev/picoevb<index> under @parent. Call it last in
 * probe: an open may run as soon as the node exists.
 */
int pevb_node_add(struct device *parent, unsigned int index, const struct file_operations *fops, void *private,
		  struct pevb_node **out)
{
	dev_t devt = MKDEV(MAJOR(pevb_node_base), MINOR(pevb_node_base) + index);
	struct device *dev;
	struct pevb_node *n;
	int err;

	if (index >= PEVB_NODES || !fops)
		return -EINVAL;
	n = kzalloc(sizeof(*n), GFP_KERNEL);
	if (!n)
		return -ENOMEM;
	n->index = index;
	n->cdev = cdev_alloc();
	if (!n->cdev) {
		err = -ENOMEM;
		goto free;
	}
	n->cdev->owner = THIS_MODULE;
	n->cdev->ops = &pevb_node_fops;
	mutex_lock(&pevb_node_lock);
	pevb_node_doors[index].fops = fops;
	pevb_node_doors[index].private = private;
	mutex_unlock(&pevb_node_lock);
	err = cdev_add(n->cdev, devt, 1);
	if (err) {
		kobject_put(&n->cdev->kobj);
		goto shut;
	}
	dev = device_create(pevb_node_class, parent, devt, NULL, "picoevb%u", index);
	if (IS_ERR(dev)) {
		err = PTR_ERR(dev);
		cdev_del(n->cdev);
		goto shut;
	}
	*out = n;
	return 0;

shut:
	mutex_lock(&pevb_node_lock);
	pevb_node_doors[index].fops = NULL;
	pevb_node_doors[index].private = NULL;
	mutex_unlock(&pevb_node_lock);
free:
	kfree(n);
	return err;
}

/* Shuts the door (no ->open runs after this returns), then removes the node. */
void pevb_node_del(struct pevb_node *n)
{
	mutex_lock(&pevb_node_lock);
	pevb_node_doors[n->index].fops = NULL;
	pevb_node_doors[n->index].private = NULL;
	mutex_unlock(&pevb_node_lock);
	device_destroy(pevb_node_class, n->cdev->dev);
	cdev_del(n->cdev);
	kfree(n);
}
