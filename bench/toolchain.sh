#!/usr/bin/env bash
# Compile one Rust part of gdr with one rustc, the way its users' builds do, and print one line naming the
# rustc it used. The rows of bench/matrix that say `rustc` call it (bench/test.sh); by hand:
#
#   bench/toolchain.sh TOOLCHAIN PART [ARCH [KDIR]]
#
# TOOLCHAIN  a rustup toolchain (1.93.0, 1.94.1, stable, ...), installed with rust-src into
#            $GDR_CACHE/rustup (the user's own rustup home is left alone), or `bench`: the bench chroot's
#            Debian rustc, which builds the bench kernels and modules.
# PART       kmod-5.10   the Xavier module (kmod/picoevb-5.10: C glue + the Rust logic built freestanding by
#                        rust.mk, `core` included) against KDIR, a bench Linux 5.10 tree of ARCH;
#            kmod-6.18   the Orin module (kmod/picoevb, Rust-for-Linux) against a Linux 6.18 tree configured
#                        for ARCH with this rustc (bench/kernel/ARCH.config; `modules_prepare` and `rust/`, no
#                        vmlinux: a compile check, kept in $GDR_CACHE keyed by its inputs);
#            workspace   every crate of the Cargo workspace (cargo check --all-targets) on the host.
# Builds happen in copies under target/toolchains/, never in the repository's own module folders.
. "$(dirname "$0")/lib.sh"
need_root
usage="usage: toolchain.sh TOOLCHAIN PART [ARCH [KDIR]]"
TOOLCHAIN=${1:?$usage} PART=${2:?$usage} ARCH=${3:--} KDIR=${4:-}
case $PART:$ARCH in
  kmod-*:x86_64) KARCH=x86 CROSS= ;;
  kmod-*:arm64) KARCH=arm64 CROSS=aarch64-linux-gnu- ;;
  kmod-*:*) die "$PART needs ARCH x86_64 or arm64, not '$ARCH'" ;;
esac
ROOT=$("$REPO/bench/rootfs.sh")

# The compiler and its own library sources (a `core` from another rustc's sources does not build).
if [ "$TOOLCHAIN" = bench ]; then
  RUSTC=/usr/bin/rustc
  RUST_LIB_SRC=$(in_root "$ROOT" bash -c 'ls -d /usr/src/rustc-*/library | head -n1')
  version=$(in_root "$ROOT" rustc --version)
else
  export RUSTUP_HOME=$GDR_CACHE/rustup
  command -v rustup >/dev/null || die "rustup not found: the rustc rows need it (https://rustup.rs)"
  # Exact versions install once; `stable` is checked for a newer release on every run.
  rustup toolchain install "$TOOLCHAIN" --profile minimal --component rust-src --no-self-update >/dev/null ||
    die "rustup could not install $TOOLCHAIN with rust-src"
  sysroot=$(rustup run "$TOOLCHAIN" rustc --print sysroot)
  RUSTC=$sysroot/bin/rustc RUST_LIB_SRC=$sysroot/lib/rustlib/src/rust/library
  version=$("$RUSTC" --version)
fi

# copy_sources DEST: the files a clean clone has (tracked, and new ones not ignored) of the folders a
# module build reads, so that no build output lands in the checkout's own module folders.
copy_sources() {
  rm -rf "$1"; mkdir -p "$1"
  git -C "$REPO" ls-files -z --cached --others --exclude-standard -- kmod crates |
    (cd "$REPO" && tar --null -T - -cf -) | tar -xf - -C "$1"
}

