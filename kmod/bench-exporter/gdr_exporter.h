/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * gdr_exporter.ko's user API: /dev/gdr_exporter, a bench-only dma-buf exporter whose buffers can be moved on
 * request, so that tests can prove an importer lets go of a buffer when told to (move_notify).
 *
 * Every struct is laid out without implicit padding; its flags and reserved fields must be zero (EINVAL).
 * Each command other than CREATE names a dma-buf fd that this module exported (EINVAL for any other).
 */
#ifndef _UAPI_GDR_EXPORTER_H
#define _UAPI_GDR_EXPORTER_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* Largest buffer GDR_EXP_CREATE makes. */
#define GDR_EXP_MAX_SIZE	(64ULL << 20)

/*
 * GDR_EXP_CREATE: a buffer of @size bytes (a non-zero multiple of the page size, at most GDR_EXP_MAX_SIZE),
 * zero-filled, backed by separately allocated pages. Returns its dma-buf in @fd (O_RDWR, close-on-exec).
 */
struct gdr_exp_create {
	__u64 size;	/* in */
	__s32 fd;	/* out */
	__u32 flags;	/* in: 0 */
};

/* GDR_EXP_MOVE: tell the importers the buffer moves (move_notify), then move its bytes to new pages. */
struct gdr_exp_fd {
	__s32 fd;
	__u32 flags;	/* GDR_EXP_MOVE: 0 or GDR_EXP_MOVE_HOLD */
};

/* GDR_EXP_MOVE flag: hold the reservation lock GDR_EXP_HOLD_MS before move_notify (removal meanwhile). */
#define GDR_EXP_MOVE_HOLD	1U
#define GDR_EXP_HOLD_MS		1000

/* GDR_EXP_WRITE, GDR_EXP_READ: copy @len bytes between user memory at @uaddr and the buffer at @offset. */
struct gdr_exp_io {
	__s32 fd;
	__u32 flags;	/* 0 */
	__u64 offset;
	__u64 len;
	__u64 uaddr;
};

/* GDR_EXP_STATE: the buffer's counters, as the exporter sees them. */
struct gdr_exp_state {
	__s32 fd;		/* in */
	__u32 mapped;		/* out: live mappings (map_dma_buf not yet unmapped) */
	__u32 attachments;	/* out */
	__u32 pins;		/* out */
	__u64 moves;		/* out: completed GDR_EXP_MOVEs */
	__u64 reserved[2];	/* in: 0; out: 0 */
};

#define GDR_EXP_IOC_MAGIC	'X'
#define GDR_EXP_CREATE		_IOWR(GDR_EXP_IOC_MAGIC, 1, struct gdr_exp_create)
#define GDR_EXP_MOVE		_IOW(GDR_EXP_IOC_MAGIC, 2, struct gdr_exp_fd)
#define GDR_EXP_WRITE		_IOW(GDR_EXP_IOC_MAGIC, 3, struct gdr_exp_io)
#define GDR_EXP_READ		_IOW(GDR_EXP_IOC_MAGIC, 4, struct gdr_exp_io)
#define GDR_EXP_STATE		_IOWR(GDR_EXP_IOC_MAGIC, 5, struct gdr_exp_state)

#endif /* _UAPI_GDR_EXPORTER_H */
