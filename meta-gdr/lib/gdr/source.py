# SPDX-License-Identifier: MIT
"""What meta-gdr's checks (scripts/) and a few recipe expressions read from the gdr repository.

The recipes state their content literally (install lines, SYSTEMD_SERVICE, USERADD_PARAM, the crates
list); scripts/check_installs.py and scripts/crates-inc.py compare it with the repository through these
functions: agent/deploy/install.list (the list the emulated appliance installs from), Cargo.toml, Cargo.lock,
the sysusers.d file. At parse time recipes read only two things from the checkout that holds the layer
(GDR_ROOT): Cargo.lock's registry host (GDR_CRATE_REGISTRY) and Cargo.toml's rust-version
(gdr_rust_version.bbclass). Plain text parsing, no tomllib: scarthgap's hosts may run Python 3.8.
"""

import os
import re

INSTALL_LIST = "agent/deploy/install.list"
SYSUSERS_DEST = "/usr/lib/sysusers.d/"
UNIT_DEST = "/usr/lib/systemd/system/"


class SourceError(Exception):
    """The repository's files are not what the recipes need; the message says which file and line."""


def parse_install_list(text, name=INSTALL_LIST):
    """[(source relative to the repo root, absolute destination, mode)] from install.list's text."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        where = "%s:%d" % (name, number)
        if len(fields) != 3:
            raise SourceError("%s: expected '<source> <destination> <mode>', got %r" % (where, line))
        src, dst, mode = fields
        if src.startswith("/") or ".." in src.split("/"):
            raise SourceError("%s: source %r must be a path inside the repository" % (where, src))
        if not dst.startswith("/") or ".." in dst.split("/") or dst.endswith("/"):
            raise SourceError("%s: destination %r must be an absolute file path" % (where, dst))
        if not re.fullmatch(r"0?[0-7]{3}", mode):
            raise SourceError("%s: mode %r is not octal like 0644" % (where, mode))
        if any(dst == e[1] for e in entries):
            raise SourceError("%s: destination %r is listed twice" % (where, dst))
        entries.append((src, dst, mode))
    if not entries:
        raise SourceError("%s: lists no files" % name)
    return entries


def read_install_list(root):
    path = os.path.join(root, INSTALL_LIST)
    try:
        with open(path) as f:
            return parse_install_list(f.read())
    except OSError as e:
        raise SourceError("%s: cannot read (%s)" % (path, e.strerror))


def workspace_members(cargo_toml):
    """The [workspace] members of the root Cargo.toml's text, as written there."""
    m = re.search(r"^\[workspace\][^\[]*?^members\s*=\s*\[(.*?)\]", cargo_toml, re.S | re.M)
    if not m:
        raise SourceError("Cargo.toml: no [workspace] members list")
    return re.findall(r'"([^"]+)"', m.group(1))


def workspace_rust_version(cargo_toml):
    """The rust-version of the root Cargo.toml's [workspace.package]: the oldest Rust that builds gdr."""
    m = re.search(r"^\[workspace\.package\][^\[]*?^rust-version\s*=\s*\"([0-9.]+)\"", cargo_toml, re.S | re.M)
    if not m:
        raise SourceError("Cargo.toml: no rust-version in [workspace.package]")
    return m.group(1)


def workspace_version(cargo_toml):
    """The version of the root Cargo.toml's [workspace.package]: gdr's version, PV's base in the recipes."""
    m = re.search(r"^\[workspace\.package\][^\[]*?^version\s*=\s*\"([^\"]+)\"", cargo_toml, re.S | re.M)
    if not m:
        raise SourceError("Cargo.toml: no version in [workspace.package]")
    return m.group(1)


def version_tuple(text):
    """(1, 85) for "1.85", (1, 93, 0) for RUSTVERSION's "1.93.0%"; SourceError when there is no number."""
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)*)", text or "")
    if not m:
        raise SourceError("not a version: %r" % text)
    return tuple(int(x) for x in m.group(1).split("."))


