// SPDX-License-Identifier: GPL-2.0
/*
 * A card's gate (requests in flight, gone, wedged) and lifetime: the rules of kmod/picoevb/card.rs. A request
 * enters with pevb_card_begin() and leaves with pevb_card_end(); removal marks the card gone under the same
 * lock and waits for active to drop to 0 (a hand-made wait that lockdep cannot see: it is bounded because
 * every request's engine wait has a timeout and removal wakes them first).
 */
#include <linux/debugfs.h>
#include <linux/list.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include "picoevb.h"

int pevb_card_begin(struct pevb_card *card)
{
	int ret = 0;

	spin_lock(&card->gate);
	if (card->gone)
		ret = -ENODEV;
	else if (card->wedged)
		ret = -EIO;
	else
		card->active++;
	spin_unlock(&card->gate);
	return ret;
}

void pevb_card_end(struct pevb_card *card)
{
	spin_lock(&card->gate);
	if (!--card->active && card->gone)
		wake_up_all(&card->drained);
	spin_unlock(&card->gate);
}

/* Written by probe before the card is published, never after. */
const struct pevb_facts *pevb_card_facts(struct pevb_card *card)
{
	return &card->facts;
}

bool pevb_card_gone(struct pevb_card *card)
{
	bool gone;

	spin_lock(&card->gate);
	gone = card->gone;
	spin_unlock(&card->gate);
	return gone;
}

bool pevb_card_wedged(struct pevb_card *card)
{
	bool wedged;

	spin_lock(&card->gate);
	wedged = card->wedged;
	spin_unlock(&card->gate);
	return wedged;
}

/*
 * An engine could not be shown idle: it may still fetch descriptors and move data. No chain starts again,
 * bus mastering goes off (a config write is non-posted), and the request keeps its pages pinned until unbind.
 */
void pevb_card_wedge(struct pevb_card *card)
{
	spin_lock(&card->gate);
	card->wedged = true;
	spin_unlock(&card->gate);
	pci_clear_master(card->pdev);
	dev_err(&card->pdev->dev, "card wedged until unbind: bus mastering off, the DMA's pages stay pinned\n");
}

/* The user BAR's registers for rust/user_glue.rs, which bounds @off inside the mapped BAR. */
u32 pevb_plat_user_rd(struct pevb_card *card, u32 off)
{
	return ioread32(card->bar_user + off);
}

void pevb_plat_user_wr(struct pevb_card *card, u32 off, u32 v)
{
	iowrite32(v, card->bar_user + off);
}

void pevb_card_quarantine(struct pevb_card *card, struct pevb_pin *p)
{
	mutex_lock(&card->qlock);
	pevb_pin_park(&card->quarantine, p);
	mutex_unlock(&card->qlock);
}

void pevb_card_quarantine_cached(struct pevb_card *card, struct pevb_cuse *u)
{
	mutex_lock(&card->qlock);
	pevb_cuse_park(&card->cquarantine, u);
	mutex_unlock(&card->qlock);
}

static void pevb_card_free(struct kref *ref)
{
	kfree(container_of(ref, struct pevb_card, ref));
}

void pevb_card_put(struct pevb_card *card)
{
	kref_put(&card->ref, pevb_card_free);
}

/* The debugfs state file, as 6.18's Card::write_state: what the card holds for DMA, why removal may wait. */
static int pevb_state_show(struct seq_file *m, void *unused)
{
	struct pevb_card *card = m->private;
	struct list_head *pos;
	size_t quarantined = 0;

	seq_printf(m, "gone %d\nwedged %d\n", pevb_card_gone(card), pevb_card_wedged(card));
	pevb_card_describe_surfaces(card, m);
	seq_printf(m, "callbacks_awaited %d\n", atomic_read(&card->callbacks_awaited));
	pevb_card_describe_caches(card, m);
	mutex_lock(&card->qlock);
	list_for_each(pos, &card->quarantine)
		quarantined++;
	list_for_each(pos, &card->cquarantine)
		quarantined++;
	mutex_unlock(&card->qlock);
	seq_printf(m, "quarantined_pins %zu\n", quarantined);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pevb_state);

/* /sys/kernel/debug/picoevbN/state; removed at unbind, after everything it reports is released. */
void pevb_card_debugfs_add(struct pevb_card *card)
{
	card->debugfs = debugfs_create_dir(card->name, NULL);
	debugfs_create_file("state", 0444, card->debugfs, card, &pevb_state_fops);
}
