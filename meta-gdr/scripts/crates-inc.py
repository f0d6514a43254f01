#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes (or with --check, verifies) recipes-gdr/gdr-agent/gdr-agent-crates.inc from the root Cargo.lock.

Writes the list oe-core's `bitbake -c update_crates gdr-agent` (cargo-update-recipe-crates) writes, with
the registry host left to a variable the recipe reads from Cargo.lock, and without bitbake. Run it after
every Cargo.lock change. --check compares the crates (name, version, sha256), so a list written by
update_crates passes too, and a list that misses, adds or mis-sums a crate of Cargo.lock fails.
"""
import argparse
import difflib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from gdr import source  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
INC = os.path.join(HERE, "..", "recipes-gdr", "gdr-agent", "gdr-agent-crates.inc")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed file differs")
    ap.add_argument("--lock", default=os.path.join(ROOT, "Cargo.lock"))
    ap.add_argument("--inc", default=INC)
    args = ap.parse_args()
    with open(args.lock) as f:
        want = source.crates_inc(f.read())
    if not args.check:
        with open(args.inc, "w") as f:
            f.write(want)
        return 0
    try:
        with open(args.inc) as f:
            have = f.read()
    except OSError as e:
        print("crates-inc: %s: %s" % (args.inc, e.strerror), file=sys.stderr)
        return 1
    have_crates, want_crates = source.crates_of_inc(have), source.crates_of_inc(want)
    if have_crates != want_crates:
        def lines(crates):
            return ["%s %s %s\n" % (n, v, s) for (n, v), s in sorted(crates.items(), key=lambda c: (c[0], c[1] or ""))]
        sys.stdout.writelines(difflib.unified_diff(lines(have_crates), lines(want_crates),
                                                   "committed", "from Cargo.lock", n=0))
        print("crates-inc: %s does not match Cargo.lock; run meta-gdr/scripts/crates-inc.py"
              % os.path.relpath(args.inc, ROOT), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except source.SourceError as e:
        print("crates-inc: %s" % e, file=sys.stderr)
        sys.exit(1)
