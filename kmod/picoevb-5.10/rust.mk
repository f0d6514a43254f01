# SPDX-License-Identifier: GPL-2.0
# Building core-only Rust into a Linux 5.10 module (no Rust support in that kernel), shared by picoevb.ko
# (kmod/picoevb-5.10/Kbuild) and the 5.10 gdr_nv_p2p.ko (kmod/nvidia-p2p-5.10/Kbuild). It is built the way
# Rust-for-Linux builds it: `core` from rust-src by the same rustc (RUSTC, RUST_LIB_SRC), the kernel's target
# without FP/SIMD (soft-float, no red zone, kernel code model on x86_64), panic = abort, and linked with
# `ld -r --gc-sections`, keeping only what the crate's exported symbols reach.
#
# The including Kbuild sets, before `include`:
#   rs_root   the crate root (a .rs file), rs_crate its crate name, rs_roots an awk regex of the symbols the
#             C glue calls (the link's roots), rs_obj the object to produce (a member of the module).
# It gets $(obj)/$(rs_obj), and the dep-info $(obj)/rust/logic.d (every .rs file the crate compiled).

RUSTC ?= rustc
RUST_LIB_SRC ?= $(firstword $(wildcard /usr/src/rustc-*/library))
rs_here := $(dir $(lastword $(MAKEFILE_LIST)))

rs_target-x86 := --target=x86_64-unknown-none -Ccode-model=kernel -Cno-redzone=y \
	-Ctarget-cpu=x86-64 -Ctarget-feature=-sse,-sse2,-sse3,-ssse3,-sse4.1,-sse4.2,-avx,-avx2
# 4.x arm64 modules are built -mcmodel=large where erratum 843419 is worked around (the loader then takes no
# ADRP relocation): the Rust objects follow.
rs_target-arm64 := --target=aarch64-unknown-none-softfloat $(if $(CONFIG_ARM64_MODULE_CMODEL_LARGE),-Ccode-model=large)
rs_target := $(rs_target-$(SRCARCH))
ifeq ($(rs_target),)
$(error $(rs_crate): no Rust target for ARCH=$(SRCARCH) (x86 and arm64 are supported))
endif

# Generic KASAN, when the kernel has it, for every Rust object (`core` too), with 6.18's RUSTFLAGS_KASAN
# (scripts/Makefile.kasan) and the C glue's shadow offset; less asan-instrument-allocas, a GCC name that
# LLVM rejects (6.18's rustc-param drops it the same way). Not asan-kernel-mem-intrinsic-prefix: 5.10 has no
# __asan_mem*, but its memcpy/memset/memmove (mm/kasan/common.c) check the ranges, and kernel ASan calls
# those plain names. Globals are registered by a module constructor (.init_array), which 5.10 runs.
# CONFIG_KASAN_STACK is 0/1 in 5.10 (an int) and y in later kernels. Before 4.20 CONFIG_KASAN is the generic
# one (there is no KASAN_GENERIC); there the Rust objects' stacks are not instrumented: LLVM's stack
# instrumentation calls __asan_set_shadow_*, which 4.15 added.
rs_kasan_generic := $(or $(CONFIG_KASAN_GENERIC),$(if $(CONFIG_KASAN_SW_TAGS)$(CONFIG_KASAN_HW_TAGS),,$(CONFIG_KASAN)))
rs_kasan_stack := $(if $(CONFIG_KASAN_GENERIC),$(filter-out 0,$(CONFIG_KASAN_STACK)))
ifneq ($(rs_kasan_generic),)
rs_kasan_offset := $(or $(patsubst -fasan-shadow-offset=%,%,$(filter -fasan-shadow-offset=%,$(CFLAGS_KASAN))),$(CONFIG_KASAN_SHADOW_OFFSET))
rs_kasan := -Zsanitizer=kernel-address -Zsanitizer-recover=kernel-address \
	-Cllvm-args=-asan-mapping-offset=$(rs_kasan_offset) \
	-Cllvm-args=-asan-instrumentation-with-call-threshold=$(if $(CONFIG_KASAN_INLINE),10000,0) \
	-Cllvm-args=-asan-stack=$(if $(rs_kasan_stack),1,0) -Cllvm-args=-asan-globals=1
else ifdef CONFIG_KASAN
$(warning $(rs_crate): the Rust objects get no KASAN instrumentation (only generic KASAN is supported))
endif

# The compiler's version as Linux's scripts/rustc-version.sh gives it (1.87.0 -> 108700), and what follows
# from it as in Linux's rust/Makefile: `core` is edition 2024 from Rust 1.87 on (its sources use let chains),
# 2021 before. The logic crates are 2021, as Linux compiles kernel crates. rustc outside the range CI
# compiles with (bench/matrix, "rustc" rows) is refused: an untested compiler fails here, not at insmod.
rs_rustc_version_code := $(shell $(RUSTC) --version 2>/dev/null | \
	sed -n 's/^rustc \([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p' | awk '{ print $$1 * 100000 + $$2 * 100 + $$3 }')
