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
