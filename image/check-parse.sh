#!/usr/bin/env bash
# Parses the kas configurations offline and checks gdr-image's dependency graph (not part of CI: the
# layers cannot be fetched there).
#
#   image/check-parse.sh --mirrors DIR [--work DIR] [--user NAME] [--lts-mixins-stand-in COMMIT] [orin|xavier|thor ...]
#
# DIR holds git clones (bare or not) named after the kas repos: bitbake, openembedded-core, meta-tegra,
# meta-openembedded, meta-lts-mixins; kas checks the pinned commits out of them (KAS_PREMIRRORS), nothing
# is fetched.
# As root it runs bitbake as NAME (default builder; bitbake refuses root). For each machine it runs
# `bitbake -p` and `bitbake -g gdr-image` with BB_NO_NETWORK and fails unless the build list holds the
# driver, the bitstream, the agent, OpenOCD and the CUDA driver library (and, for Xavier, the Rust library
# sources the 5.10 flavour builds core from). Work files (kas venv, checkouts, build
# dirs, a copy of this repository's files) go to --work (default /var/tmp/gdr-yocto-parse).
# --lts-mixins-stand-in parses Xavier with that commit of meta-lts-mixins instead of the pinned one when
# the mirror lacks the pin; the summary line says so.
# Cold: about 4 minutes per machine on 2 idle cores (15-20 under load); warm: under a minute.
set -euo pipefail

KAS_VERSION=5.5
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "check-parse: error: $*" >&2; exit 1; }