rs_rustc_min := 108500
ifeq ($(rs_rustc_version_code),)
$(error $(rs_crate): cannot run '$(RUSTC) --version' (set RUSTC to the rustc that builds the Rust logic))
endif
ifeq ($(shell test $(rs_rustc_version_code) -ge $(rs_rustc_min) && echo ok),)
$(error $(rs_crate): $(RUSTC) is older than Rust 1.85, the oldest that builds gdr's Rust)
endif
rs_core_edition := $(if $(shell test $(rs_rustc_version_code) -ge 108700 && echo y),2024,2021)

# RUSTC_BOOTSTRAP: `core` and `compiler_builtins` use unstable features, as in the kernel's own rust/ build.
# -Zplt=y: calls to functions outside the object (memcmp from a slice comparison) go through R_X86_64_PLT32,
# which the module loader resolves, not a GOT load (R_X86_64_GOTPCREL: "Unknown rela relocation: 9").
rs_rustc = RUSTC_BOOTSTRAP=1 $(RUSTC) $(rs_target) -Cpanic=abort -Zplt=y \
	-Cembed-bitcode=n -Clto=n -Cforce-unwind-tables=n -Ccodegen-units=1 -Csymbol-mangling-version=v0 \
	-Crelocation-model=static -Copt-level=2 -Cdebug-assertions=n -Coverflow-checks=y \
	-Cforce-frame-pointers=y -Zfunction-sections=y --sysroot=/dev/null -L$(obj)/rust $(rs_kasan)

quiet_cmd_rs_core = RUSTC   $@
      cmd_rs_core = $(rs_rustc) --edition=$(rs_core_edition) --cfg no_fp_fmt_parse --crate-type rlib --crate-name core \
	--emit=obj=$@ --emit=metadata=$(obj)/rust/libcore.rmeta $(RUST_LIB_SRC)/core/src/lib.rs
# Rebuilt when the compiler changes: a `core` from another rustc would not link with the logic.
rs_rustc_version := $(shell $(RUSTC) --version 2>/dev/null)
$(obj)/rust/rustc-version: FORCE
	@mkdir -p $(dir $@); echo '$(rs_rustc_version)' | cmp -s - $@ || echo '$(rs_rustc_version)' >$@
$(obj)/rust/core.o: $(RUST_LIB_SRC)/core/src/lib.rs $(obj)/rust/rustc-version FORCE
	@test -n "$(RUST_LIB_SRC)" || { echo "$(rs_crate): set RUST_LIB_SRC to rust-src's library/ of $(RUSTC)" >&2; exit 1; }
	$(call if_changed,rs_core)

quiet_cmd_rs_builtins = RUSTC   $@
      cmd_rs_builtins = $(rs_rustc) --edition=2021 --crate-type rlib --crate-name compiler_builtins \
	--emit=obj=$@ --emit=metadata=$(obj)/rust/libcompiler_builtins.rmeta $<
$(obj)/rust/compiler_builtins.o: $(rs_here)rust/compiler_builtins.rs $(obj)/rust/core.o FORCE
	$(call if_changed,rs_builtins)

# The dep-info lists every source file the crate compiles (shared files included by #[path]): it makes
# rebuilds follow those files, and bench/same-logic.sh compares it with the 6.18 module's.
quiet_cmd_rs_logic = RUSTC   $@
      cmd_rs_logic = $(rs_rustc) --edition=2021 -Dwarnings --crate-type rlib --crate-name $(rs_crate) \
	--emit=obj=$@ --emit=dep-info=$(obj)/rust/logic.d $<
$(obj)/rust/logic.o: $(rs_root) $(obj)/rust/compiler_builtins.o FORCE
	$(call if_changed,rs_logic)
-include $(obj)/rust/logic.d

# One object: roots are the crate's exported symbols named by rs_roots; anything else of core that they do
# not reach is dropped, so a helper the logic really needs but the kernel lacks stays undefined for modpost.
quiet_cmd_rs_link = LD      $@
      cmd_rs_link = $(LD) -r --gc-sections \
	$$($(NM) -g --defined-only $(obj)/rust/logic.o | awk '$$3 ~ /$(rs_roots)/ { printf " -u %s", $$3 }') \
	-o $@ $(obj)/rust/core.o $(obj)/rust/compiler_builtins.o $(obj)/rust/logic.o
$(obj)/$(rs_obj): $(obj)/rust/core.o $(obj)/rust/compiler_builtins.o $(obj)/rust/logic.o FORCE
	$(call if_changed,rs_link)
# if_changed: a change of flags (this file) rebuilds, not only a change of sources.
targets += rust/core.o rust/compiler_builtins.o rust/logic.o $(rs_obj)

clean-files += rust/*.o rust/*.rmeta rust/logic.d rust/rustc-version rust/.*.cmd