def rust_too_old(rustversion, need):
    """The message for a build configuration whose Rust (RUSTVERSION) is older than the workspace's
    rust-version, or "" when it is new enough."""
    have = version_tuple(rustversion)
    if have >= version_tuple(need):
        return ""
    return ("gdr's Rust workspace needs Rust >= %s (rust-version in Cargo.toml, edition 2024), but this build "
            "configuration has Rust %s (RUSTVERSION). On scarthgap add the meta-lts-mixins layer at branch "
            "scarthgap/rust (Rust 1.93 there); image/jetson-agx-xavier-devkit.yml pins a commit of it."
            % (need, ".".join(map(str, have))))


def rust_too_new(rustversion, newest):
    """The message for a build configuration whose Rust (RUSTVERSION) is newer than the newest rustc CI
    compiles gdr with (GDR_RUST_NEWEST_TESTED: bench/matrix's `stable` rows on the day it was set), or ""."""
    have = version_tuple(rustversion)
    if have[:2] <= version_tuple(newest)[:2]:
        return ""
    return ("this build configuration has Rust %s (RUSTVERSION), newer than the newest Rust gdr is compiled "
            "with in CI (%s, GDR_RUST_NEWEST_TESTED; bench/matrix): set GDR_RUST_ALLOW_UNTESTED = \"1\" to "
            "build anyway, or run bench/toolchain.sh with it first" % (".".join(map(str, have)), newest))


def lock_packages(lock):
    """[{name, version, source?, checksum?}] of a Cargo.lock's text."""
    packages = []
    for block in re.split(r"^\[\[package\]\]\s*$", lock, flags=re.M)[1:]:
        fields = dict(re.findall(r'^(name|version|source|checksum)\s*=\s*"([^"]*)"', block, re.M))
        if "name" not in fields or "version" not in fields:
            raise SourceError("Cargo.lock: a [[package]] without name or version")
        packages.append(fields)
    if not packages:
        raise SourceError("Cargo.lock: no packages")
    return packages


def crate_registry(lock):
    """The host of the one crate registry Cargo.lock uses, as bitbake's crate:// fetcher names it."""
    sources = {p["source"] for p in lock_packages(lock) if "source" in p}
    registries = {s for s in sources if s.startswith("registry+")}
    if sources - registries:
        raise SourceError("Cargo.lock: non-registry sources need git:// SRC_URIs in the recipe: %s"
                          % ", ".join(sorted(sources - registries)))
    if len(registries) != 1:
        raise SourceError("Cargo.lock: expected one registry, found %s" % (sorted(registries) or "none"))
    # The index repository's name is the registry host followed by "-index".
    index = registries.pop().rstrip("/").rsplit("/", 1)[1]
    if not index.endswith("-index"):
        raise SourceError("Cargo.lock: unexpected registry index %r" % index)
    return index[: -len("-index")]


def crates_inc(lock):
    """The -crates.inc for a Cargo.lock's text: what oe-core's do_update_crates (cargo-update-recipe-crates)
    writes, with the registry host left to ${GDR_CRATE_REGISTRY} (gdr-agent_git.bb reads it from Cargo.lock)."""
    crates = [p for p in lock_packages(lock) if p.get("source", "").startswith("registry+")]
    out = ["# Generated from Cargo.lock by meta-gdr/scripts/crates-inc.py; meta-gdr/scripts/check.sh checks it.",
           "", 'SRC_URI += " \\']
    out += ["    crate://${GDR_CRATE_REGISTRY}/%s/%s \\" % (c["name"], c["version"]) for c in crates]
    out += ['"', ""]
    for c in crates:
        if "checksum" not in c:
            raise SourceError("Cargo.lock: %s %s has no checksum" % (c["name"], c["version"]))
        out.append('SRC_URI[%s-%s.sha256sum] = "%s"' % (c["name"], c["version"], c["checksum"]))
    return "\n".join(out) + "\n"


