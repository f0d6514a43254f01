# SPDX-License-Identifier: MIT
"""Helpers for meta-gdr's recipes, shared with meta-gdr/scripts (plain Python; `rust` needs bitbake)."""

BBIMPORTS = ["source", "rust"]