W=$REPO/target/toolchains/$TOOLCHAIN-$PART${KARCH:+-$ARCH}
mkdir -p "$(dirname "$W")"
case $PART in
  kmod-5.10)
    [ -f "$KDIR/.gdr-complete" ] || die "kmod-5.10 needs KDIR, a bench Linux 5.10 tree for $ARCH (bench/kernel510.sh)"
    copy_sources "$W"
    # RUSTC and RUST_LIB_SRC on make's command line, as the recipe passes them.
    in_root "$ROOT" bash -c ". '$KDIR/env.sh' && make -s -C '$KDIR' M='$W/kmod/picoevb-5.10' \
      RUSTC='$RUSTC' RUST_LIB_SRC='$RUST_LIB_SRC' modules" >"$W.log" 2>&1 ||
      { tail -n 30 "$W.log" >&2; die "$version: kmod/picoevb-5.10 for $ARCH does not compile (log: $W.log)"; }
    ko=$W/kmod/picoevb-5.10/picoevb.ko ;;
  kmod-6.18)
    # The 6.18 source that bench/kernel.sh unpacked, and its configuration fragment for ARCH.
    KVER=$(sed -n 's/^KVER=//p' "$REPO/bench/kernel.sh")
    SRC=$GDR_CACHE/src/linux-$KVER FRAG=$REPO/bench/kernel/$ARCH.config
    [ -f "$SRC/.gdr-complete" ] || die "kmod-6.18 needs the 6.18 source: run bench/kernel.sh (ARCH=$ARCH) first"
    bindgen=$(in_root "$ROOT" bindgen --version)
    key=$(hash_of "$0" "$FRAG" <(echo "$KVER $version $bindgen"))
    T=$GDR_CACHE/rustc-tree-$ARCH-$TOOLCHAIN-$key
    kmake() {
      in_root "$ROOT" bash -c "export ARCH=$KARCH CROSS_COMPILE=$CROSS LIBCLANG_PATH=\$(ls -d /usr/lib/llvm-*/lib | tail -n1)
        make -s -C '$SRC' O='$T' RUSTC='$RUSTC' RUST_LIB_SRC='$RUST_LIB_SRC' $*"
    }
    if [ ! -f "$T/.gdr-complete" ]; then
      exec 9>"$GDR_CACHE/kernel-build.lock"; flock 9
      if [ ! -f "$T/.gdr-complete" ]; then
        rm -rf "$T" "$T.src"; mkdir -p "$T"
        # Debian's 6.18.15 predates a fix that later 6.18 stable kernels carry for rustc 1.95 and newer
        # (rust-fixes for 7.0, tagged for stable): rustc 1.95 requires `T: 'static` on the IRQ callbacks
        # that cast the registration's pointer back (E0310). Applied to a linked copy of the source (sed
        # writes a new file), never to the bench kernels' source. arm64 only: on x86_64 rustc 1.95+ also
        # needs -Zunstable-options for the kernel's target.json, which this check does not add.
        cp -al "$SRC" "$T.src"
        sed -i -e 's/^\(unsafe extern "C" fn handle_irq_callback<T: Handler\)>/\1 + '"'"'static>/' \
          -e 's/^\(unsafe extern "C" fn \(handle_threaded_irq_callback\|thread_fn_callback\)<T: ThreadedHandler\)>/\1 + '"'"'static>/' \
          "$T.src/rust/kernel/irq/request.rs"
        [ "$(grep -cE "^unsafe extern \"C\" fn [a-z_]+<T: (Threaded)?Handler \+ 'static>" \
          "$T.src/rust/kernel/irq/request.rs")" = 3 ] ||
          die "the IRQ callbacks of $SRC/rust/kernel/irq/request.rs are not where this fix expects them"
        SRC=$T.src
        { kmake allnoconfig &&
          in_root "$ROOT" bash -c "cd '$SRC' && ARCH=$KARCH scripts/kconfig/merge_config.sh -m -O '$T' '$T/.config' '$FRAG'" &&
          kmake olddefconfig && kmake -j"$(nproc)" modules_prepare && kmake -j"$(nproc)" rust/; } >"$T.log" 2>&1 ||
          { tail -n 30 "$T.log" >&2; die "$version: Linux $KVER's rust/ for $ARCH does not build (log: $T.log)"; }
        grep -qx 'CONFIG_RUST=y' "$T/.config" || die "$version: CONFIG_RUST did not take in $T (log: $T.log)"
        touch "$T/.gdr-complete"
      fi
      exec 9>&-
    fi
    SRC=$T.src
    copy_sources "$W"
    # No vmlinux in a compile check, so modpost cannot see the kernel's exports: it warns instead of failing.
    kmake M="'$W/kmod/picoevb'" KBUILD_MODPOST_WARN=1 modules >"$W.log" 2>&1 ||
      { tail -n 30 "$W.log" >&2; die "$version: kmod/picoevb for $ARCH does not compile (log: $W.log)"; }
    ko=$W/kmod/picoevb/picoevb.ko ;;
  workspace)
    [ "$TOOLCHAIN" != bench ] || die "the workspace is checked with rustup toolchains, not the chroot's rustc"
    # Its own target folder per toolchain, in the cache: metadata of one rustc is useless to another.
    (cd "$REPO" && rustup run "$TOOLCHAIN" cargo check --workspace --all-targets --quiet \
      --target-dir "$GDR_CACHE/cargo-check-$TOOLCHAIN") >"$W.log" 2>&1 ||
      { tail -n 30 "$W.log" >&2; die "$version: the workspace does not compile (log: $W.log)"; }
    ko= ARCH="the host" ;;
  *) die "PART must be kmod-5.10, kmod-6.18 or workspace, not '$PART'" ;;
esac
if [ -n "$ko" ]; then
  [ -f "$ko" ] || die "$version: no $(basename "$ko") after the build"
  # Kernel module warnings are errors here: the recipe's build must be as clean as the bench's.
  warnings=$(grep -c 'warning:' "$W.log" | grep -v '^0$' || true)
  [ -z "$warnings" ] || { grep -A5 'warning:' "$W.log" >&2; die "$version: $warnings warnings building $PART for $ARCH"; }
fi
log "$version: $PART for $ARCH compiled"