def sysusers_useradd(text):
    """useradd.bbclass parameters (USERADD_PARAM, GROUPADD_PARAM) for a sysusers.d file's u and g lines,
    so the image has the users at build time (the rootfs's files and udev rules name them) while the file
    stays the one definition."""
    users, groups = [], []
    for line in text.splitlines():
        fields = re.findall(r'"[^"]*"|\S+', line.split("#", 1)[0])
        if len(fields) < 2:
            continue
        kind, name, ident = fields[0].rstrip("!"), fields[1], (fields + ["-"])[2]  # "u!": a locked user
        if kind == "g":
            groups.append("--system %s%s" % ("--gid %s " % ident if ident.isdigit() else "", name))
        elif kind == "u":
            comment = fields[3].strip('"') if len(fields) > 3 and fields[3] != "-" else ""
            home = fields[4] if len(fields) > 4 and fields[4] != "-" else "/"
            shell = fields[5] if len(fields) > 5 and fields[5] != "-" else "/sbin/nologin"
            args = ["--system", "--no-create-home", "--home-dir", home, "--shell", shell]
            if ident.isdigit():
                args += ["--uid", ident]
            if comment:
                args += ["--comment", "'%s'" % comment]
            users.append((args, name, ident))
    group_names = {g.split()[-1] for g in groups}
    params = []
    for args, name, ident in users:
        # sysusers makes a same-named group for a user unless the file declares one or the id names one.
        gid = ident.split(":", 1)[1] if ":" in ident else (name if name in group_names else "")
        params.append(" ".join(args + (["--gid", gid] if gid else ["--user-group"]) + [name]))
    return "; ".join(params), "; ".join(groups)


def enabled_units(entries, read):
    """The units install.list installs that can be enabled ([Install] section, not a template): what
    SYSTEMD_SERVICE must list, the set the appliance enables. read(src) gives a source file's text."""
    units = []
    for src, dst, _ in entries:
        name = os.path.basename(dst)
        if dst.startswith(UNIT_DEST) and "@" not in name and re.search(r"^\[Install\]", read(src), re.M):
            units.append(name)
    return units


def crates_of_inc(text):
    """{(name, version): sha256} of a -crates.inc, in crates_inc's form or in the form do_update_crates
    writes (any registry host, its header comments): what both must agree on with Cargo.lock."""
    uris = re.findall(r"crate://[^\s/]+/([^\s/]+)/([^\s/\\\"]+)", text)
    sums = dict(re.findall(r'^SRC_URI\[([^\]]+)\.sha256sum\]\s*=\s*"([0-9a-f]*)"', text, re.M))
    return {(n, v): sums.get("%s-%s" % (n, v)) for n, v in uris}


def crates_of_lock(lock):
    """{(name, version): sha256} of a Cargo.lock's registry crates."""
    return {(p["name"], p["version"]): p.get("checksum") for p in lock_packages(lock)
            if p.get("source", "").startswith("registry+")}


# ---- for recipes (d is bitbake's datastore) ----

def has_class(d, name):
    """Whether a recipe class exists on this release (module-rust arrived in wrynose)."""
    import bb.utils

    bbpath = d.getVar("BBPATH")
    return any(bb.utils.which(bbpath, "%s/%s.bbclass" % (sub, name)) for sub in ("classes-recipe", "classes"))


def _root(d):
    return d.getVar("GDR_ROOT")


def _read(d, relpath):
    import bb.parse

    path = os.path.join(_root(d), relpath)
    bb.parse.mark_dependency(d, path)  # re-parse when it changes
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise SourceError("%s: cannot read (%s); meta-gdr reads Cargo.toml and Cargo.lock of the gdr checkout "
                          "that holds it (GDR_ROOT)" % (path, e.strerror))


def crate_registry_of(d):
    return crate_registry(_read(d, "Cargo.lock"))


def rust_version_problem(d):
    """(message, fatal) when this configuration's RUSTVERSION is outside the range CI compiles gdr with:
    older than the repository's rust-version is fatal; newer than GDR_RUST_NEWEST_TESTED is fatal unless
    GDR_RUST_ALLOW_UNTESTED = "1". ("", False) inside it."""
    rustversion = d.getVar("RUSTVERSION") or "0"
    old = rust_too_old(rustversion, workspace_rust_version(_read(d, "Cargo.toml")))
    if old:
        return old, True
    new = rust_too_new(rustversion, d.getVar("GDR_RUST_NEWEST_TESTED") or "0")
    return new, bool(new) and d.getVar("GDR_RUST_ALLOW_UNTESTED") != "1"
