// SPDX-License-Identifier: GPL-2.0
/*
 * gdr_nv_p2p.ko on Linux 5.10: what 6.18's gdr_nv_p2p_main.rs gets from the kernel crate (the module's
 * init, exit and license, a panic handler's way out), in C. The decisions stay in logic.rs.
 */
#include <linux/bug.h>
#include <linux/module.h>
#include <linux/printk.h>
#include "../nvidia-p2p/internal.h"

/* The Rust panic handler's way out (rust/gdr_nv_p2p_logic.rs): an oops of the calling task. */
void __noreturn gdr_p2p_rust_panic(const char *file, size_t file_len, u32 line);
void __noreturn gdr_p2p_rust_panic(const char *file, size_t file_len, u32 line)
{
	pr_emerg("gdr_nv_p2p: Rust logic panicked at %.*s:%u\n", (int)file_len, file, line);
	BUG();
}

static int __init gdr_nv_p2p_init(void)
{
	return gdr_p2p_c_init();
}

/*
 * No client holds a page table at unload: a client reaches the API through symbol_get() references or a
 * link-time dependency, either of which keeps this module loaded, and each registered mmu notifier holds a
 * module reference until its .free_notifier has run.
 */
static void __exit gdr_nv_p2p_exit(void)
{
	gdr_p2p_c_exit();
}

module_init(gdr_nv_p2p_init);
module_exit(gdr_nv_p2p_exit);
MODULE_AUTHOR("gdr");
MODULE_DESCRIPTION("gdr: nvidia_p2p API provider (pin_user_pages + DMA API) for kernels without NVIDIA's module");
GDR_COMPAT_PIN_COUNTER();
MODULE_LICENSE("GPL");
