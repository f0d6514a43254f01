/* gdrpico.h: C interface of gdr-client (agent/client). Link with libgdr_client.so (-lgdr_client; soname
 * libgdr_client.so.MAJOR) or libgdr_client.a (-lgdr_client -lpthread -ldl -lm). Every name is prefixed
 * gdrpico_/GDRPICO_, so a program may also link NVIDIA's gdrcopy (gdr_open, ...).
 *
 * Get a card's fd from the gdr agent (it checks you against /etc/gdr/agent.toml [access]), then pin CUDA
 * memory and run DMA through it. Every function returns 0 or a negative GDRPICO_E_* code; after GDRPICO_E_OS,
 * errno holds the system error: ENODEV means the card was reprogrammed or removed, so close the fd and
 * gdrpico_open again. A negative fd is refused with GDRPICO_E_OS, errno EBADF. Check at start-up that
 * gdrpico_version() >> 16 == GDRPICO_VERSION_MAJOR. */

#ifndef GDRPICO_H
#define GDRPICO_H

/* Generated from agent/client/src/capi.rs by cbindgen (agent/client/cbindgen.toml). Do not edit. */

#include <stddef.h>
#include <stdint.h>

/*
 The C interface's version: the library answers `gdrpico_version()` with
 `GDRPICO_VERSION_MAJOR << 16 | GDRPICO_VERSION_MINOR`. A new major breaks programs built against an
 older header (and renames the shared library's soname, `libgdr_client.so.MAJOR`); a new minor only adds.
 */
#define GDRPICO_VERSION_MAJOR 1

/*
 See [`GDRPICO_VERSION_MAJOR`].
 */
#define GDRPICO_VERSION_MINOR 4

/*
 nobody owns org.gdr.Agent1: the agent is not running
 */
#define GDRPICO_E_NO_AGENT -1

/*
 the system bus could not be reached
 */
#define GDRPICO_E_BUS -2

/*
 the agent refused this caller
 */
#define GDRPICO_E_ACCESS -3

/*
 no such card
 */
#define GDRPICO_E_NO_CARD -4

/*
 the card is programming, failed or removed
 */
#define GDRPICO_E_NOT_READY -5

/*
 any other agent error
 */
#define GDRPICO_E_AGENT -6

/*
 system error: see errno
 */
#define GDRPICO_E_OS -7

/*
 invalid argument
 */
#define GDRPICO_E_INVALID -8

/*
 the agent did not answer in time (25 s): it is wedged
 */
#define GDRPICO_E_TIMEOUT -9

/*
 gdrpico_h2c2h flag: src is a handle from gdrpico_pin_cuda (the driver's H2C2H flag).
 */
#define GDRPICO_H2C2H_SRC_CUDA 1

/*
 gdrpico_h2c2h flag: dst is a handle from gdrpico_pin_cuda.
 */
#define GDRPICO_H2C2H_DST_CUDA 2

/*
 gdrpico_import_dmabuf placement bit: some bytes lie in system memory (the driver's DMABUF_SYSTEM).
 */
#define GDRPICO_DMABUF_SYSTEM 1

/*
 gdrpico_import_dmabuf placement bit: some bytes lie in another device's memory (DMABUF_PEER).
 */
#define GDRPICO_DMABUF_PEER 2

/*
 gdrpico_ring_config policy: the driver waits for the reader; nothing in the ring is lost (a source that
 cannot wait drops records itself and counts them).
 */
#define GDRPICO_RING_BACK_PRESSURE 0

/*
 gdrpico_ring_config policy: the driver never waits and overwrites the oldest slots; the reader counts
 each one it lost (gdrpico_ring_dropped).
 */
#define GDRPICO_RING_DROP_OLDEST 1

/*
 A running stream ring (opaque): from gdrpico_ring_start, ended and freed by gdrpico_ring_finish.
 */
struct gdrpico_ring;

/*
 A ring this process fills and the driver empties into the card's stream checker (opaque): from
 gdrpico_ring_writer_start, ended and freed by gdrpico_ring_writer_finish.
 */
struct gdrpico_ring_writer;

/*
 A ring the driver fills in a surface (opaque): from gdrpico_surface_ring_start, ended and freed by
 gdrpico_surface_ring_finish.
 */
struct gdrpico_surface_ring;

/*
 A card's identity and the driver's ABI (ABI_INFO).
 */
struct gdrpico_card_info {
  /*
   driver ABI, major << 16 | minor
   */
  uint32_t abi_version;
  /*
   N of /dev/picoevbN
   */
  uint32_t card_index;
  /*
   PICOEVB capability bits
   */
  uint64_t caps;
  /*
   bytes
   */
  uint64_t fpga_ram_size;
  /*
   ID block: major << 24 | minor << 16 | patch; 0 = none
   */
  uint32_t design_version;
  /*
   ID block: first 32 bits of the design's git commit
   */
  uint32_t build_hash;
};

