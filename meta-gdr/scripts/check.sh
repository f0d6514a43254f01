#!/usr/bin/env bash
# meta-gdr's CI checks, run by bench/test.sh; no layers, bitbake or network beyond a first pip install:
#   oelint-adv on every recipe, class and include, for each series the layer supports;
#   the unit tests of lib/gdr/source.py (what recipes read from the repository, and its errors);
#   gdr-agent-crates.inc lists Cargo.lock's crates (scripts/crates-inc.py --check);
#   the recipes' literal install lines, FILES, SYSTEMD_SERVICE and USERADD_PARAM agree with
#   agent/deploy/install.list and the files it names, licence checksums match, and SRCREV is a commit the
#   recipes are written for (scripts/check_installs.py);
#   the kas files in image/ are valid for kas and pinned (scripts/check_kas.py);
#   those checks fail on a broken install path, an install.list entry not installed, a hard-coded /usr/lib
#   destination and a stale crates list (scripts/test_checks_fail.sh).
# Closes with "N passed, M failed". Tools: a venv from scripts/requirements.txt (pinned), cached in
# $GDR_CACHE keyed by that file. The real parse of the layer is image/check-parse.sh (needs the layers).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
cache=${GDR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gdr}
venv=$cache/yocto-tools-$(sha256sum "$here/requirements.txt" | cut -c1-16)

if [[ ! -f $venv/.complete ]]; then  # a venv cannot move, so it is built in place and marked when whole
    rm -rf "$venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q -r "$here/requirements.txt" >&2 && touch "$venv/.complete" ||
        { echo "check.sh: cannot make a venv with $here/requirements.txt (Debian's python3 needs python3-venv)" >&2
          echo "0 passed, 1 failed"; exit 1; }
fi

passed=0 failed=0
step() {  # step NAME CMD...: one test
    local name=$1; shift
    if "$@"; then passed=$((passed + 1)); echo "ok: $name"; else failed=$((failed + 1)); echo "FAIL: $name"; fi
}
script() {  # script CMD...: a check script printing one "ok: " or "FAIL: " line per test
    local out
    out=$("$@" 2>&1)
    printf '%s\n' "$out"
    passed=$((passed + $(grep -c '^ok: ' <<<"$out")))
    failed=$((failed + $(grep -c '^FAIL: ' <<<"$out")))
    if ! grep -q '^FAIL: ' <<<"$out" && ! grep -q '^ok: ' <<<"$out"; then failed=$((failed + 1)); fi
}

# oelint-adv findings are failures, except these rules, each for a reason:
suppress=(
    oelint.tabs.notabs                   # OE's style guide indents shell functions with tabs, as oe-core does
    oelint.var.mandatoryvar.HOMEPAGE     # gdr has no public home page or tracker yet; set both when it does
    oelint.var.suggestedvar.BUGTRACKER
    oelint.var.suggestedvar.CVE_PRODUCT  # gdr is no CVE product
    oelint.var.bbclassextend             # kernel modules, images, the target agent: no native/nativesdk variant
    oelint.vars.inconspaces              # both fire on 'SRC_URI += " \' that opens the generated -crates.inc,
    oelint.vars.notneededspace           # which is the form oe-core's do_update_crates writes
    oelint.vars.homepageping             # a network check: CI is offline
)
# oelint-constants.json: MAKE_TARGETS (module.bbclass's) is a known variable; gdr-kernel-linux-tegra, the
# override picoevb-mod_git.bb adds for L4T R35's kernel, and tegra264 (meta-tegra's SoC family of Thor,
# which oelint-adv's machine list lacks) are declared as machine overrides, the only kind of override
# oelint-adv lets a layer declare.
recipes=$(git ls-files -co --exclude-standard 'meta-gdr/*.bb' 'meta-gdr/*.bbappend' 'meta-gdr/*.inc' 'meta-gdr/*.bbclass')
# Rules that sit next to what they excuse are "# nooelint: <rule> - <why>" comments in the recipes.
for release in $(sed -n 's/^LAYERSERIES_COMPAT_gdr *= *"\(.*\)"/\1/p' meta-gdr/conf/layer.conf); do
    # shellcheck disable=SC2086
    step "oelint-adv --release $release on meta-gdr" "$venv/bin/oelint-adv" --release "$release" --quiet --relpaths \
        "${suppress[@]/#/--suppress=}" --constantmods=+meta-gdr/scripts/oelint-constants.json $recipes
done

step "lib/gdr/source.py unit tests" python3 meta-gdr/scripts/test_source.py
step "gdr-agent-crates.inc matches Cargo.lock" python3 meta-gdr/scripts/crates-inc.py --check
script python3 meta-gdr/scripts/check_installs.py
script "$venv/bin/python" meta-gdr/scripts/check_kas.py
# The two checks above that guard install paths and the crates list, broken on purpose in a scratch copy.
script bash meta-gdr/scripts/test_checks_fail.sh

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