mirrors= work=/var/tmp/gdr-yocto-parse user=builder standin= machines=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --mirrors) mirrors=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --user) user=$2; shift 2 ;;
        --lts-mixins-stand-in) standin=$2; shift 2 ;;
        orin|xavier|thor) machines+=("$1"); shift ;;
        -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ ${#machines[@]} -gt 0 ]] || machines=(orin xavier thor)
[[ -n $mirrors ]] || die "--mirrors DIR is required (git clones of bitbake, openembedded-core, meta-tegra, meta-openembedded, meta-lts-mixins)"
mirrors=$(cd "$mirrors" && pwd) || die "--mirrors: no such directory"
for r in bitbake openembedded-core meta-tegra meta-openembedded meta-lts-mixins; do
    git -c safe.directory="*" -C "$mirrors/$r" rev-parse --git-dir >/dev/null 2>&1 || die "$mirrors/$r is not a git repository"
done

# ---- as root: a copy of the repository the build user owns, then the rest as that user ----
if [[ $(id -u) -eq 0 ]]; then
    id "$user" >/dev/null 2>&1 || die "user '$user' does not exist (bitbake refuses root): useradd -m $user"
    mkdir -p "$work"
    chown "$user:" "$work"
    rm -rf "$work/gdr"
    runuser -u "$user" -- mkdir "$work/gdr"
    # Tracked and untracked-but-not-ignored files: what a clean clone with these edits would hold.
    git -C "$repo" ls-files -z --cached --others --exclude-standard |
        (cd "$repo" && tar --null -T - -cf - 2>/dev/null) | runuser -u "$user" -- tar -xf - -C "$work/gdr"
    exec runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" \
        "$work/gdr/image/check-parse.sh" --mirrors "$mirrors" --work "$work" \
        ${standin:+--lts-mixins-stand-in "$standin"} "${machines[@]}"
fi

cd "$repo"
# The Xavier file's meta-lts-mixins pin, and a stand-in when the mirror does not hold it.
lts_pin=$(sed -n '/^  meta-lts-mixins:/,/^  [a-z]/s/^ *commit: *\([0-9a-f]*\).*/\1/p' image/jetson-agx-xavier-devkit.yml)
lts_note=
if [[ " ${machines[*]} " == *" xavier "* ]] &&
    ! git -c safe.directory="*" -C "$mirrors/meta-lts-mixins" cat-file -e "$lts_pin^{commit}" 2>/dev/null; then
    [[ -n $standin ]] || die "$mirrors/meta-lts-mixins lacks the pinned commit $lts_pin; fetch it, or parse with --lts-mixins-stand-in COMMIT"
    git -c safe.directory="*" -C "$mirrors/meta-lts-mixins" cat-file -e "$standin^{commit}" 2>/dev/null ||
        die "$mirrors/meta-lts-mixins lacks the stand-in commit $standin too"
    # In the copy only: kas reads the extra file from the working tree.
    printf 'header:\n  version: 14\nrepos:\n  meta-lts-mixins:\n    commit: %s\n' "$standin" >image/lts-mixins-stand-in.yml
    lts_note="; meta-lts-mixins stand-in ${standin:0:12} for the pinned ${lts_pin:0:12}"
fi
if [[ ! -d .git ]]; then  # kas wants the repository holding the kas files to be one
    git init -q && git add -A && git -c user.name=check -c user.email=check@localhost commit -qm snapshot
fi

venv=$work/kas-$KAS_VERSION
if [[ ! -x $venv/bin/kas ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "kas==$KAS_VERSION"
fi
export LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8
gitcfg=$work/gitconfig  # kas ignores ~/.gitconfig; the mirrors belong to another user
printf '[safe]\n\tdirectory = *\n' >"$gitcfg"
export GITCONFIG_FILE=$gitcfg
# Shallow clones: a mirror may be a partial snapshot that holds the pinned commits but not all history.
export KAS_CLONE_DEPTH=1
export KAS_PREMIRRORS="https://github.com/openembedded/bitbake.git file://$mirrors/bitbake
https://github.com/openembedded/openembedded-core.git file://$mirrors/openembedded-core
https://github.com/OE4T/meta-tegra.git file://$mirrors/meta-tegra
https://github.com/openembedded/meta-openembedded.git file://$mirrors/meta-openembedded
https://git.yoctoproject.org/meta-lts-mixins file://$mirrors/meta-lts-mixins"

fail=0
for m in "${machines[@]}"; do
    case $m in
        orin) kasfile=image/jetson-agx-orin-devkit.yml extra="nvidia-kernel-oot linux-yocto" ;;
        # Thor: the Orin configuration on tegra264, the module built without nvidia_p2p.
        thor) kasfile=image/jetson-agx-thor-devkit.yml extra="linux-yocto" ;;
        xavier) kasfile=image/jetson-agx-xavier-devkit.yml extra="linux-tegra rust-library-src-native"
            [[ -z $lts_note ]] || kasfile+=:image/lts-mixins-stand-in.yml ;;
    esac
    export KAS_WORK_DIR=$work/$m KAS_BUILD_DIR=$work/$m/build
    mkdir -p "$KAS_WORK_DIR"
    log=$work/$m.log
    start=$SECONDS
    if ! "$venv/bin/kas" shell "$kasfile:image/offline.yml" \
        -c 'bitbake -p && bitbake -g gdr-image && echo "RUSTVERSION=$(bitbake-getvar --value RUSTVERSION)" &&
            echo "KMOD_DIR=$(bitbake-getvar -r picoevb-mod --value GDR_KMOD_DIR)" &&
            echo "LOADER=$(bitbake-getvar -r gdr-agent --value GDR_AGENT_LOADER)" &&
            echo "P2P=$(bitbake-getvar -r picoevb-mod --value GDR_KMOD_P2P_CFLAGS)" &&
            echo "KDEPENDS=$(bitbake-getvar -r picoevb-mod --value DEPENDS)" &&
            echo "KRDEPENDS=$(bitbake-getvar -r picoevb-mod --value RDEPENDS:picoevb-mod)" &&
            { bitbake -c gdr_check_rust gdr-agent; echo "GDR_CHECK_RUST=$?"; }' \
        >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "check-parse: $m: FAILED (log: $log)"
        fail=1
        continue
    fi
    parsed=$(grep -o 'Parsing of [0-9]* .bb files complete.*' "$log" | tail -n 1)
    [[ -n $parsed ]] || parsed=$(grep -o '[0-9]* targets, [0-9]* skipped, [0-9]* masked, [0-9]* errors' "$log" | tail -n 1)
    list=$KAS_BUILD_DIR/pn-buildlist
    missing=()
    # shellcheck disable=SC2086
    for pn in picoevb-mod picoevb-bitstream gdr-agent packagegroup-gdr tegra-libraries-cuda openocd $extra; do
        grep -qx "$pn" "$list" || missing+=("$pn")
    done
    gdr=$(grep -E '^(picoevb|gdr|packagegroup-gdr|tegra-libraries-cuda$|openocd$|rust-library-src)' "$list" | sort | tr '\n' ' ')
    rust=$(sed -n 's/^RUSTVERSION=\([0-9.]*\).*/\1/p' "$log" | tail -n 1)
    kmod=$(sed -n 's/^KMOD_DIR=//p' "$log" | tail -n 1)
    loader=$(sed -n 's/^LOADER=//p' "$log" | tail -n 1)
    echo "check-parse: $m: $parsed; $(wc -l <"$list") recipes in gdr-image's graph; gdr: ${gdr% }; driver ${kmod:-?}; agent loader ${loader:-?} (no bitstream); Rust ${rust:-?}; $((SECONDS - start)) s$([[ $m != xavier ]] || echo "$lts_note")"
    # The flavour the kernel provider's override picks, and the no-bitstream agent configuration.
    case $m in orin|thor) want_kmod=kmod/picoevb ;; xavier) want_kmod=kmod/picoevb-5.10 ;; esac
    if [[ $kmod != "$want_kmod" || $loader != none ]]; then
        echo "check-parse: $m: FAILED: picoevb-mod builds ${kmod:-?} (want $want_kmod), gdr-agent's loader is ${loader:-?} (want none)"
        fail=1
    fi
    # nvidia_p2p: linked on Orin (the module's hard dependency), absent on Thor (not supported there).
    p2p=$(sed -n 's/^P2P=//p' "$log" | tail -n 1)
    kdeps=$(sed -n 's/^KDEPENDS=//p' "$log" | tail -n 1)
    krdeps=$(sed -n 's/^KRDEPENDS=//p' "$log" | tail -n 1)
    case $m in
        orin) [[ $p2p == *-DGDR_P2P_LINKED* && $kdeps == *nvidia-kernel-oot* && $krdeps == *nvidia-p2p* ]] ||
            { echo "check-parse: $m: FAILED: picoevb-mod does not link nvidia_p2p (KCFLAGS '$p2p', DEPENDS '$kdeps', RDEPENDS '$krdeps')"; fail=1; } ;;
        thor) [[ $p2p != *GDR_P2P* && $kdeps != *nvidia-kernel-oot* && $krdeps != *nvidia-p2p* ]] ||
            { echo "check-parse: $m: FAILED: picoevb-mod still uses nvidia_p2p (KCFLAGS '$p2p', DEPENDS '$kdeps', RDEPENDS '$krdeps')"; fail=1; }
            echo "check-parse: $m: picoevb-mod without nvidia_p2p (no GDR_P2P_* flags, no nvidia-kernel-oot in DEPENDS, no nvidia-p2p in RDEPENDS)" ;;
    esac
    # The workspace's rust-version against the configuration's Rust: gdr_rust_version.bbclass stops the
    # build at gdr-agent's first task then (not a parse error).
    # gdr_rust_version.bbclass's task, run for real: it must pass exactly when the configuration's Rust is
    # at least the workspace's rust-version (it stops a build at its first task otherwise, not the parse).
    need=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
    checked=$(sed -n 's/^GDR_CHECK_RUST=//p' "$log" | tail -n 1)
    if [[ $(printf '%s\n' "$need" "$rust" | sort -V | head -n 1) == "$need" ]]; then old=0; else old=1; fi
    if [[ $checked == 0 && $old == 0 ]]; then
        echo "check-parse: $m: gdr-agent:do_gdr_check_rust passed (Rust $rust >= $need)"
    elif [[ -n $checked && $checked != 0 && $old == 1 ]]; then
        echo "check-parse: $m: warning: Rust $rust < $need: gdr-agent:do_gdr_check_rust stops a build with:"
        grep -o "gdr's Rust workspace needs.*" "$log" | head -n 1 | sed 's/^/    /'
    else
        echo "check-parse: $m: FAILED: gdr-agent:do_gdr_check_rust exit ${checked:-missing} with Rust ${rust:-?} vs $need"
        fail=1
    fi
    if [[ ${#missing[@]} -gt 0 ]]; then
        echo "check-parse: $m: FAILED: gdr-image's graph lacks ${missing[*]}"
        fail=1
    fi
    if ! grep -q ', 0 errors' "$log"; then
        echo "check-parse: $m: FAILED: the parse reported errors ($log)"
        fail=1
    fi
done
exit $fail
