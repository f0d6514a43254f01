/* SPDX-License-Identifier: GPL-2.0 */
/* pin.c: user memory pinned and DMA-mapped (both builds); and p2p.c's page-piece syncs, which pin.c uses. */
#ifndef PEVB_PIN_H
#define PEVB_PIN_H

#include <linux/dma-direction.h>
#include <linux/types.h>

struct device;
struct pevb_pin;

#ifndef PEVB_LOGIC_H
/* The logic's segments::Segment (repr(C)); the 5.10 build has it from logic.h. */
struct pevb_seg {
	u64 addr;
	u64 len;
};
size_t pevb_segments_coalesce(struct pevb_seg *segs, size_t n);
#endif

int pevb_pin_user(struct device *dev, u64 uaddr, u64 len, bool to_device, struct pevb_pin **out);
void pevb_unpin_user(struct pevb_pin *p);
void pevb_pin_quarantined(struct pevb_pin *p);
int pevb_pin_long(struct device *dev, u64 uaddr, u64 len, struct pevb_pin **out);
void pevb_pin_unmap(struct pevb_pin *p);
void pevb_pin_unpin(struct pevb_pin *p, bool dirty);
void pevb_pin_drop(struct pevb_pin *p, bool dirty);
void pevb_pin_sync_window(struct pevb_pin *p, u64 offset, u64 len, bool to_device, bool for_device);
const struct pevb_seg *pevb_pin_segments(struct pevb_pin *p, size_t *n);
unsigned long pevb_pin_npages(struct pevb_pin *p);
u64 pevb_pin_pfn(struct pevb_pin *p, unsigned long i);
int pevb_user_pfns(u64 uaddr, u64 len, u64 *out, unsigned long n);

void pevb_sync_pieces(struct device *dev, dma_addr_t addr, u64 len, enum dma_data_direction dir,
		      bool for_device);
bool pevb_sync_needed(struct device *dev, dma_addr_t addr);

#endif
