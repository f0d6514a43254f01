// SPDX-License-Identifier: GPL-2.0
/* The request's user memory faulted in before any hold or lock of the card: one source for both builds. */
#include <linux/mm.h>
#include <linux/sched/signal.h>

int pevb_user_prefault(u64 uaddr, u64 len, bool write);

/*
 * Faults [uaddr, uaddr + len) of the caller's memory in (for writing if @write and the memory allows it,
 * else for reading), holding nothing of the driver's: the pins that follow under the card's pin lock or a
 * request's hold on the device (which unbind drains) then find the pages present. A range whose fault
 * never resolves (userfaultfd, a hung FUSE server) thus stalls this caller alone, in GUP's killable fault
 * wait, not every PIN_CUDA and cache miss of the card nor the card's removal. Takes no reference past the
 * call. Only a fatal signal is an error (-EINTR); whatever else fails here, the pin after it reports.
 * Not a guarantee: memory the process unmaps or discards again before the pin faults there once more.
 */
int pevb_user_prefault(u64 uaddr, u64 len, bool write)
{
	struct page *pages[16];
	unsigned long first, npages, done = 0;
	unsigned int gup = write ? FOLL_WRITE : 0;

	if (!len || uaddr + len < uaddr)
		return 0;
	first = uaddr >> PAGE_SHIFT;
	npages = ((uaddr + len - 1) >> PAGE_SHIFT) - first + 1;
	while (done < npages) {
		int want = min_t(unsigned long, npages - done, ARRAY_SIZE(pages));
		int got = get_user_pages_fast((first + done) << PAGE_SHIFT, want, gup, pages);
		int i;

		if (got <= 0 && gup) {
			gup = 0;	/* read-only memory the device only reads: present is enough */
			continue;
		}
		if (got <= 0)
			return fatal_signal_pending(current) ? -EINTR : 0;
		for (i = 0; i < got; i++)
			put_page(pages[i]);
		done += got;
	}
	return 0;
}
