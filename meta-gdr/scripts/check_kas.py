#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The kas files in image/ are valid against kas's own schema, and each machine's configuration is pinned.

Per file: YAML that kas's configuration schema (from the installed kas package) accepts, with includes that
exist. Per machine file (one with `machine:`), merged with its includes: target gdr-image; every remote repo
at a full commit id and a branch; the local repo carries meta-gdr; meta-gdr's LAYERSERIES_COMPAT names the
oe-core branch (the Yocto series) the file pins.
"""
import glob
import os
import re
import sys

import jsonschema
import yaml
from kas.configschema import CONFIGSCHEMA

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
failures = []


def result(name, problems):
    print("%s: %s%s" % ("FAIL" if problems else "ok", name, "".join("\n    " + p for p in problems)))
    if problems:
        failures.append(name)


def merge(base, over):
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(path, problems, seen=()):
    rel = os.path.relpath(path, ROOT)
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
        jsonschema.validate(doc, CONFIGSCHEMA)
    except (OSError, yaml.YAMLError) as e:
        problems.append("%s: %s" % (rel, e))
        return {}
    except jsonschema.ValidationError as e:
        problems.append("%s: kas schema: %s at %s" % (rel, e.message, "/".join(map(str, e.absolute_path)) or "top"))
        return {}
    merged = {}
    for inc in doc.get("header", {}).get("includes", []):
        if not isinstance(inc, str):
            problems.append("%s: include %r from another repo is not expected here" % (rel, inc))
            continue
        target = os.path.join(ROOT, inc)  # kas: repo-relative
        if not os.path.isfile(target):
            problems.append("%s: include %s does not exist" % (rel, inc))
        elif target in seen:
            problems.append("%s: include loop through %s" % (rel, inc))
        else:
            merged = merge(merged, load(target, problems, seen + (path,)))
    return merge(merged, doc)


def layer_series():
    with open(os.path.join(ROOT, "meta-gdr", "conf", "layer.conf")) as f:
        m = re.search(r'^LAYERSERIES_COMPAT_gdr\s*=\s*"([^"]*)"', f.read(), re.M)
    return set(m.group(1).split()) if m else set()


def main():
    files = sorted(glob.glob(os.path.join(ROOT, "image", "*.yml")))
    problems = []
    configs = {f: load(f, problems) for f in files}
    result("kas files valid against kas's schema (%d files)" % len(files), problems)

    series = layer_series()
    machines = {f: c for f, c in configs.items() if c.get("machine")}
    if not machines:
        result("machine configurations", ["no kas file in image/ names a machine"])
    for f, c in machines.items():
        rel, problems = os.path.relpath(f, ROOT), []
        if c.get("target") != "gdr-image":
            problems.append("target is %r, not gdr-image" % c.get("target"))
        repos = c.get("repos", {})
        local = [r for r, v in repos.items() if not (v or {}).get("url") and not (v or {}).get("path")]
        if not any("meta-gdr" in ((repos[r] or {}).get("layers") or {}) for r in local):
            problems.append("no local repo with the meta-gdr layer")
        for name, v in repos.items():
            v = v or {}
            if not v.get("url"):
                continue
            if not re.fullmatch(r"[0-9a-f]{40}", str(v.get("commit", ""))):
                problems.append("repo %s is not pinned to a full commit id" % name)
            if not v.get("branch"):
                problems.append("repo %s names no branch (kas checks the commit is on it)" % name)
        core = (repos.get("openembedded-core") or {}).get("branch")
        if core not in series:
            problems.append("openembedded-core branch %r is not in meta-gdr's LAYERSERIES_COMPAT (%s)"
                            % (core, " ".join(sorted(series))))
        result("%s: %s pinned, gdr-image, series supported" % (rel, c["machine"]), problems)


if __name__ == "__main__":
    main()
    sys.exit(1 if failures else 0)
