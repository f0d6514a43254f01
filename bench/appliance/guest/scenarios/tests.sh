# The appliance tests (bench/test.sh), grouped into one boot because a TCG boot of the debug kernel is the
# expensive part. The model starts with the wrong design (NVIDIA's reference bitstream: no gdr ID block), so
# the boot itself is the "reprogrammed and comes back" scenario. Each scenario below prints one or more TEST
# lines; a feature the layer lacks is skipped with the reason, never passed. Sourced by ../run.
A=gdr-agent.service
CARD=/org/gdr/Agent1/card0
settled() { case $(unit_prop $A ActiveState) in active | failed) return 0 ;; esac; return 1; }
active() { [ "$(unit_prop $A ActiveState)/$(unit_prop $A SubState)" = active/running ]; }
journal_since() { journalctl -u $A --since "@$1" -o cat --no-pager; }
# card_prop NAME : a property of card0's D-Bus object (busctl's "TYPE VALUE" output).
card_prop() { busctl get-property org.gdr.Agent1 $CARD org.gdr.Agent1.Card "$1"; }
t_start() { T_S=$(uptime_s); }
t_took() { info "  ($1: $(awk -v a="$T_S" -v b="$(uptime_s)" 'BEGIN {printf "%.1f", b - a}') s)"; }

check_driver
if ! systemctl cat $A >/dev/null 2>&1; then
  skip "agent: ready, systemd saw READY" "gdr-agent.service is not installed (no agent/deploy/install.list)"
  return 0
fi

# 1. Ready, and systemd saw READY=1 (a Type=notify unit is "active" only after it).
t_start
wait_until 600 settled
if active; then pass "agent: ready, systemd saw READY ($(unit_prop $A StatusText))"; else
  fail "agent: ready, systemd saw READY" "$(unit_prop $A ActiveState)/$(unit_prop $A SubState): $(unit_prop $A StatusText)"
  show journalctl -b -u $A -o short-monotonic --no-pager
fi
t_took "boot to ready"

# 2. The card started with the wrong design: the agent programmed it and it came back with the gdr design.
t_start
st=$(model '{"cmd":"state"}')
design=$(jq -r '.design // empty' <<<"$st")
programs=$(jq -r '.programs // empty' <<<"$st")
if [ -z "$design" ]; then
  skip "agent: wrong design reprogrammed" "the model reports no design (model 'program' command missing)"
elif [ "$design" = gdr ] && [ "${programs:-0}" -ge 1 ] && active; then
  pass "agent: wrong design reprogrammed ($programs program(s), design $design)"
else
  fail "agent: wrong design reprogrammed" "model design $design after ${programs:-?} program(s): $st"
fi
t_took "reprogram check"

# 3. The unit's hardening: systemd-analyze security exposure at most 2.0.
t_start
line=$(systemd-analyze security $A --no-pager 2>&1 | grep -i 'overall exposure level' | tail -n1)
score=$(sed -n 's/.*: *\([0-9.]*\).*/\1/p' <<<"$line")
if [ -z "$score" ]; then fail "security: exposure <= 2.0" "no score: $line"
elif awk -v s="$score" 'BEGIN {exit !(s <= 2.0)}'; then pass "security: exposure $score <= 2.0"
else fail "security: exposure <= 2.0" "$line"; fi
t_took "systemd-analyze security"

# The remaining scenarios need gdrctl (agent branch).
if ! have gdrctl; then
  for n in "access: unauthorised caller gets no fd" "access: authorised caller does DMA" \
    "revoke: reprogramming revokes open fds" "selftest: corrupt data fails, unit and D-Bus say so" \
    "config: malformed config rejected, running config kept" "watchdog: a stall is noticed by systemd"; do
    skip "$n" "gdrctl is not in the layer"
  done
  return 0
fi
