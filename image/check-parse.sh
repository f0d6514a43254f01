#!/usr/bin/env bash
# Parses both kas configurations offline and checks gdr-image's dependency graph (not part of CI: the
# layers cannot be fetched there).
#
#   image/check-parse.sh --mirrors DIR [--work DIR] [--user NAME] [orin|xavier ...]
#
# DIR holds git clones (bare or not) named after the kas repos: bitbake, openembedded-core, meta-tegra,
# meta-openembedded, meta-lts-mixins; kas checks the pinned commits out of them (KAS_PREMIRRORS), nothing
# is fetched.
# As root it runs bitbake as NAME (default builder; bitbake refuses root). For each machine it runs
# `bitbake -p` and `bitbake -g gdr-image` with BB_NO_NETWORK and fails unless the build list holds the
# driver, the bitstream, the agent and the CUDA driver library. Work files (kas venv, checkouts, build
# dirs, a copy of this repository's files) go to --work (default /var/tmp/gdr-yocto-parse).
# Cold: about 4 minutes per machine on 2 cores; warm: under a minute.
set -euo pipefail

KAS_VERSION=5.5
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "check-parse: error: $*" >&2; exit 1; }

mirrors= work=/var/tmp/gdr-yocto-parse user=builder machines=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --mirrors) mirrors=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --user) user=$2; shift 2 ;;
        orin|xavier) machines+=("$1"); shift ;;
        -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ ${#machines[@]} -gt 0 ]] || machines=(orin xavier)
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
        "$work/gdr/image/check-parse.sh" --mirrors "$mirrors" --work "$work" "${machines[@]}"
fi

cd "$repo"
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
https://github.com/bhl-foss-mirrors/meta-lts-mixins.git file://$mirrors/meta-lts-mixins"

fail=0
for m in "${machines[@]}"; do
    case $m in
        orin) kasfile=image/jetson-agx-orin-devkit.yml module=picoevb-mod extra=nvidia-kernel-oot ;;
        xavier) kasfile=image/jetson-agx-xavier-devkit.yml module=picoevb-mod-5.10 extra=linux-tegra ;;
    esac
    export KAS_WORK_DIR=$work/$m KAS_BUILD_DIR=$work/$m/build
    mkdir -p "$KAS_WORK_DIR"
    log=$work/$m.log
    start=$SECONDS
    if ! "$venv/bin/kas" shell "$kasfile:image/offline.yml" \
        -c 'bitbake -p && bitbake -g gdr-image && echo "RUSTVERSION=$(bitbake-getvar --value RUSTVERSION)"' \
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
    for pn in "$module" picoevb-bitstream gdr-agent packagegroup-gdr tegra-libraries-cuda openocd "$extra"; do
        grep -qx "$pn" "$list" || missing+=("$pn")
    done
    gdr=$(grep -E '^(picoevb|gdr|packagegroup-gdr|tegra-libraries-cuda$|openocd$)' "$list" | sort | tr '\n' ' ')
    echo "check-parse: $m: $parsed; $(wc -l <"$list") recipes in gdr-image's graph; gdr: ${gdr% }; $((SECONDS - start)) s"
    # The agent's rust-version against the configuration's Rust: a build would stop there (not a parse error).
    rust=$(sed -n 's/^RUSTVERSION=\([0-9.]*\).*/\1/p' "$log" | tail -n 1)
    need=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
    if [[ -n $rust && -n $need ]] && [[ $(printf '%s\n' "$need" "$rust" | sort -V | head -n 1) != "$need" ]]; then
        echo "check-parse: $m: warning: Rust $rust is older than the workspace's rust-version $need: gdr-agent will not build"
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
