#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every file meta-gdr's recipes take from the repository exists there, and the deployment files are the
ones agent/deploy/install.list names (the list the emulated appliance installs from), never copies.

Checks, each printed as "ok"/"FAIL" with the reason:
  - install.list parses, and every file it names is in the repository (tracked, when in a git checkout);
  - the recipe that installs them runs gdr_install_list and fetches every path the list names;
  - every `install ... ${S}/<path>` in a recipe or class names a repository file, and one under
    agent/deploy/ goes where install.list sends it;
  - every file:// a recipe fetches from the repository exists, and LIC_FILES_CHKSUM's md5s match;
  - gdr-agent.service is installed and has an [Install] section (the recipe enables such units);
  - the layer holds no copy of a deployment file.
"""
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
failures = []


def result(name, problems):
    print("%s: %s%s" % ("FAIL" if problems else "ok", name, "".join("\n    " + p for p in problems)))
    if problems:
        failures.append(name)


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


def recipe_texts():
    paths = sorted(glob.glob(os.path.join(LAYER, "recipes-*", "*", "*.bb*"))
                   + glob.glob(os.path.join(LAYER, "dynamic-layers", "*", "recipes-*", "*", "*.bb*"))
                   + glob.glob(os.path.join(LAYER, "recipes-*", "*", "*.inc"))
                   + glob.glob(os.path.join(LAYER, "classes", "*.bbclass")))
    texts = {}
    for p in paths:
        with open(p) as f:
            # Join continuation lines so that a variable reads as one line.
            texts[os.path.relpath(p, ROOT)] = f.read().replace("\\\n", " ")
    return texts


def md5_lines(path, begin, end):
    with open(path, "rb") as f:
        lines = f.read().splitlines(True)
    chunk = b"".join(lines[(begin or 1) - 1:end]) if (begin or end) else b"".join(lines)
    return hashlib.md5(chunk).hexdigest()


def main():
    files = tracked()
    texts = recipe_texts()

    problems = []
    try:
        entries = source.read_install_list(ROOT)
    except source.SourceError as e:
        result("install.list parses", [str(e)])
        return
    problems = [p for p in (in_repo(src, files) for src, _, _ in entries) if p]
    result("every file install.list names is in the repository", problems)
    dests = {src: dst for src, dst, _ in entries}

    users = [r for r, t in texts.items() if r.endswith((".bb", ".bbappend")) and "gdr_install_list" in t]
    problems = []
    if not users:
        problems.append("no recipe installs install.list (gdr_install_list) ")
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        fetched = source.workspace_paths(f.read())
    for r in users:
        bodies = re.findall(r"^do_install(?::append)?\s*\(\)\s*\{\n(.*?)^\}", texts[r], re.M | re.S)
        if not any(re.search(r"^\s*gdr_install_list\s*$", b, re.M) for b in bodies):
            problems.append("%s: do_install does not run gdr_install_list" % r)
        if "gdr.source.workspace_src_uri" not in texts[r]:
            problems.append("%s: does not fetch the workspace (gdr.source.workspace_src_uri)" % r)
        if "gdr.source.install_list_src_uri" in texts[r]:
            fetched += list(dests)  # it fetches every source install.list names
    for src in dests:
        if not any(src == p or src.startswith(p + "/") for p in fetched):
            problems.append("install.list names %s, outside what the agent recipe fetches (%s)" % (src, " ".join(fetched)))
    result("the agent recipe installs install.list and fetches what it names", problems)

    problems = []
    for r, t in texts.items():
        for m in re.finditer(r"\binstall\b[^\n;|]*?\$\{S\}/([^\s\"']+)[\"']?\s+[\"']?\$\{D\}([^\s\"']+)", t):
            src, dst = m.group(1), m.group(2)
            if "$" in src:
                continue  # a shell variable: gdr_install_list's loop, checked above
            p = in_repo(src, files)
            if p:
                problems.append("%s installs %s" % (r, p))
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
                problems.append("%s fetches %s" % (r, p))
                continue
            if "md5=" in params:
                par = dict(x.split("=", 1) for x in params.split(";") if "=" in x)
                begin = int(par["beginline"]) if "beginline" in par else None
                end = int(par["endline"]) if "endline" in par else None
                have = md5_lines(os.path.join(ROOT, path), begin, end)
                if have != par["md5"]:
                    problems.append("%s: LIC_FILES_CHKSUM of %s is %s, the file gives %s" % (r, path, par["md5"], have))
    result("every repository file a recipe fetches exists (licence checksums match)", problems)

    problems = []
    unit = [src for src, dst in dests.items() if dst == "/usr/lib/systemd/system/gdr-agent.service"]
    if not unit:
        problems.append("install.list does not install /usr/lib/systemd/system/gdr-agent.service")
    elif os.path.isfile(os.path.join(ROOT, unit[0])):
        with open(os.path.join(ROOT, unit[0])) as f:
            if not re.search(r"^\[Install\]", f.read(), re.M):
                problems.append("%s has no [Install] section: the image would not start the agent at boot" % unit[0])
    result("gdr-agent.service is installed and enabled at boot (SYSTEMD_SERVICE from install.list)", problems)

    names = {os.path.basename(src) for src in dests}
    copies = [os.path.relpath(os.path.join(d, f), ROOT) for d, _, fs in os.walk(LAYER) for f in fs if f in names]
    result("meta-gdr holds no copy of a deployment file", ["copy: %s" % c for c in copies])


if __name__ == "__main__":
    main()
    sys.exit(1 if failures else 0)
