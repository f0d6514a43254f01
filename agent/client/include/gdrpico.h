/* gdrpico.h: C interface of gdr-client (agent/client). Link with libgdr_client.a (-lgdr_client -lpthread -ldl
 * -lm). Every name is prefixed gdrpico_/GDRPICO_, so a program may also link NVIDIA's gdrcopy (gdr_open, ...).
 *
 * Get a card's fd from the gdr agent (it checks you against /etc/gdr/agent.toml [access]), then pin CUDA
 * memory and run DMA through it. Every function returns 0 or a negative GDRPICO_E_* code; after GDRPICO_E_OS,
 * errno holds the system error: ENODEV means the card was reprogrammed or removed, so close the fd and
 * gdrpico_open again. A negative fd is refused with GDRPICO_E_OS, errno EBADF. */
#ifndef GDRPICO_H
#define GDRPICO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDRPICO_E_NO_AGENT (-1)  /* nobody owns org.gdr.Agent1: the agent is not running */
#define GDRPICO_E_BUS (-2)       /* the system bus could not be reached */
#define GDRPICO_E_ACCESS (-3)    /* the agent refused this caller */
#define GDRPICO_E_NO_CARD (-4)   /* no such card */
#define GDRPICO_E_NOT_READY (-5) /* the card is programming, failed or removed */
#define GDRPICO_E_AGENT (-6)     /* any other agent error */
#define GDRPICO_E_OS (-7)        /* system error: see errno */
#define GDRPICO_E_INVALID (-8)   /* invalid argument */
#define GDRPICO_E_TIMEOUT (-9)   /* the agent did not answer in time (25 s): it is wedged */

/* gdrpico_h2c2h flags (the driver's H2C2H flags). */
#define GDRPICO_H2C2H_SRC_CUDA 1 /* src is a handle from gdrpico_pin_cuda */
#define GDRPICO_H2C2H_DST_CUDA 2 /* dst is a handle from gdrpico_pin_cuda */

struct gdrpico_card_info {
    uint32_t abi_version;    /* driver ABI, major << 16 | minor */
    uint32_t card_index;     /* N of /dev/picoevbN */
    uint64_t caps;           /* PICOEVB capability bits */
    uint64_t fpga_ram_size;  /* bytes */
    uint32_t design_version; /* ID block: major << 24 | minor << 16 | patch; 0 = none */
    uint32_t build_hash;     /* ID block: first 32 bits of the design's git commit */
};

/* Asks the agent for card `card`'s fd (close-on-exec); the caller closes it. Gives up after 25 s. */
int gdrpico_open(uint32_t card, int *fd_out);
int gdrpico_card_info(int fd, struct gdrpico_card_info *info);
/* Pins a cudaHostAlloc (flags 0) or cuMemAlloc allocation for DMA. Unpin before freeing it. */
int gdrpico_pin_cuda(int fd, uint64_t va, uint64_t size, uint32_t *handle);
int gdrpico_unpin_cuda(int fd, uint32_t handle);
/* src -> FPGA RAM -> dst; src/dst are user pointers or, with the flags above, pin handles. A user pointer must
 * be valid for len bytes: the card reads src and overwrites dst by DMA. */
int gdrpico_h2c2h(int fd, uint64_t src, uint64_t dst, uint64_t len, uint64_t flags, uint64_t *dma_ns);
const char *gdrpico_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif /* GDRPICO_H */
