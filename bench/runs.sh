# Counting and boot helpers shared by bench/test.sh and bench/soak.sh. Source after lib.sh.
# Consoles of the last runs, per checkout (worktrees run side by side).
LOGS=$REPO/target/bench-logs
mkdir -p "$LOGS"
declare -i PASSED=0 FAILED=0
declare -a BROKEN=()

# count NAME PASSED FAILED
count() { PASSED+=$2; FAILED+=$3; [ "$3" -eq 0 ] || BROKEN+=("$1"); log "$1: $2 passed, $3 failed"; }
# check NAME CMD... : a whole command as one test.
check() { local n=$1; shift; if "$@"; then count "$n" 1 0; else count "$n" 0 1; fi; }
# counted NAME LOG CMD... : a command that closes with "N passed, M failed"; its counts are added. A
# non-zero exit with no failure counted, or no closing line at all, counts as one failure.
counted() {
  local name=$1 log=$2; shift 2
  local rc=0; "$@" >"$log" 2>&1 || rc=$?
  grep -E '^(TEST|CHECK|FAIL|FIGURES|GUEST (FUZZ|BENCH|REGCACHE))' "$log" >&2 || true
  local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
  if [ -z "$line" ]; then tail -n 40 "$log" >&2; count "$name" 0 1; return; fi
  local p=${line%% passed*} f; f=$(echo "$line" | sed 's/.* passed, \([0-9]*\) failed.*/\1/')
  [ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || { tail -n 40 "$log" >&2; f=1; }
  count "$name" "$p" "$f"
}
# harness MODULES... -- ARGS... : one boot of the emulated appliance with these modules loaded in order.
harness() {
  local mods=()
  while [ "$1" != -- ]; do mods+=(--module "$1"); shift; done
  shift
  "$GDR_HARNESS" run --root "$GDR_ROOT" --kernel "$GDR_KERNEL" "${mods[@]}" --guest "$GDR_GUEST" \
    --model "$GDR_MODEL" --arch "${GDR_ARCH:-x86_64}" ${GDR_BUSYBOX:+--busybox "$GDR_BUSYBOX"} "$@"
}
# finish : the closing line over everything counted; exit status 0 only if nothing failed.
finish() {
  [ ${#BROKEN[@]} -eq 0 ] || log "failing: ${BROKEN[*]}"
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

# matrix_rows SET : the rows of bench/matrix in SET, one a line, fields trimmed and separated by a tab:
# kind, arch, kernel, with, label, args (the file's header says what each means).
matrix_rows() {
  awk -F'|' -v set="$1" '
    function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
    /^[ \t]*(#|$)/ { next }
    NF != 7 { printf "bench/matrix:%d: %d fields, not 7\n", NR, NF > "/dev/stderr"; bad = 1; next }
    { n = split(trim($2), sets, ","); for (i = 1; i <= n; i++) if (sets[i] == set) {
        printf "%s\t%s\t%s\t%s\t%s\t%s\n", trim($1), trim($3), trim($4), trim($5), trim($6), trim($7) } }
    END { exit bad }' "$REPO/bench/matrix"
}

# run_matrix SET : every row of bench/matrix in SET, in order, each counted; the bench build a row names
# (bench/build.sh with its ARCH and GDR_KSERIES) is made when a row first needs it and its GDR_* variables
# then hold until another build replaces them. A build that fails counts once and skips its rows.
run_matrix() {
  local rows; rows=$(matrix_rows "$1") || die "bench/matrix is malformed"
  local kind arch kernel with label args current= vars slug m mods argv
  local -A broken_build=()
  while IFS=$'\t' read -r -u 3 kind arch kernel with label args; do
    case $arch in arm64) [ "${GDR_ARM64_TESTS:-1}" = 1 ] || continue ;; esac
    case $kernel in
      5.10) [ "${GDR_BENCH_510:-1}" = 1 ] || continue ;;
      4.9 | 4.14)
        local tree_var=GDR_KTREE_${kernel/./_}
        [ -n "${!tree_var:-}" ] || { log "$label: skipped (no $tree_var)"; continue; } ;;
    esac
    case $kind in
      appliance) [ "${GDR_APPLIANCE_TESTS:-1}" = 1 ] || continue ;;
      rustc) [ "${GDR_RUSTC_MATRIX:-1}" = 1 ] || continue ;;
    esac
    if [ "$arch" != - ] && [ "$arch $kernel" != "$current" ]; then
      [ -z "${broken_build[$arch $kernel]:-}" ] || continue
      if vars=$(ARCH=$arch GDR_KSERIES=$kernel "$REPO/bench/build.sh"); then
        eval "$vars"; current="$arch $kernel"
      else
        count "bench build ($arch, Linux $kernel)" 0 1; broken_build[$arch $kernel]=1; current=; continue
      fi
    fi
    eval "argv=($args)"
    slug=$(printf '%s' "$label" | tr -c 'a-zA-Z0-9.\n' '-' | tr -s '-')
    mods=()
    for m in $with; do
      case $kind:$m in
        boot:ko | must-fail:ko) mods+=("$GDR_KO") ;;
        boot:p2p | must-fail:p2p) mods+=("$GDR_P2P") ;;
        boot:ko-dgpu | must-fail:ko-dgpu) mods+=("$GDR_KO_DGPU") ;;
        boot:p2p-dgpu | must-fail:p2p-dgpu) mods+=("$GDR_P2P_DGPU") ;;
        boot:exp | must-fail:exp)
          [ -n "${GDR_EXPORTER:-}" ] || die "bench/matrix: '$label': no dma-buf exporter for Linux $kernel"
          mods+=("$GDR_EXPORTER") ;;
        boot:* | must-fail:*) die "bench/matrix: '$label': unknown module '$m'" ;;
      esac
    done
    case $kind in
      boot) counted "$label" "$LOGS/last-$slug.log" harness "${mods[@]}" -- "${argv[@]}" ;;
      must-fail) check "$label" expect_failures "$LOGS/last-$slug.log" "${mods[@]}" -- "${argv[@]}" ;;
      appliance) appliance_boot "$label" "$LOGS/last-$slug.log" "${argv[@]}" ;;
      script) check "$label" "${argv[@]}" ;;
      rustc) check "$label" "$REPO/bench/toolchain.sh" "$with" "${argv[@]}" "$arch" "${GDR_KDIR:-}" ;;
      *) die "bench/matrix: '$label': unknown kind '$kind'" ;;
    esac
  done 3<<<"$rows"
}

