/* gdr.h: C interface of gdr-client (agent/client). Link with libgdr_client.a (-lgdr_client -lpthread -ldl -lm).
 *
 * Get a card's fd from the gdr agent (it checks you against /etc/gdr/agent.toml [access]), then pin CUDA
 * memory and run DMA through it. Every function returns 0 or a negative GDR_E_* code; after GDR_E_OS, errno
 * holds the system error: ENODEV means the card was reprogrammed or removed, so close the fd and gdr_open
 * again. */
#ifndef GDR_H
#define GDR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDR_E_NO_AGENT (-1)  /* nobody owns org.gdr.Agent1: the agent is not running */
#define GDR_E_BUS (-2)       /* the system bus could not be reached */
#define GDR_E_ACCESS (-3)    /* the agent refused this caller */
#define GDR_E_NO_CARD (-4)   /* no such card */
#define GDR_E_NOT_READY (-5) /* the card is programming, failed or removed */
#define GDR_E_AGENT (-6)     /* any other agent error */
#define GDR_E_OS (-7)        /* system error: see errno */
#define GDR_E_INVALID (-8)   /* invalid argument */

/* gdr_h2c2h flags (the driver's H2C2H flags). */
#define GDR_H2C2H_SRC_CUDA 1 /* src is a handle from gdr_pin_cuda */
#define GDR_H2C2H_DST_CUDA 2 /* dst is a handle from gdr_pin_cuda */

struct gdr_card_info {
    uint32_t abi_version;    /* driver ABI, major << 16 | minor */
    uint32_t card_index;     /* N of /dev/picoevbN */
    uint64_t caps;           /* PICOEVB capability bits */
    uint64_t fpga_ram_size;  /* bytes */
    uint32_t design_version; /* ID block: major << 24 | minor << 16 | patch; 0 = none */
    uint32_t build_hash;     /* ID block: first 32 bits of the design's git commit */
};

/* Asks the agent for card `card`'s fd; the caller closes it. */
int gdr_open(uint32_t card, int *fd_out);
int gdr_card_info(int fd, struct gdr_card_info *info);
/* Pins a cudaHostAlloc (flags 0) or cuMemAlloc allocation for DMA. Unpin before freeing it. */
int gdr_pin_cuda(int fd, uint64_t va, uint64_t size, uint32_t *handle);
int gdr_unpin_cuda(int fd, uint32_t handle);
/* src -> FPGA RAM -> dst; src/dst are user pointers or, with the flags above, pin handles. */
int gdr_h2c2h(int fd, uint64_t src, uint64_t dst, uint64_t len, uint64_t flags, uint64_t *dma_ns);
const char *gdr_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
