#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The recipes state what they install, and this checks it against the repository: the deployment files
are the ones agent/deploy/install.list names (the list the emulated appliance installs from), at the same
places, never copies.

Checks, each printed as "ok"/"FAIL" with the reason:
  - install.list parses, and every file it names is in the repository (tracked, when in a git checkout);
  - gdr-agent's recipe installs every entry of install.list with a literal install line (source, mode,
    and a destination that is install.list's under the appliance's usrmerge layout);
  - every `install ... ${S}/<path> ${D}<dest>` in a recipe names a repository file, writes to a path built
    from a directory variable (${systemd_system_unitdir}, ${nonarch_libdir}, ...; no hard-coded /usr/lib),
    and a file of install.list goes where install.list sends it;
  - FILES and CONFFILES of gdr-agent cover what it installs; SYSTEMD_SERVICE lists exactly the units with
    an [Install] section; USERADD_PARAM/GROUPADD_PARAM are what the sysusers.d file declares;
  - LIC_FILES_CHKSUM's md5s match the repository's files;
  - the SRCREV the recipes pin is in the history, and the inputs the recipes are written for (Cargo.lock,
    install.list, the sysusers file, the licences) have not changed since; PV's version is Cargo.toml's;
  - agent.toml ends with its [[card]] table (gdr-agent's recipe replaces that table for the Jetson);
  - the layer holds no copy of a deployment file.
"""
import fnmatch
import glob
import hashlib
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from gdr import source  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LAYER = os.path.join(ROOT, "meta-gdr")
AGENT = "meta-gdr/recipes-gdr/gdr-agent/gdr-agent_git.bb"
SOURCE_CLASS = "meta-gdr/classes/gdr_source.bbclass"
# The directory variables under the layout install.list describes (systemd with usrmerge, as on the
# appliance); a build without usrmerge moves the same variables, and install.list's paths with them.
LAYOUT = {
    "prefix": "/usr", "exec_prefix": "/usr", "base_prefix": "", "root_prefix": "/usr",
    "bindir": "/usr/bin", "sbindir": "/usr/sbin", "libexecdir": "/usr/libexec", "libdir": "/usr/lib",
    "base_libdir": "/usr/lib", "nonarch_libdir": "/usr/lib", "nonarch_base_libdir": "/usr/lib",
    "datadir": "/usr/share", "sysconfdir": "/etc", "localstatedir": "/var", "sharedstatedir": "/var/lib",
    "systemd_unitdir": "/usr/lib/systemd", "systemd_system_unitdir": "/usr/lib/systemd/system",
    "base_bindir": "/usr/bin", "base_sbindir": "/usr/sbin", "BPN": "gdr-agent", "SOLIBS": ".so.*",
}
# bitbake.conf's FILES:${PN}, which FILES:${PN} += adds to.
DEFAULT_FILES = ("${bindir}/* ${sbindir}/* ${libexecdir}/* ${libdir}/lib*${SOLIBS} ${sysconfdir} ${sharedstatedir} "
                 "${localstatedir} ${base_bindir}/* ${base_sbindir}/* ${base_libdir}/*${SOLIBS} "
                 "${base_prefix}/lib/udev ${prefix}/lib/udev ${base_libdir}/udev ${libdir}/udev "
                 "${datadir}/${BPN} ${libdir}/${BPN}/*")
# What the recipe text is written for: a change to these needs a new SRCREV.
PINNED_INPUTS = ["Cargo.lock", source.INSTALL_LIST, "LICENSE", "LICENSES"]
failures = []


def result(name, problems):
    print("%s: %s%s" % ("FAIL" if problems else "ok", name, "".join("\n    " + p for p in problems)))
    if problems:
        failures.append(name)


def git(*args):
    return subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True)


def tracked():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None  # not a git checkout: existence is all we can check
    return set(out.stdout.decode().split("\0"))


def in_repo(path, files):
    full = os.path.join(ROOT, path)
    if not os.path.exists(full):
        return "%s does not exist" % path
    if files is not None and os.path.isfile(full) and path not in files:
        return "%s is not tracked by git (a clean clone would lack it)" % path
    return None


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def recipe_texts():
    paths = sorted(glob.glob(os.path.join(LAYER, "recipes-*", "*", "*.bb*"))
                   + glob.glob(os.path.join(LAYER, "dynamic-layers", "*", "recipes-*", "*", "*.bb*"))
                   + glob.glob(os.path.join(LAYER, "recipes-*", "*", "*.inc"))
                   + glob.glob(os.path.join(LAYER, "classes", "*.bbclass")))
    # Join continuation lines so that a variable reads as one line.
    return {os.path.relpath(p, ROOT): read(os.path.relpath(p, ROOT)).replace("\\\n", " ") for p in paths}


def assignments(text):
    """The plain `VAR = "value"` (and +=) assignments of a recipe, values joined in order."""
    out = {}
    for var, op, value in re.findall(r'^([A-Za-z0-9_:${}\-]+)\s*(\+?=|\?\?=|\?=)\s*"([^"]*)"', text, re.M):
        out[var] = (out.get(var, "") + " " + value).strip() if op == "+=" else value.strip()
    return out


def expand(text, variables):
    for _ in range(10):
        new = re.sub(r"\$\{([A-Za-z0-9_]+)\}", lambda m: variables.get(m.group(1), m.group(0)), text)
        if new == text:
            break
        text = new
    return text


def md5_lines(path, begin, end):
    with open(path, "rb") as f:
        lines = f.read().splitlines(True)
    chunk = b"".join(lines[(begin or 1) - 1:end]) if (begin or end) else b"".join(lines)
    return hashlib.md5(chunk).hexdigest()


INSTALL = re.compile(r"^\s*install\b([^\n;|]*?)\$\{S\}/([^\s\"']+)[\"']?\s+[\"']?\$\{D\}([^\s\"']*)", re.M)


def check_agent_recipe(texts, entries):
    text = texts.get(AGENT)
    if text is None:
        result("gdr-agent installs install.list", ["%s does not exist" % AGENT])
        return
    variables = dict(LAYOUT, **{k: v for k, v in assignments(text).items() if "$" not in k})
    found, problems = {}, []
    for m in INSTALL.finditer(text):
        mode = re.search(r"-m\s+([0-7]+)", m.group(1))
        found[m.group(2)] = (expand(m.group(3), variables), mode.group(1) if mode else None)
    for src, dst, mode in entries:
        if src not in found:
            problems.append("install.list's %s -> %s is not installed by %s" % (src, dst, AGENT))
        elif found[src][1] is None or int(found[src][1], 8) != int(mode, 8):
            problems.append("%s installs %s with mode %s, install.list says %s" % (AGENT, src, found[src][1], mode))
    result("%s installs every entry of install.list" % os.path.basename(AGENT), problems)

    dests = [dst for _, dst, _ in entries]
    files = [expand(f, variables) for f in (DEFAULT_FILES + " " + assignments(text).get("FILES:${PN}", "")).split()]
    problems = ["FILES:${PN} does not cover %s" % d for d in dests
                if not any(d == f or d.startswith(f.rstrip("/") + "/") or fnmatch.fnmatchcase(d, f) for f in files)]
    conffiles = expand(assignments(text).get("CONFFILES:${PN}", ""), variables).split()
    problems += ["CONFFILES:${PN} lacks %s (an upgrade would overwrite local edits)" % d
                 for d in dests if d.startswith("/etc/") and d not in conffiles]
    result("%s: FILES and CONFFILES cover what it installs" % os.path.basename(AGENT), problems)

    want = source.enabled_units(entries, read)
    have = assignments(text).get("SYSTEMD_SERVICE:${PN}", "").split()
    problems = [] if sorted(want) == sorted(have) else [
        "SYSTEMD_SERVICE:${PN} is %r; the units install.list installs with an [Install] section are %r"
        % (" ".join(have), " ".join(want))]
    result("%s: SYSTEMD_SERVICE lists the units that have an [Install] section" % os.path.basename(AGENT), problems)

    sysusers = [src for src, dst, _ in entries if dst.startswith(source.SYSUSERS_DEST)]
    users, groups = source.sysusers_useradd("\n".join(read(s) for s in sysusers))
    problems = []
    for var, want in (("USERADD_PARAM:${PN}", users), ("GROUPADD_PARAM:${PN}", groups)):
        have = assignments(text).get(var, "")
        if have != want:
            problems.append('%s is "%s"; %s declares "%s"' % (var, have, " ".join(sysusers), want))
    result("%s: USERADD_PARAM and GROUPADD_PARAM are what the sysusers.d file declares"
           % os.path.basename(AGENT), problems)


def check_pin(texts, files):
    problems, note = [], ""
    cls = assignments(texts.get(SOURCE_CLASS, ""))
    srcrev, version = cls.get("SRCREV", ""), cls.get("GDR_VERSION", "")
    try:
        want = source.workspace_version(read("Cargo.toml"))
        if version != want:
            problems.append("%s: GDR_VERSION (PV) is %r, Cargo.toml's [workspace.package] version is %r"
                            % (SOURCE_CLASS, version, want))
    except source.SourceError as e:
        problems.append(str(e))
    if not re.fullmatch(r"[0-9a-f]{40}", srcrev):
        problems.append("%s: SRCREV %r is not a full commit id" % (SOURCE_CLASS, srcrev))
    elif files is None or git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        note = " (SRCREV not compared: no full git history here)"
    elif git("cat-file", "-e", srcrev + "^{commit}").returncode != 0:
        problems.append("SRCREV %s is not in this repository's history (a rebase or squash dropped it?): set it "
                        "to the commit that holds the recipes' inputs" % srcrev[:12])
    else:
        sysusers = [src for src, dst, _ in source.read_install_list(ROOT) if dst.startswith(source.SYSUSERS_DEST)]
        changed = git("diff", "--name-only", srcrev, "--", *(PINNED_INPUTS + sysusers)).stdout.split()
        if changed:
            problems.append("%s changed since SRCREV %s: the recipes are written for that commit (crates list, "
                            "install lines, users, licence checksums); commit, then set SRCREV in %s to the new "
                            "commit" % (" ".join(changed), srcrev[:12], SOURCE_CLASS))
        for src, _, _ in source.read_install_list(ROOT):
            if git("cat-file", "-e", "%s:%s" % (srcrev, src)).returncode != 0:
                problems.append("%s is not in SRCREV %s" % (src, srcrev[:12]))
    result("SRCREV pins a commit the recipes are written for; PV's version is the workspace's" + note, problems)


def main():
    files = tracked()
    texts = recipe_texts()

    try:
        entries = source.read_install_list(ROOT)
    except source.SourceError as e:
        result("install.list parses", [str(e)])
        return
    problems = [p for p in (in_repo(src, files) for src, _, _ in entries) if p]
    result("every file install.list names is in the repository", problems)
    dests = {src: dst for src, dst, _ in entries}

    check_agent_recipe(texts, entries)

    problems = []
    for r, t in texts.items():
        variables = dict(LAYOUT, **{k: v for k, v in assignments(t).items() if "$" not in k})
        for m in INSTALL.finditer(t):
            src, raw = m.group(2), m.group(3)
            if "$" in src:
                continue
            dst = expand(raw, variables)
            p = in_repo(src, files)
            if p:
                problems.append("%s installs %s" % (r, p))
            elif not raw.startswith("${"):
                problems.append("%s installs %s to the hard-coded %s: use a directory variable "
                                "(${systemd_system_unitdir}, ${nonarch_libdir}, ...)" % (r, src, raw))
            elif src in dests and dst not in (dests[src], os.path.dirname(dests[src]), os.path.dirname(dests[src]) + "/"):
                problems.append("%s installs %s to %s, install.list says %s" % (r, src, dst, dests[src]))
            elif src.startswith("agent/deploy/") and src not in dests:
                problems.append("%s installs %s, which install.list does not name" % (r, src))
    result("every file a recipe installs from the repository exists and goes where install.list says", problems)

    problems = []
    for r, t in texts.items():
        for m in re.finditer(r"file://([^\s\"';$%]+)((?:;[^\s\"']*)?)", t):
            path, params = m.group(1), m.group(2)
            if path.startswith("/") or path.startswith("${"):
                continue
            p = in_repo(path.rstrip("/"), files)
            if p:
                problems.append("%s names %s" % (r, p))
                continue
            if "md5=" in params:
                par = dict(x.split("=", 1) for x in params.split(";") if "=" in x)
                begin = int(par["beginline"]) if "beginline" in par else None
                end = int(par["endline"]) if "endline" in par else None
                have = md5_lines(os.path.join(ROOT, path), begin, end)
                if have != par["md5"]:
                    problems.append("%s: LIC_FILES_CHKSUM of %s is %s, the file gives %s" % (r, path, par["md5"], have))
    result("every repository file a recipe names exists (licence checksums match)", problems)

    check_pin(texts, files)

    problems = []
    unit = [src for src, dst in dests.items() if dst == source.UNIT_DEST + "gdr-agent.service"]
    if not unit:
        problems.append("install.list does not install %sgdr-agent.service" % source.UNIT_DEST)
    elif os.path.isfile(os.path.join(ROOT, unit[0])) and not re.search(r"^\[Install\]", read(unit[0]), re.M):
        problems.append("%s has no [Install] section: the image would not start the agent at boot" % unit[0])
    result("gdr-agent.service is installed and enabled at boot", problems)

    problems = []
    config = [src for src, dst in dests.items() if dst == "/etc/gdr/agent.toml"]
    if not config:
        problems.append("install.list does not install /etc/gdr/agent.toml")
    else:
        tables = re.findall(r"^\s*(\[\[?[^\]]+\]\]?)", read(config[0]), re.M)
        if "[[card]]" not in tables or any(t != "[[card]]" for t in tables[tables.index("[[card]]"):]):
            problems.append("%s: the recipe replaces everything from the first [[card]] on, but the tables are %s"
                            % (config[0], " ".join(tables)))
    result("agent.toml ends with the [[card]] table gdr-agent's recipe replaces", problems)

    names = {os.path.basename(src) for src in dests}
    copies = [os.path.relpath(os.path.join(d, f), ROOT) for d, _, fs in os.walk(LAYER) for f in fs if f in names]
    result("meta-gdr holds no copy of a deployment file", ["copy: %s" % c for c in copies])


if __name__ == "__main__":
    main()
    sys.exit(1 if failures else 0)
