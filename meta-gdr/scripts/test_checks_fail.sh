#!/usr/bin/env bash
# The checks can fail: in a scratch copy of the repository's tracked files, break what they guard and
# require each check to fail with its reason, after requiring the unbroken copy to pass. Run by check.sh;
# prints one "ok: "/"FAIL: " line per case.
#   - a recipe installs a deployment file elsewhere than install.list says  -> check_installs.py
#   - a recipe installs a repository file that does not exist (a typo)       -> check_installs.py
#   - install.list gains a file the agent recipe does not install            -> check_installs.py
#   - a recipe installs to a hard-coded /usr/lib path (usrmerge assumed)     -> check_installs.py
#   - Cargo.lock moved on (a crate's version and checksum) without the -crates.inc -> crates-inc.py --check
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d /tmp/gdr-meta-checks.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Outside any git checkout, so the copy's files count as the repository's (check_installs.py then checks
# existence only).
git -C "$root" ls-files -z | (cd "$root" && tar --null -T - -cf -) | tar -xf - -C "$tmp"
agent=meta-gdr/recipes-gdr/gdr-agent/gdr-agent_git.bb
list=agent/deploy/install.list

installs() { python3 "$tmp/meta-gdr/scripts/check_installs.py"; }
crates() { python3 "$tmp/meta-gdr/scripts/crates-inc.py" --check; }

# expect NAME pass|fail WORDS CHECK : run CHECK in the copy; it must pass, or fail printing WORDS.
expect() {
    local name=$1 want=$2 words=$3 out rc=0; shift 3
    out=$("$@" 2>&1) || rc=$?
    if [[ $want == pass && $rc -eq 0 ]] || [[ $want == fail && $rc -ne 0 && $out == *"$words"* ]]; then
        echo "ok: $name"
    else
        echo "FAIL: $name (exit $rc)"; printf '%s\n' "$out" | tail -n 8 | sed 's/^/    /'
    fi
}

expect "self-test: the unbroken copy passes the install checks" pass "" installs
expect "self-test: the unbroken copy passes the crates check" pass "" crates

sed -i 's#${D}${nonarch_base_libdir}/udev/rules.d/70-gdr.rules#${D}${sysconfdir}/udev/rules.d/70-gdr.rules#' "$tmp/$agent"
expect "self-test: a deployment file installed off install.list fails" fail \
    "installs agent/deploy/70-gdr.rules to /etc/udev/rules.d/70-gdr.rules, install.list says" installs
cp "$root/$agent" "$tmp/$agent"

sed -i 's#${S}/fpga-bitstream/program/lib.sh#${S}/fpga-bitstream/program/lib.sn#' "$tmp/$agent"
expect "self-test: an install from a path not in the repository fails" fail \
    "installs fpga-bitstream/program/lib.sn does not exist" installs
cp "$root/$agent" "$tmp/$agent"

echo "README.md /usr/share/doc/gdr/README.md 0644" >>"$tmp/$list"
expect "self-test: an install.list entry the recipe does not install fails" fail \
    "install.list's README.md -> /usr/share/doc/gdr/README.md is not installed" installs
cp "$root/$list" "$tmp/$list"

sed -i 's#${D}${systemd_system_unitdir}/gdr-agent.service#${D}/usr/lib/systemd/system/gdr-agent.service#' "$tmp/$agent"
expect "self-test: a hard-coded /usr/lib destination fails" fail \
    "installs agent/deploy/gdr-agent.service to the hard-coded /usr/lib/systemd/system/gdr-agent.service" installs
cp "$root/$agent" "$tmp/$agent"

# As `cargo update -p serde_json` would leave it, without crates-inc.py run after.
python3 - "$tmp/Cargo.lock" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
new = re.sub(r'(name = "serde_json"\nversion = ")[^"]+("\nsource = "[^"]+"\nchecksum = ")[0-9a-f]+',
             r'\g<1>1.0.999\g<2>' + "0" * 64, text, count=1)
assert new != text, "no serde_json in Cargo.lock: pick another crate for this self-test"
open(sys.argv[1], "w").write(new)
EOF
expect "self-test: a stale crates list fails" fail "does not match Cargo.lock" crates
cp "$root/Cargo.lock" "$tmp/Cargo.lock"
