# The main job (bench/appliance.sh): the box boots, udev loads the driver, the agent loads the (model) FPGA,
# self-tests and becomes ready; then `gdrctl status`. Sourced by ../run.
check_driver
show lspci -nn -d 10de:0001

if ! systemctl cat gdr-agent.service >/dev/null 2>&1; then
  fail "agent: ready" "gdr-agent.service is not installed (no agent/deploy/install.list in this checkout)"
  return 0
fi
settled() { case $(unit_prop gdr-agent.service ActiveState) in active | failed) return 0 ;; esac; return 1; }
info "waiting for gdr-agent.service (Type=notify) to report READY"
wait_until 600 settled
show journalctl -b -u gdr-agent.service -o short-monotonic --no-pager
state=$(unit_prop gdr-agent.service ActiveState)/$(unit_prop gdr-agent.service SubState)
status=$(unit_prop gdr-agent.service StatusText)
stage=$(gdrctl --json status 0 2>/dev/null | jq -r '.[0].stage')
# READY=1 also comes when every card has failed by policy: the card itself must be ready too.
if [ "$state" = active/running ] && [ "$stage" = ready ]; then pass "agent: ready (systemd: $state, \"$status\")"; else
  fail "agent: ready" "systemd: $state, card0 $stage, \"$status\""; fi
info "gdrctl status:"
show gdrctl status
