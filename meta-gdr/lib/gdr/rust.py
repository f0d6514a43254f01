# SPDX-License-Identifier: MIT
"""Which Rust source release this configuration builds rust-native from (for rust-library-src-native)."""

import fnmatch
import os

SOURCE_INC = "recipes-devtools/rust/rust-source.inc"


def source_inc(d):
    """The rust-source.inc a `require` of SOURCE_INC reads: the first in BBPATH. meta-lts-mixins puts
    itself first in BBPATH, so with it this is the mixin's, beside the rust recipe the mixin selects."""
    import bb.parse
    import bb.utils

    inc = bb.utils.which(d.getVar("BBPATH"), SOURCE_INC)
    if not inc:
        raise bb.parse.SkipRecipe("no %s in BBPATH: no layer of this configuration builds Rust" % SOURCE_INC)
    return inc


def source_dir(d):
    """The folder of that rust-source.inc: its patches are in files/ there."""
    return os.path.dirname(source_inc(d))


def source_version(d):
    """The version of the rust recipe beside that rust-source.inc (the .inc pins one release by its
    sha256), which must be the one RUSTVERSION selects: a `core` built from another release's sources
    does not link with this rustc."""
    import bb.parse

    folder = source_dir(d)
    versions = sorted(f[len("rust_"):-len(".bb")] for f in os.listdir(folder)
                      if f.startswith("rust_") and f.endswith(".bb"))
    want = d.getVar("RUSTVERSION") or ""
    chosen = [v for v in versions if fnmatch.fnmatchcase(v, want.replace("%", "*"))]
    if len(chosen) != 1:
        raise bb.parse.SkipRecipe("RUSTVERSION %r selects %s of the rust recipes beside %s (%s): cannot tell "
                                  "which Rust source rust-native builds from"
                                  % (want, len(chosen) or "none", source_inc(d), " ".join(versions) or "none"))
    return chosen[0]