/*
 A stream ring's shape (gdrpico_ring_start, the driver's ABI 1.6 and CAP_STREAM).
 */
struct gdrpico_ring_config {
  /*
   slots in the ring, at least 2
   */
  uint32_t slots;
  /*
   most slots per chain (one C2H); 0: half the ring
   */
  uint32_t chain_slots;
  /*
   bytes per slot, a multiple of 8 (whole records)
   */
  uint64_t slot_bytes;
  /*
   slots the driver fills before it stops by itself; 0: until gdrpico_ring_finish
   */
  uint64_t total;
  /*
   GDRPICO_RING_BACK_PRESSURE or GDRPICO_RING_DROP_OLDEST
   */
  uint32_t policy;
  /*
   zero
   */
  uint32_t reserved;
};

/*
 What a ring did (gdrpico_ring_finish).
 */
struct gdrpico_ring_summary {
  /*
   slots the driver filled
   */
  uint64_t produced;
  /*
   chains it ran
   */
  uint64_t chains;
  /*
   times it found the ring full and waited
   */
  uint64_t waits;
  /*
   slots the reader read whole
   */
  uint64_t read;
  /*
   slots the reader lost (lapped, or overwritten while read)
   */
  uint64_t dropped;
};

/*
 A ring's control block (`gdrpico_surface_ring_control`): the words the driver and the ring's reader
 share, each a naturally aligned 64-bit word, counted in slots since the start (slot n at index
 n % slots). The driver stores `writing` before a chain and `produced` (with release order) after it;
 the reader loads `produced` with acquire order, reads the slots below it, and with back-pressure stores
 `consumed` (release) once it is done with them; a reader that copies a slot and then finds `writing`
 more than a ring ahead of it knows the copy may be torn (drop-oldest).
 */
struct gdrpico_ring_control {
  /*
   driver: slots below it may be being written
   */
  uint64_t writing;
  /*
   driver: slots below it are whole
   */
  uint64_t produced;
  /*
   reader: slots it is done with
   */
  uint64_t consumed;
  /*
   nonzero asks the driver to stop at its next chain
   */
  uint64_t stop;
  /*
   driver: times it waited for the reader
   */
  uint64_t waits;
};

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 This library's C interface version, GDRPICO_VERSION_MAJOR << 16 | GDRPICO_VERSION_MINOR, to compare with
 the header's at run time: a different major means the program was built against another interface.
 */
uint32_t gdrpico_version(void);

/*
 Asks the agent for card `card`'s fd (close-on-exec) and stores it in `*fd_out`; the caller closes it.
 Gives up after 25 s.

 # Safety
 `fd_out` must be a valid pointer to an int.
 */
int gdrpico_open(uint32_t card,
                 int *fd_out);

/*
 Fills `*info` from ABI_INFO.

 # Safety
 `fd` must be an open card fd; `info` a valid pointer.
 */
int gdrpico_card_info(int fd, struct gdrpico_card_info *info);

/*
 Pins a cudaHostAlloc (flags 0) or cuMemAlloc allocation for DMA and stores its handle in `*handle`.
 Unpin before freeing it.

 # Safety
 `fd` must be an open card fd; `handle` a valid pointer.
 */
int gdrpico_pin_cuda(int fd, uint64_t va, uint64_t size, uint32_t *handle);

/*
 Pins host memory (a cuMemHostAlloc allocation: Thor, and Orin after CUDA 14) as a surface and stores its
 handle in `*handle`; it works wherever a gdrpico_pin_cuda handle does. Unpin before freeing it.

 # Safety
 `fd` must be an open card fd; `handle` a valid pointer.
 */
int gdrpico_pin_host(int fd,
                     uint64_t va,
                     uint64_t size,
                     uint32_t *handle);

/*
 Imports `size` bytes at `offset` of dma-buf `dmabuf_fd` as a surface (the driver's ABI 1.4, CAP_DMABUF); stores
 its handle in `*handle` and, unless `placement` is NULL, where its bytes lie (GDRPICO_DMABUF_* bits) in
 `*placement`. `offset` and `size` are whole host pages. The handle works wherever a gdrpico_pin_cuda
 handle does; `dmabuf_fd` may be closed after.

 # Safety
 `fd` must be an open card fd; `handle` a valid pointer; `placement` NULL or valid.
 */
int gdrpico_import_dmabuf(int fd,
                          int dmabuf_fd,
                          uint64_t offset,
                          uint64_t size,
                          uint32_t *handle,
                          uint32_t *placement);

/*
 Unpins a handle from `gdrpico_pin_cuda` or `gdrpico_pin_host`.

 # Safety
 `fd` must be an open card fd.
 */
