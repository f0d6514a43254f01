/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdr's declaration of the NVIDIA "nvidia_p2p" kernel API, written for gdr (not copied from NVIDIA).
 *
 * Two variants share the function names but not the signatures, structures or semantics:
 *
 *  - Jetson / Tegra (default): the API of the L4T kernel (R32, R35) and of NVIDIA's out-of-tree
 *    "nvidia-oot" tree (R36+), normally <linux/nv-p2p.h>. It pins *system* memory (cudaHostAlloc)
 *    with 4 KiB pages and maps it with the DMA API for a peer struct device.
 *  - dGPU (define GDR_P2P_DGPU): the API of the NVIDIA GPU driver (nvidia.ko, open-gpu-kernel-modules
 *    kernel-open/nvidia/nv-p2p.h). It hands out 64 KiB GPU pages (BAR addresses) with one bus address per
 *    page for a peer struct pci_dev.
 *
 * Providers: gdr's own gdr_nv_p2p.ko (kmod/nvidia-p2p, for kernels without NVIDIA's module: test VMs,
 * mainline), or NVIDIA's module on real hardware. Both export the same symbol names, so only one of them
 * can be loaded at a time.
 *
 * Struct layout. The layouts below are those of the final R32 header and of the R36 nvidia-oot header:
 * both structures start with "u32 version". Some R35 (linux-tegra-5.10) header revisions have NO version
 * field, which shifts every later field by 8 bytes on 64-bit. This header is right for gdr_nv_p2p.ko and
 * for R36 nvidia-oot; a build against a real L4T kernel must use THAT kernel's <linux/nv-p2p.h> instead of
 * this file (kmod/picoevb/p2p.c: define GDR_P2P_SYSTEM_HEADER).
 */
#ifndef GDR_NV_P2P_H
#define GDR_NV_P2P_H

#include <linux/types.h>

/* Structure versions: major in bits 31..16, minor in bits 15..0. Same macros in both variants. */
#define NVIDIA_P2P_MAJOR_VERSION_MASK	0xffff0000
#define NVIDIA_P2P_MINOR_VERSION_MASK	0x0000ffff

#define NVIDIA_P2P_MAJOR_VERSION(v)	(((v) & NVIDIA_P2P_MAJOR_VERSION_MASK) >> 16)
#define NVIDIA_P2P_MINOR_VERSION(v)	((v) & NVIDIA_P2P_MINOR_VERSION_MASK)

/* The structure @p has the major version of @v and at least its minor version. */
#define NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v) \
	(NVIDIA_P2P_MAJOR_VERSION((p)->version) == NVIDIA_P2P_MAJOR_VERSION(v))
#define NVIDIA_P2P_VERSION_COMPATIBLE(p, v) \
	(NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v) && \
	 (NVIDIA_P2P_MINOR_VERSION((p)->version) >= NVIDIA_P2P_MINOR_VERSION(v)))

/* Page size of a page table: an enum value, not a byte count. */
enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB,
	NVIDIA_P2P_PAGE_SIZE_128KB,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

#ifndef GDR_P2P_DGPU
/* ============================== Jetson / Tegra variant ============================== */

#include <linux/dma-direction.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>

struct device;
struct page;
struct sg_table;

/* Bits of nvidia_p2p_page_table::mapped. */
#define NVIDIA_P2P_UNINITIALIZED	0x0
#define NVIDIA_P2P_PINNED		0x1U
#define NVIDIA_P2P_MAPPED		0x2U

#define NVIDIA_P2P_PAGE_TABLE_VERSION	0x00010000
#define NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_PAGE_TABLE_VERSION)

#define NVIDIA_P2P_DMA_MAPPING_VERSION	0x00010000
#define NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_DMA_MAPPING_VERSION)

/*
 * A pinned range of the caller's address space. Allocated by get_pages. Clients read version, page_size,
 * size, entries, pages and vaddr; everything from "mapped" on belongs to the provider.
 * Ownership: free_page_table releases the pages but NOT this structure; the client kfree()s it afterwards.
 */
typedef struct nvidia_p2p_page_table {
	u32 version;			/* NVIDIA_P2P_PAGE_TABLE_VERSION */
	u32 page_size;			/* enum nvidia_p2p_page_size_type: always NVIDIA_P2P_PAGE_SIZE_4KB */
	u64 size;			/* the size asked for, in bytes */
	u32 entries;			/* number of pinned pages: size >> PAGE_SHIFT */
	struct page **pages;		/* the pinned pages, from vaddr & PAGE_MASK on */
	u64 vaddr;			/* the address asked for */
	u32 mapped;			/* NVIDIA_P2P_PINNED | NVIDIA_P2P_MAPPED */
	struct mm_struct *mm;		/* the address space the pages were pinned in */
	struct mmu_notifier mn;		/* provider-private */
	struct mutex lock;		/* provider-private */
	void (*free_callback)(void *data);
	void *data;
} nvidia_p2p_page_table_t;

/* A page table mapped for DMA by one device. Freed by dma_unmap_pages / free_dma_mapping. */
typedef struct nvidia_p2p_dma_mapping {
	u32 version;			/* NVIDIA_P2P_DMA_MAPPING_VERSION */
	dma_addr_t *hw_address;		/* [entries] bus addresses (IOVAs) of the DMA segments */
	u32 *hw_len;			/* [entries] their lengths in bytes */
	u32 entries;			/* number of DMA segments (merged: usually fewer than pages) */
	struct sg_table *sgt;
	struct device *dev;		/* the peer device the addresses are valid for */
	struct nvidia_p2p_page_table *page_table;
	enum dma_data_direction direction;
} nvidia_p2p_dma_mapping_t;

