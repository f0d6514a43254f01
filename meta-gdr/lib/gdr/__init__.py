# SPDX-License-Identifier: MIT
"""Helpers for meta-gdr's recipes, shared with meta-gdr/scripts (plain Python, no bitbake needed)."""

BBIMPORTS = ["source"]
