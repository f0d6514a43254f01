// SPDX-License-Identifier: GPL-2.0
/*
 * picoevb.ko for Linux 5.10 (Jetson AGX Xavier, L4T R35): PCI driver for the PicoEVB FPGA card. The same
 * driver as kmod/picoevb (6.18, Rust-for-Linux), for a kernel without Rust support: the logic is the same
 * Rust source files, linked in as one object (rust/, see Kbuild), and this C is only the glue 5.10 needs.
 * Probe and removal follow kmod/picoevb/picoevb_main.rs and card.rs step by step.
 */
#include <linux/debugfs.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/slab.h>
#include "picoevb.h"

#define REGS PEVB_REGS
#define MAX_CARDS 8

/* Which /dev/picoevbN numbers are in use. */
static DEFINE_IDA(pevb_slots);

/* The Rust panic handler ends here: a panic is a bug, and a bug is the kernel's BUG() (an oops). */
void __noreturn pevb_rust_panic(const char *file, size_t file_len, u32 line)
{
	pr_emerg("picoevb: Rust logic panicked at %.*s:%u\n", (int)file_len, file, line);
	BUG();
}

/*
 * One interrupt: which engines finished, their statuses (read-to-clear) and their requests turned off are
 * the shared logic's (kmod/logic/src/interrupt.rs); this wakes their waiters. The handler is freed at
 * removal before the BARs are unmapped.
 */
static irqreturn_t pevb_irq(int irq, void *data)
{
	struct pevb_card *card = data;
	u32 st[2], raised = pevb_irq_service(card, st);
	int i;

	for (i = 0; i < 2; i++)
		if (raised & BIT(i))
			pevb_engine_signal(&card->eng[i], st[i]);
	return raised ? IRQ_HANDLED : IRQ_NONE;
}

/* The XDMA identifiers (kmod/logic/src/probe.rs: a card that is not the design we know must not be driven), the ID block. */
static int identify(struct pevb_card *card)
{
	const char *name;
	size_t len;
	u32 id;
	int ret = pevb_probe_identify(card, &name, &len, &id);

	if (ret == -ENODEV)
		dev_err(&card->pdev->dev, "XDMA %.*s block identifier %#010x is not an XDMA's\n", (int)len, name, id);
	if (ret)
		return ret;
	ret = pevb_user_identity(card, &card->facts.design_version, &card->facts.build_hash,
				 &card->facts.stream);
	if (ret < 0)
		return ret;
	card->facts.id_block = ret;
	return 0;
}

void pevb_card_release_tables(struct pevb_card *card)
{
	pevb_engine_release_table(card, &card->eng[0]);
	pevb_engine_release_table(card, &card->eng[1]);
}

static int pevb_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pevb_card *card;
	int ret, slot;

	if (!pevb_layout_ok()) {
		dev_err(&pdev->dev, "C and Rust disagree on the logic's struct layouts (a build error)\n");
		return -EINVAL;
	}
	/* 10de:0001 is also NVIDIA's HTG-K800 design (2 GiB DDR4), which this driver does not support. */
	if (!pevb_ids_ok(pdev->vendor, pdev->device, pdev->subsystem_vendor, pdev->subsystem_device))
		return -ENODEV;
	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	/* Segments up to a descriptor's length keep chains short; never more than one mapping can take. */
	if (!pdev->dev.dma_parms)
		pdev->dev.dma_parms = &pdev->dma_parms;
	dma_set_max_seg_size(&pdev->dev, min_t(size_t, REGS.desc_len_max & ~0xfffu,
					       dma_max_mapping_size(&pdev->dev)));
	/* Every register the driver reads lies below these sizes (6.18 checks the same in iomap_region_sized). */
	if (pci_resource_len(pdev, REGS.bar_user) < REGS.bar_user_size ||
	    pci_resource_len(pdev, REGS.bar_dma) < REGS.bar_dma_size) {
		dev_err(&pdev->dev, "BAR%u or BAR%u is shorter than the PicoEVB design's (%u, %u bytes)\n",
			REGS.bar_user, REGS.bar_dma, REGS.bar_user_size, REGS.bar_dma_size);
		return -ENODEV;
	}
	ret = pcim_iomap_regions(pdev, BIT(REGS.bar_user) | BIT(REGS.bar_dma), "picoevb");
	if (ret)
		return ret;

	slot = ida_alloc_max(&pevb_slots, MAX_CARDS - 1, GFP_KERNEL);
	if (slot < 0)
		return slot == -ENOSPC ? -EBUSY : slot;
	card = kzalloc(sizeof(*card), GFP_KERNEL);
	if (!card) {
		ret = -ENOMEM;
		goto err_slot;
	}
	kref_init(&card->ref);
	card->pdev = pdev;
	card->index = slot;
	card->bar_user = pcim_iomap_table(pdev)[REGS.bar_user];
	card->bar_dma = pcim_iomap_table(pdev)[REGS.bar_dma];
	spin_lock_init(&card->gate);
	init_waitqueue_head(&card->drained);
	mutex_init(&card->qlock);
	INIT_LIST_HEAD(&card->quarantine);
	INIT_LIST_HEAD(&card->cquarantine);
	mutex_init(&card->cachelock);
	INIT_LIST_HEAD(&card->caches);
	mutex_init(&card->pinlock);
	pevb_ram_setup(card);
	spin_lock_init(&card->slock);
	INIT_LIST_HEAD(&card->surfaces);
	/* Two init sites, two lock classes: H2C2H holds both engines, H2C first. */
	mutex_init(&card->eng[0].lock);
	mutex_init(&card->eng[1].lock);
	card->facts.card_index = slot;
	card->facts.ram_size = REGS.ram_size;
	snprintf(card->name, sizeof(card->name), "picoevb%d", slot);

	ret = pevb_engine_init(card, &card->eng[0], 0) ?: pevb_engine_init(card, &card->eng[1], 1);
	if (ret)
		goto err_tables;
	ret = identify(card) ?: pevb_probe_quiesce(card);
	if (ret)
		goto err_tables;
	pci_set_master(pdev);

	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSI | PCI_IRQ_LEGACY);
	if (ret < 0)
		goto err_master;
	card->facts.msi = pdev->msi_enabled;
	ret = request_irq(pci_irq_vector(pdev, 0), pevb_irq, IRQF_SHARED, "picoevb", card);
	if (ret)
		goto err_vectors;

	ret = pevb_node_add(&pdev->dev, slot, &pevb_fops, card, &card->node);
	if (ret)
		goto err_irq;
	pci_set_drvdata(pdev, card);
	pevb_card_debugfs_add(card);
	if (card->facts.id_block)
		dev_info(&pdev->dev, "/dev/%s: gdr design %u.%u.%u (build %08x), %s interrupts, %llu KiB FPGA RAM (5.10 build)\n",
			 card->name, card->facts.design_version >> 24, (card->facts.design_version >> 16) & 0xff,
			 card->facts.design_version & 0xffff, card->facts.build_hash,
			 card->facts.msi ? "MSI" : "INTx", card->facts.ram_size / 1024);
	else
		dev_info(&pdev->dev, "/dev/%s: reference design (no gdr ID block), %s interrupts (5.10 build)\n",
			 card->name, card->facts.msi ? "MSI" : "INTx");
	return 0;