/*
 * Pin @size >> PAGE_SHIFT pages of the CALLER's address space from @vaddr & PAGE_MASK on (so the caller
 * aligns @vaddr and rounds @size up itself) and watch them: @free_callback(@data) runs once when the
 * process exits or unmaps the page holding @vaddr, or from put_pages. Both must be non-NULL.
 * Must be called in the context of the process that owns @vaddr. 0 or -errno.
 */
int nvidia_p2p_get_pages(u64 vaddr, u64 size, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);

/* Stop watching; runs the free callback synchronously before returning. Not after the callback ran. */
int nvidia_p2p_put_pages(struct nvidia_p2p_page_table *page_table);

/* Unpin and free pages[] (not the structure). Meant for the free callback. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);

/* DMA-map the pinned pages for @dev. On success *map holds hw_address[] / hw_len[]. */
int nvidia_p2p_dma_map_pages(struct device *dev, struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **map, enum dma_data_direction direction);

/* Undo nvidia_p2p_dma_map_pages and free @map. */
int nvidia_p2p_dma_unmap_pages(struct nvidia_p2p_dma_mapping *map);

/* Same as nvidia_p2p_dma_unmap_pages; the name meant for the free callback. */
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#else /* GDR_P2P_DGPU */
/* ================================== dGPU variant ==================================== */

struct pci_dev;

#define NVIDIA_P2P_GPU_UUID_LEN		16

/* One 64 KiB GPU page. Only physical_address is meaningful; the registers are legacy (Fermi). */
typedef struct nvidia_p2p_page {
	u64 physical_address;
	union nvidia_p2p_request_registers {
		struct {
			u32 wreqmb_h;
			u32 rreqmb_h;
			u32 rreqmb_0;
			u32 reserved[3];
		} fermi;
	} registers;
} nvidia_p2p_page_t;

#define NVIDIA_P2P_PAGE_TABLE_VERSION	0x00010002
#define NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_PAGE_TABLE_VERSION)

/* GPU pages of a range; owned by the provider (freed by put_pages, or after the free callback returns). */
typedef struct nvidia_p2p_page_table {
	u32 version;			/* NVIDIA_P2P_PAGE_TABLE_VERSION */
	u32 page_size;			/* enum nvidia_p2p_page_size_type: NVIDIA_P2P_PAGE_SIZE_64KB */
	struct nvidia_p2p_page **pages;	/* [entries] */
	u32 entries;
	u8 *gpu_uuid;			/* NVIDIA_P2P_GPU_UUID_LEN bytes */
} nvidia_p2p_page_table_t;

#define NVIDIA_P2P_DMA_MAPPING_VERSION	0x00020003
#define NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_DMA_MAPPING_VERSION)

/* A page table mapped for one peer: one bus address per GPU page, each valid for the whole page. */
typedef struct nvidia_p2p_dma_mapping {
	u32 version;			/* NVIDIA_P2P_DMA_MAPPING_VERSION */
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;		/* [entries] */
	void *private;			/* provider-private */
	struct pci_dev *pci_dev;	/* the peer */
} nvidia_p2p_dma_mapping_t;

/* Capability flag: non-zero when get_pages_persistent / put_pages_persistent work. */
extern int nvidia_p2p_cap_persistent_pages;
#define NVIDIA_P2P_CAP_PERSISTENT_PAGES

#define NVIDIA_P2P_FLAGS_DEFAULT		0
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING	1

/*
 * Make the GPU pages behind [virtual_address, +length) available to third-party devices. Address aligned to
 * 64 KiB, length a multiple of 64 KiB. p2p_token and va_space are deprecated: pass 0, 0. @free_callback
 * (non-NULL) runs when the memory is freed implicitly (not from put_pages). May sleep. 0 or -errno.
 */
int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address, u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);

/* Release pages from get_pages; the free callback is NOT run. Frees the page table and its mappings. */
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);

/* Persistent pages (no free callback). */
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table, u32 flags);
int nvidia_p2p_put_pages_persistent(u64 virtual_address, struct nvidia_p2p_page_table *page_table,
				    u32 flags);

/* No-ops kept for callers: the provider frees the table and its mappings itself. Call from the callback. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

/* Map the GPU pages for @peer (no direction: always bidirectional). */
int nvidia_p2p_dma_map_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);

/* Undo nvidia_p2p_dma_map_pages. 0 also when the mapping is already gone (freed with its page table). */
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);

#endif /* GDR_P2P_DGPU */

/*
 * gdr_nv_p2p.ko identifies itself with this exported constant (NVIDIA's modules have no such symbol):
 * GDR_NV_P2P_PROVIDER_VERSION, plus GDR_NV_P2P_PROVIDER_DGPU when built as the dGPU flavour. A client
 * can symbol_get() it to learn which provider and which flavour it is bound to.
 */
#define GDR_NV_P2P_PROVIDER_VERSION	0x00010000U
#define GDR_NV_P2P_PROVIDER_DGPU	0x00000001U
#define GDR_NV_P2P_PROVIDER_FLAVOUR_MASK 0x000000ffU
extern const u32 gdr_nv_p2p_provider_version;

#endif /* GDR_NV_P2P_H */