int gdrpico_unpin_cuda(int fd, uint32_t handle);

/*
 src -> FPGA RAM -> dst; src/dst are user pointers or, with the GDRPICO_H2C2H_*_CUDA flags, pin handles.
 A user pointer must be valid for len bytes: the card reads src and overwrites dst by DMA. The DMA time
 goes to `*dma_ns` unless it is NULL.

 # Safety
 `fd` must be an open card fd; user pointers in `src`/`dst` must be valid for `len` bytes (readable and
 writable respectively) and not used by the caller during the call; `dma_ns` may be NULL.
 */
int gdrpico_h2c2h(int fd,
                  uint64_t src,
                  uint64_t dst,
                  uint64_t len,
                  uint64_t flags,
                  uint64_t *dma_ns);

/*
 Restarts the card's stream source: off, cleared (sequence, clock, counters, FIFO), then on with records
 of `record_bytes` (a multiple of 8 from 24 to 4096) every `period_ticks` 8 ns ticks (0: whenever the
 engine asks). The source is the card's, shared by every holder.

 # Safety
 `fd` must be an open card fd.
 */
int gdrpico_stream_start(int fd,
                         uint32_t record_bytes,
                         uint32_t period_ticks);

/*
 Turns the card's stream source off; unless `overruns` is NULL, stores the records it dropped since it
 was cleared (a full FIFO) in `*overruns`.

 # Safety
 `fd` must be an open card fd; `overruns` NULL or valid.
 */
int gdrpico_stream_stop(int fd,
                        uint32_t *overruns);

/*
 Starts the driver filling a ring of `*config`'s shape from the card's stream source (on a thread of
 the library's, through a duplicate of `fd`) and stores it in `*ring`. Read it with gdrpico_ring_next;
 end it with gdrpico_ring_finish, which also frees it. The ring's memory is the library's.

 # Safety
 `fd` must be an open card fd; `config` and `ring` valid pointers.
 */
int gdrpico_ring_start(int fd,
                       const struct gdrpico_ring_config *config,
                       struct gdrpico_ring **ring);

/*
 Copies the next whole slot into `out` (`len` must be the ring's slot_bytes), waiting up to `timeout_us`
 microseconds for one; unless `slot` is NULL, stores its number (slots since the start) in `*slot`.
 Returns 1 with a slot, 0 without (the timeout passed, or the ring ended and every slot was read:
 gdrpico_ring_finish says how), or a negative code: the driver's error (GDRPICO_E_OS: ENODEV the card
 went, EINVAL the ring's memory went, EINTR a signal) once every slot before it was read.

 # Safety
 `ring` from gdrpico_ring_start and not finished; `out` valid for writing `len` bytes; `slot` NULL or
 valid. One thread at a time per ring.
 */
int gdrpico_ring_next(struct gdrpico_ring *ring,
                      uint8_t *out,
                      size_t len,
                      uint32_t timeout_us,
                      uint64_t *slot);

/*
 Slots the reader lost so far.

 # Safety
 `ring` from gdrpico_ring_start and not finished.
 */
uint64_t gdrpico_ring_dropped(const struct gdrpico_ring *ring);

/*
 Stops the driver at its next chain boundary, waits for it, frees the ring and, unless `summary` is
 NULL, says what it did in `*summary`; the driver's error if it ended with one.

 # Safety
 `ring` from gdrpico_ring_start, finished only once; `summary` NULL or valid.
 */
int gdrpico_ring_finish(struct gdrpico_ring *ring, struct gdrpico_ring_summary *summary);

/*
 Starts the driver emptying a ring of `*config`'s shape (GDRPICO_RING_BACK_PRESSURE only) into the card's
 stream checker (on a thread of the library's, through a duplicate of `fd`) and stores it in `*writer`.
 Fill it with gdrpico_ring_writer_write; end it with gdrpico_ring_writer_finish, which also frees it.

 # Safety
 `fd` must be an open card fd; `config` and `writer` valid pointers.
 */
int gdrpico_ring_writer_start(int fd,
                              const struct gdrpico_ring_config *config,
                              struct gdrpico_ring_writer **writer);

/*
 Copies `slot` (`len` must be the ring's slot_bytes) into the ring's next slot, waiting up to
 `timeout_us` microseconds for room. Returns 1 written, 0 no room in time, or a negative code: the
 driver's error once its call returned (GDRPICO_E_OS: ENODEV the card went, EINTR a signal), or
 GDRPICO_E_INVALID once the ring has moved its total.

 # Safety
 `writer` from gdrpico_ring_writer_start and not finished; `slot` valid for reading `len` bytes. One
 thread at a time per writer.
 */
int gdrpico_ring_writer_write(struct gdrpico_ring_writer *writer,
                              const uint8_t *slot,
                              size_t len,
                              uint32_t timeout_us);