# expect_failures LOG MODULES... -- ARGS... : a boot that must end in failures (--expect-failures in ARGS):
# the harness succeeds only then, with every kernel check still clean.
expect_failures() {
  local log=$1; shift
  harness "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2; return 1; }
}

# appliance_boot LABEL LOG ARGS... : the emulated appliance (bench/appliance/) on the current x86_64 build,
# its image made by bench/appliance/prepare.sh; ARGS follow the image's own arguments. The limit covers the
# tests scenario on a loaded two-core machine: about 1,100 s to boot and run steps 1-8, 450 s for the
# restart, unplug and watchdog steps (issue 20), with room; a scenario that hangs shows its journal first.
appliance_boot() {
  local label=$1 log=$2 avars; shift 2
  if ! avars=$(export GDR_KDIR GDR_KO GDR_P2P GDR_MODEL; "$REPO/bench/appliance/prepare.sh"); then
    count "$label (image build)" 0 1; return
  fi
  eval "$avars"
  counted "$label" "$log" "$GDR_HARNESS" appliance --root "$GDR_ROOT" --kernel "$GDR_KERNEL" --model "$GDR_MODEL" \
    --base "$GDR_APPLIANCE_BASE" --layer "$GDR_APPLIANCE_LAYER" --model-arg=--golden="$GDR_APPLIANCE_GOLDEN" \
    --timeout 2400 "$@"
}
