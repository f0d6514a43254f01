#!/usr/bin/env bash
# Build everything the bench runs and print it as shell assignments (eval "$(bench/build.sh)"):
# the chroot, the guest kernel, the kernel modules, the FPGA model, the host harness and the guest tests.
# Heavy parts come from $GDR_CACHE when their inputs are unchanged. ARCH=arm64 builds the arm64 guest
# (kernel, modules, static aarch64 guest program and busybox from bench/cross.sh) instead of the x86_64 one.
# GDR_KSERIES=5.10 builds the Linux 5.10 guest kernel and the 5.10 module (kmod/picoevb-5.10) instead of 6.18's;
# GDR_KSERIES=4.14 or 4.9 with GDR_KTREE_4_14 or GDR_KTREE_4_9 (or GDR_KTREE) naming a kernel tree of that
# series, the same module for that kernel (issue 23; these trees are not in the package registries, so CI
# never builds them: bench/kernels4x.sh does).
. "$(dirname "$0")/lib.sh"
need_root
ARCH=${ARCH:-x86_64}
t0=$SECONDS
ROOT=$("$REPO/bench/rootfs.sh")
log "chroot ready ($((SECONDS - t0)) s)"
case ${GDR_KSERIES:-6.18} in
  6.18)
    KDIR=$(ARCH=$ARCH "$REPO/bench/kernel.sh")
    log "kernel ready ($((SECONDS - t0)) s)"
    KMOD_DGPU=$("$REPO/bench/kmod.sh" "$KDIR" dgpu)
    KMOD=$("$REPO/bench/kmod.sh" "$KDIR" jetson)
    P2P=$KMOD/gdr_nv_p2p.ko KO_DGPU=$KMOD_DGPU/picoevb.ko P2P_DGPU=$KMOD_DGPU/gdr_nv_p2p.ko
    EXPORTER=$KMOD/gdr_exporter.ko ;;
  5.10)
    # Xavier's kernel series (docs/driver.md, "Two builds"): the 5.10 modules, Jetson nvidia_p2p only.
    # nice: a cold kernel build must not starve what else runs on a small machine (its cache key is unchanged).
    KDIR=$(ARCH=$ARCH nice -n 5 "$REPO/bench/kernel510.sh")
    log "5.10 kernel ready ($((SECONDS - t0)) s)"
    KMOD=$("$REPO/bench/kmod510.sh" "$KDIR")
    # No dma-buf exporter: the 5.10 suite has no dma-buf import to test.
    P2P=$KMOD/gdr_nv_p2p.ko KO_DGPU= P2P_DGPU= EXPORTER= ;;
  4.9 | 4.14)
    # JetPack 4's and DRIVE OS 5.2's series: the 5.10 glue through kmod/compat, from a tree the user gives.
    tree_var=GDR_KTREE_${GDR_KSERIES/./_}
    KTREE=${!tree_var:-${GDR_KTREE:-}}
    [ -n "$KTREE" ] || die "GDR_KSERIES=$GDR_KSERIES needs $tree_var (or GDR_KTREE), a Linux $GDR_KSERIES tree"
    KDIR=$(ARCH=$ARCH nice -n 5 "$REPO/bench/kernel4x.sh" "$KTREE")
    case $(cat "$KDIR/include/config/kernel.release") in
      "$GDR_KSERIES".*) ;; *) die "$KTREE is Linux $(cat "$KDIR/include/config/kernel.release"), not $GDR_KSERIES" ;;
    esac
    log "$GDR_KSERIES kernel ready ($((SECONDS - t0)) s)"
    KMOD=$("$REPO/bench/kmod510.sh" "$KDIR")
    P2P=$KMOD/gdr_nv_p2p.ko KO_DGPU= P2P_DGPU= EXPORTER= ;;
  *) die "GDR_KSERIES must be 6.18 (default), 5.10, 4.14 or 4.9, not '$GDR_KSERIES'" ;;
esac
log "kernel modules built ($((SECONDS - t0)) s)"

# Host tools (model, harness) and the static guest test binary. The guest build gets its own target folder
# so its static-CRT flags never invalidate the host build.
TARGET=$REPO/target
(cd "$REPO" && cargo build --release --quiet -p picoevb-model -p gdr-bench) >&2 || die "cargo build (host tools) failed"
case $ARCH in
  x86_64)
    (cd "$REPO" && CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
      cargo build --release --quiet -p gdr-guest-tests --target x86_64-unknown-linux-gnu --target-dir "$TARGET/guest") >&2 ||
      die "cargo build (guest tests) failed"
    GUEST=$TARGET/guest/x86_64-unknown-linux-gnu/release/gdr-guest-tests
    KERNEL=$KDIR/arch/x86/boot/bzImage BUSYBOX= ;;
  arm64)
    CROSS=$("$REPO/bench/cross.sh")
    # cargo in the cross chroot (bench/cross.sh's toolchain) fetches crates itself; it trusts what the host's
    # TLS trusts.
    cp /etc/ssl/certs/ca-certificates.crt "$GDR_CACHE/host-ca.crt"
    in_root "$CROSS" bash -c "cd '$REPO' && export PATH=\$(cat /etc/gdr-rust-bin):\$PATH \
      CARGO_HTTP_CAINFO='$GDR_CACHE/host-ca.crt' \
      CARGO_HOME='$GDR_CACHE/cargo-cross' CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
      CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS='-C target-feature=+crt-static' &&
      cargo build --release --quiet -p gdr-guest-tests --target aarch64-unknown-linux-gnu \
        --target-dir '$TARGET/guest-aarch64'" >&2 || die "cargo build (aarch64 guest tests) failed"
    GUEST=$TARGET/guest-aarch64/aarch64-unknown-linux-gnu/release/gdr-guest-tests
    KERNEL=$KDIR/arch/arm64/boot/Image BUSYBOX=$CROSS/usr/bin/busybox ;;
esac
log "userspace built ($((SECONDS - t0)) s)"

cat <<VARS
GDR_ROOT=$ROOT
GDR_KDIR=$KDIR
GDR_ARCH=$ARCH
GDR_KERNEL=$KERNEL
GDR_BUSYBOX=$BUSYBOX
GDR_KSERIES=${GDR_KSERIES:-6.18}
GDR_KO=$KMOD/picoevb.ko
GDR_P2P=$P2P
GDR_KO_DGPU=$KO_DGPU
GDR_P2P_DGPU=$P2P_DGPU
GDR_EXPORTER=$EXPORTER
GDR_MODEL=$TARGET/release/picoevb-model
GDR_HARNESS=$TARGET/release/gdr-bench
GDR_GUEST=$GUEST
VARS
