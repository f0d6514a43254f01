#!/usr/bin/env bash
# Cross-builds the Jetson's user space for aarch64-unknown-linux-gnu with the bench's cross toolchain
# (bench/cross.sh: a rustup toolchain with the arm64 standard library, aarch64-linux-gnu-gcc as the linker),
# from the committed Cargo.lock: the agent's programs (gdr-agent, gdrctl, gdr-selftest, gdr-helper) and the
# client library (gdr-client, rlib and the staticlib C programs link). A crate or cfg that breaks on aarch64
# (a c_char sign, an ioctl number type, a missing target in a dependency) fails here before it fails in
# bitbake. Then checks that every output is an AArch64 ELF, and that the programs use the arm64 glibc loader.
# Closes with "N passed, M failed" (bench/test.sh counts it). Crates come through cargo's registry into
# $GDR_CACHE/cargo-cross, as for bench/build.sh's arm64 guest.
. "$(dirname "$0")/lib.sh"
need_root

CROSS=$("$REPO/bench/cross.sh")
TRIPLE=aarch64-unknown-linux-gnu
OUTDIR=$REPO/target/cross-$TRIPLE
BINS=(gdr-agent gdrctl gdr-selftest gdr-helper)

# cargo in the chroot (bench/cross.sh's rustup toolchain) fetches crates itself; it trusts what the host's TLS
# trusts.
cp /etc/ssl/certs/ca-certificates.crt "$GDR_CACHE/host-ca.crt"
t0=$SECONDS
in_root "$CROSS" bash -c "cd '$REPO' && export PATH=\$(cat /etc/gdr-rust-bin):\$PATH \
  CARGO_HTTP_CAINFO='$GDR_CACHE/host-ca.crt' \
  CARGO_HOME='$GDR_CACHE/cargo-cross' CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc &&
  rustc --version && cargo build --release --locked --quiet -p gdr-agent -p gdr-client --bins --lib \
    --target $TRIPLE --target-dir '$OUTDIR'" ||
  { echo "FAIL: cargo build --target $TRIPLE (gdr-agent, gdr-client)"; echo "0 passed, 1 failed"; exit 1; }
echo "ok: cargo build --target $TRIPLE (gdr-agent, gdr-client) in $((SECONDS - t0)) s"

passed=1 failed=0
result() { if [ "$1" = ok ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi; echo "$1: $2"; }
rel=$OUTDIR/$TRIPLE/release
# readelf -h names the machine of an ELF file and of every member of an archive.
machines() { { readelf -h "$1" 2>/dev/null || true; } | sed -n 's/^ *Machine: *//p' | sort -u | tr '\n' ' '; }
for b in "${BINS[@]}" libgdr_client.a; do
  f=$rel/$b
  m=$(machines "$f")
  if [ "$m" = "AArch64 " ]; then result ok "$b is AArch64"; else result FAIL "$b: machine '${m:-not an ELF file}'"; fi
done
for b in "${BINS[@]}"; do
  interp=$({ readelf -l "$rel/$b" 2>/dev/null || true; } | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  # The newest glibc symbol version it needs: what the board's glibc must at least be (docs/yocto.md).
  glibc=$({ readelf -V "$rel/$b" 2>/dev/null || true; } | { grep -o 'GLIBC_[0-9.]*' || true; } | sort -uV | tail -n 1)
  if [ "$interp" = /lib/ld-linux-aarch64.so.1 ]; then result ok "$b loads with $interp (needs ${glibc:-no glibc})"
  else result FAIL "$b: program interpreter '${interp:-none}'"; fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
