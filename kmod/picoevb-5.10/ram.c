// SPDX-License-Identifier: GPL-2.0
/*
 * The card RAM's ownership, as kmod/picoevb/ram.rs: the shared logic (ram_owner.rs) decides who may use the
 * RAM; the glue keeps its state under ram_lock, names the caller's process, and zeroes the RAM (one H2C
 * from a zeroed page, every page of the RAM from the same one) before a new owner's first use. ram_lock is
 * held from a PEVB_RAM_SCRUB_FIRST answer until pevb_ram_scrubbed, so nothing of the new owner (its other
 * threads included) runs on the RAM before it is clean.
 */
#include <linux/dma-mapping.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include "picoevb.h"

void pevb_ram_setup(struct pevb_card *card)
{
	mutex_init(&card->ram_lock);
	pevb_ram_init(&card->ram_owner);
}

/* The calling process (thread-group id). */
static u32 caller(void)
{
	return (u32)current->tgid;
}

/* One H2C of zeros over the whole RAM. The page lives only for the scrub; the caller holds the gate. */
static int scrub(struct pevb_card *card)
{
	size_t n = DIV_ROUND_UP(card->facts.ram_size, PAGE_SIZE), i;
	struct pevb_engine *e = &card->eng[0];
	struct pevb_seg *segs;
	dma_addr_t zeros_dma;
	void *zeros;
	int ret;

	segs = kcalloc(n, sizeof(*segs), GFP_KERNEL);
	if (!segs)
		return -ENOMEM;
	zeros = dma_alloc_coherent(&card->pdev->dev, PAGE_SIZE, &zeros_dma, GFP_KERNEL);
	if (!zeros) {
		kfree(segs);
		return -ENOMEM;
	}
	memset(zeros, 0, PAGE_SIZE);
	for (i = 0; i < n; i++) {
		segs[i].addr = zeros_dma;
		segs[i].len = PAGE_SIZE;
	}
	mutex_lock(&e->lock);
	ret = pevb_transfer(card, e, segs, n, 0, 0, card->facts.ram_size, false, NULL);
	mutex_unlock(&e->lock);
	/* Freed also after a failure: an engine that could not be shown idle has bus mastering off (wedge). */
	dma_free_coherent(&card->pdev->dev, PAGE_SIZE, zeros, zeros_dma);
	kfree(segs);
	return ret;
}

static int granted(struct pevb_card *card, int grant)
{
	int ret;

	if (grant != PEVB_RAM_SCRUB_FIRST)
		return grant;
	ret = scrub(card);
	pevb_ram_scrubbed(&card->ram_owner, !ret);
	return ret;
}

/*
 * Admits a transfer of the file whose membership is @member to the RAM: -EBUSY while another holder owns
 * it. The caller holds the gate (pevb_card_begin) and ends with pevb_ram_unuse on success.
 */
int pevb_ram_use(struct pevb_card *card, u64 *member)
{
	int ret;

	mutex_lock(&card->ram_lock);
	ret = granted(card, pevb_ram_begin(&card->ram_owner, member, caller()));
	mutex_unlock(&card->ram_lock);
	return ret;
}

void pevb_ram_unuse(struct pevb_card *card)
{
	mutex_lock(&card->ram_lock);
	pevb_ram_end(&card->ram_owner);
	mutex_unlock(&card->ram_lock);
}

/*
 * IOC_RAM_OWNER: does @op (RAM_QUERY, RAM_CLAIM, RAM_RELEASE); *@state is what the caller sees after. The
 * dispatcher holds the card for a claim, whose scrub runs the H2C engine.
 */
int pevb_ram_control(struct pevb_card *card, u64 *member, u32 op, u32 *state)
{
	u32 pid = caller();
	int ret = 0;

	mutex_lock(&card->ram_lock);
	if (op == 1)
		ret = granted(card, pevb_ram_claim(&card->ram_owner, member, pid));
	else if (op == 2)
		ret = pevb_ram_release(&card->ram_owner, member, pid);
	*state = pevb_ram_state(&card->ram_owner, member, pid);
	mutex_unlock(&card->ram_lock);
	return ret;
}

/* The file closes (no request of it in flight): the RAM is free once its owner's last file is closed. */
void pevb_ram_closed(struct pevb_card *card, u64 *member)
{
	mutex_lock(&card->ram_lock);
	pevb_ram_close(&card->ram_owner, member);
	mutex_unlock(&card->ram_lock);
}