err_irq:
	free_irq(pci_irq_vector(pdev, 0), card);
err_vectors:
	pci_free_irq_vectors(pdev);
err_master:
	pci_clear_master(pdev);
err_tables:
	pevb_card_release_tables(card);
	pevb_card_put(card);
err_slot:
	ida_free(&pevb_slots, slot);
	return ret;
}

static bool drained(struct pevb_card *card)
{
	bool idle;

	spin_lock(&card->gate);
	idle = card->active == 0;
	spin_unlock(&card->gate);
	return idle;
}

/* ---- removal's steps, in the order kmod/logic/src/removal.rs runs them (pevb_card_remove) ---- */

void pevb_card_close(struct pevb_card *card)
{
	spin_lock(&card->gate);
	card->gone = true;
	spin_unlock(&card->gate);
}

void pevb_card_wake(struct pevb_card *card)
{
	complete(&card->eng[0].done);
	complete(&card->eng[1].done);
}

/* Bounded: every request's engine wait has a timeout, and the gate refuses new ones. */
void pevb_card_drain(struct pevb_card *card)
{
	wait_event(card->drained, drained(card));
}

void pevb_card_release_quarantine(struct pevb_card *card)
{
	mutex_lock(&card->qlock);
	pevb_pin_release_all(&card->quarantine);
	pevb_cuse_release_all(&card->cquarantine);
	mutex_unlock(&card->qlock);
}

/*
 * Hot removal or unbind, while the BARs are still mapped (card.rs's remove): new requests fail with ENODEV,
 * the engines stop, waiting requests wake, and once none is left everything mapped for DMA is released.
 * Open files stay valid and fail with ENODEV; the last one frees the card.
 */
static void pevb_remove(struct pci_dev *pdev)
{
	struct pevb_card *card = pci_get_drvdata(pdev);

	pevb_card_remove(card);
	debugfs_remove_recursive(card->debugfs);
	pevb_node_del(card->node);
	free_irq(pci_irq_vector(pdev, 0), card);
	pci_free_irq_vectors(pdev);
	ida_free(&pevb_slots, card->index);
	dev_info(&pdev->dev, "removed; open files now fail with ENODEV\n");
	pevb_card_put(card);
}

static const struct pci_device_id pevb_ids[] = {
	/* crates/picoevb-regs/src/pci.rs; probe checks all four IDs through the Rust logic. */
	{ PCI_DEVICE(0x10de, 0x0001) },
	{ }
};
MODULE_DEVICE_TABLE(pci, pevb_ids);

static struct pci_driver pevb_driver = {
	.name = "picoevb",
	.id_table = pevb_ids,
	.probe = pevb_probe,
	.remove = pevb_remove,
};

/* The shim's work queue for deferred frees of GPU pins: drained at exit, after the last pin is gone. */
static int __init pevb_init(void)
{
	int ret = pevb_p2p_init();

	if (ret)
		return ret;
	ret = pevb_nodes_init();
	if (ret)
		goto err_p2p;
	ret = pci_register_driver(&pevb_driver);
	if (ret)
		goto err_nodes;
	return 0;

err_nodes:
	pevb_nodes_exit();
err_p2p:
	pevb_p2p_exit();
	return ret;
}

static void __exit pevb_exit(void)
{
	pci_unregister_driver(&pevb_driver);
	/* Every slot is free again; 4.x's IDA also keeps preallocated layers until this (ida_pre_get). */
	ida_destroy(&pevb_slots);
	pevb_nodes_exit();
	pevb_p2p_exit();
}

module_init(pevb_init);
module_exit(pevb_exit);

MODULE_AUTHOR("gdr developers");
MODULE_DESCRIPTION("PicoEVB FPGA card: XDMA scatter-gather DMA between user memory and FPGA RAM (Linux 5.10 build)");
GDR_COMPAT_PIN_COUNTER();
MODULE_LICENSE("GPL");