/*
 Waits up to `timeout_us` microseconds for the driver to move every slot written, stops it, frees the
 writer and, unless `summary` is NULL, says what it did in `*summary` (`read`: the slots written).
 GDRPICO_E_TIMEOUT if slots were left unmoved; the driver's error if it ended with one.

 # Safety
 `writer` from gdrpico_ring_writer_start, finished only once; `summary` NULL or valid.
 */
int gdrpico_ring_writer_finish(struct gdrpico_ring_writer *writer,
                               uint32_t timeout_us,
                               struct gdrpico_ring_summary *summary);

/*
 Starts the driver filling a ring of `*config`'s shape from the card's stream source in the surface
 `handle` of `fd` (gdrpico_pin_cuda, gdrpico_pin_host, gdrpico_import_dmabuf), from its offset 0, and
 stores it in `*ring`. Its reader is the caller's (a CUDA kernel), over the control block that
 gdrpico_surface_ring_control gives. Unpinning the surface or freeing its memory ends the ring. End it with
 gdrpico_surface_ring_finish, which also frees it.

 # Safety
 `fd` must be an open card fd; `config` and `ring` valid pointers.
 */
int gdrpico_surface_ring_start(int fd,
                               uint32_t handle,
                               const struct gdrpico_ring_config *config,
                               struct gdrpico_surface_ring **ring);

/*
 The ring's control block, at the start of a page of its own that lives until
 gdrpico_surface_ring_finish: for a GPU reader, map it (cudaHostRegister with cudaHostRegisterMapped, then
 cudaHostGetDevicePointer) and access its words as volatile.

 # Safety
 `ring` from gdrpico_surface_ring_start and not finished.
 */
struct gdrpico_ring_control *gdrpico_surface_ring_control(const struct gdrpico_surface_ring *ring);

/*
 Waits up to `timeout_us` microseconds until the driver has filled more than `seen` slots or its call
 returned; unless `produced` is NULL, stores the slots filled in `*produced`. Returns 1 if more than
 `seen`, 0 if not, or a negative code: the driver's error once its call returned.

 # Safety
 `ring` from gdrpico_surface_ring_start and not finished; `produced` NULL or valid. One thread at a
 time per ring.
 */
int gdrpico_surface_ring_wait(struct gdrpico_surface_ring *ring,
                              uint64_t seen,
                              uint32_t timeout_us,
                              uint64_t *produced);

/*
 Stops the driver at its next chain boundary, waits for it, frees the ring and, unless `summary` is
 NULL, says what it did in `*summary` (`read` and `dropped` are the reader's to count: 0); the
 driver's error if it ended with one.

 # Safety
 `ring` from gdrpico_surface_ring_start, finished only once; `summary` NULL or valid.
 */
int gdrpico_surface_ring_finish(struct gdrpico_surface_ring *ring,
                                struct gdrpico_ring_summary *summary);

/*
 A static description of a `GDRPICO_E_*` code.
 */
const char *gdrpico_strerror(int code);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* GDRPICO_H */

/* The layout src/capi.rs asserts too (C11 and later; C++ has its own static_assert). */
#ifndef __cplusplus
_Static_assert(sizeof(struct gdrpico_card_info) == 32, "struct gdrpico_card_info is 32 bytes");
_Static_assert(offsetof(struct gdrpico_card_info, caps) == 8, "caps at 8");
_Static_assert(offsetof(struct gdrpico_card_info, fpga_ram_size) == 16, "fpga_ram_size at 16");
_Static_assert(offsetof(struct gdrpico_card_info, design_version) == 24, "design_version at 24");
_Static_assert(offsetof(struct gdrpico_card_info, build_hash) == 28, "build_hash at 28");
_Static_assert(sizeof(struct gdrpico_ring_config) == 32, "struct gdrpico_ring_config is 32 bytes");
_Static_assert(offsetof(struct gdrpico_ring_config, slot_bytes) == 8, "slot_bytes at 8");
_Static_assert(offsetof(struct gdrpico_ring_config, total) == 16, "total at 16");
_Static_assert(offsetof(struct gdrpico_ring_config, policy) == 24, "policy at 24");
_Static_assert(sizeof(struct gdrpico_ring_summary) == 40, "struct gdrpico_ring_summary is 40 bytes");
_Static_assert(sizeof(struct gdrpico_ring_control) == 40, "struct gdrpico_ring_control is 40 bytes");
_Static_assert(offsetof(struct gdrpico_ring_control, produced) == 8, "produced at 8");
_Static_assert(offsetof(struct gdrpico_ring_control, consumed) == 16, "consumed at 16");
_Static_assert(offsetof(struct gdrpico_ring_control, stop) == 24, "stop at 24");
#endif
