# Helpers of the appliance's test scenarios. Every result is one console line the harness parses:
#   TEST <name> ... ok | FAILED: <why> | skipped (<why>)
# ok and FAILED lines end in `[<seconds> s]`: the guest time since the previous result (what CI spends).
# and informational lines start with APPLIANCE (echoed live by gdr-bench).
set -u
export PATH=/usr/sbin:/usr/bin
declare -i T_PASS=0 T_FAIL=0 T_SKIP=0
T0=$(cut -d' ' -f1 /proc/uptime)

info() { echo "APPLIANCE $*"; }
# Indents a command's output as APPLIANCE lines.
show() { "$@" 2>&1 | sed 's/^/APPLIANCE   /'; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

T_LAST=$T0
# Sets TOOK to the seconds since the previous result line, one decimal (not in a subshell: it moves T_LAST).
took() {
  local now; now=$(uptime_s)
  TOOK=$(awk -v a="$T_LAST" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
  T_LAST=$now
}

pass() { took; echo "TEST $1 ... ok [$TOOK s]"; T_PASS+=1; }
fail() { took; echo "TEST $1 ... FAILED: ${2//$'\n'/ | } [$TOOK s]"; T_FAIL+=1; }
skip() { T_LAST=$(uptime_s); echo "TEST $1 ... skipped ($2)"; T_SKIP+=1; }

# check NAME CMD... : one test: CMD's success; its output (last lines) is the evidence of a failure.
check() {
  local name=$1 out; shift
  if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$(tail -n 3 <<<"$out")"; fi
}

# wait_until SECS CMD... : polls CMD every half second until it succeeds; fails after SECS.
wait_until() {
  local end=$(($(date +%s) + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.5
  done
}

# model JSON : one request to card 0's FPGA model through the harness's RPC relay (ttyS1), prints the
# answer line. The agent has its own wire to the model (virtio-serial); this one is the test's.
model() {
  local ans
  [ -c /dev/ttyS1 ] || { echo '{"ok":false,"error":"no /dev/ttyS1"}'; return 1; }
  stty -F /dev/ttyS1 raw -echo 2>/dev/null
  exec 3<>/dev/ttyS1
  printf 'RPC %s\n' "$1" >&3
  IFS= read -r -t 20 ans <&3 || ans='{"ok":false,"error":"no answer from the relay"}'
  exec 3>&-
  ans=${ans%$'\r'}
  echo "$ans"
  [ "$(jq -r .ok <<<"$ans" 2>/dev/null)" = true ]
}

# unit_prop UNIT PROP : one property of a systemd unit.
unit_prop() { systemctl show -P "$2" "$1"; }

# have CMD : whether the layer carries a program (the agent branch may not have it yet).
have() { command -v "$1" >/dev/null 2>&1; }

# The driver came up the way it does on the box: modules-load.d loaded picoevb (udev would by its PCI alias)
# and the nvidia_p2p provider, and the device node appeared.
check_driver() {
  check "picoevb loaded (modules-load.d)" grep -q '^picoevb ' /proc/modules
  check "gdr_nv_p2p loaded (modules-load.d)" grep -q '^gdr_nv_p2p ' /proc/modules
  check "/dev/picoevb0 exists" test -c /dev/picoevb0
  # NVIDIA's reference applications open /dev/picoevb (kmod/picoevb/udev/60-picoevb.rules).
  check "/dev/picoevb links to card 0" test "$(readlink -f /dev/picoevb)" = /dev/picoevb0
}

summary() {
  local s="GUEST RESULT: $T_PASS passed, $T_FAIL failed"
  [ "$T_SKIP" -eq 0 ] || s+=", $T_SKIP skipped"
  info "scenario took $(awk -v a="$T0" -v b="$(uptime_s)" 'BEGIN {printf "%.1f", b - a}') s (VM uptime $(uptime_s) s)"
  echo "$s"
  [ "$T_FAIL" -eq 0 ]
}
