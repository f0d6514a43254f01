#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Unit tests of meta-gdr/lib/gdr/source.py: what recipes read from the repository at parse time, and the
errors a broken input gets (run by check.sh)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from gdr import source  # noqa: E402

LOCK = '''version = 4

[[package]]
name = "a"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/%s-index"
checksum = "%s"

[[package]]
name = "local"
version = "0.1.0"
''' % ("example.org", "ab" * 32)


class InstallList(unittest.TestCase):
    def test_entries_and_comments(self):
        got = source.parse_install_list("# c\n\na/b  /etc/x  0644 # trailing\nc /usr/bin/y 755\n")
        self.assertEqual(got, [("a/b", "/etc/x", "0644"), ("c", "/usr/bin/y", "755")])

    def bad(self, text, words):
        with self.assertRaises(source.SourceError) as e:
            source.parse_install_list(text, "install.list")
        for w in words:
            self.assertIn(w, str(e.exception))

    def test_errors_name_the_line(self):
        self.bad("a /x 0644\nb /y\n", ["install.list:2", "expected"])
        self.bad("a x 0644\n", ["absolute"])
        self.bad("../a /x 0644\n", ["inside the repository"])
        self.bad("a /x 0999\n", ["octal"])
        self.bad("a /x 0644\nb /x 0644\n", ["listed twice"])
        self.bad("# nothing\n", ["lists no files"])


class Cargo(unittest.TestCase):
    def test_members(self):
        toml = '[workspace]\nresolver = "3"\nmembers = [\n "a",\n "b/c", # x\n]\n[workspace.package]\n'
        self.assertEqual(source.workspace_members(toml), ["a", "b/c"])
        self.assertEqual(source.outermost(["agent", "agent/client", "kmod/logic"]), ["agent", "kmod/logic"])
        with self.assertRaises(source.SourceError):
            source.workspace_members('[package]\nname = "x"\n')

    def test_crates_inc(self):
        self.assertEqual(source.crate_registry(LOCK), "example.org")
        inc = source.crates_inc(LOCK)
        self.assertIn("    crate://${GDR_CRATE_REGISTRY}/a/1.0.0 \\\n", inc)
        self.assertIn('SRC_URI[a-1.0.0.sha256sum] = "%s"' % ("ab" * 32), inc)
        self.assertNotIn("local", inc)

    def test_git_sources_are_refused(self):
        lock = LOCK + '\n[[package]]\nname = "g"\nversion = "1.0.0"\nsource = "git+https://x/g#abc"\n'
        with self.assertRaises(source.SourceError) as e:
            source.crate_registry(lock)
        self.assertIn("git://", str(e.exception))


    def test_rust_version(self):
        toml = '[workspace]\nmembers = ["a"]\n\n[workspace.package]\nedition = "2024"\nrust-version = "1.85"\n'
        self.assertEqual(source.workspace_rust_version(toml), "1.85")
        with self.assertRaises(source.SourceError):
            source.workspace_rust_version('[package]\nrust-version = "1.85"\n')
        # RUSTVERSION as oe-core and meta-lts-mixins set it: a PREFERRED_VERSION pattern.
        self.assertEqual(source.rust_too_old("1.93.0%", "1.85"), "")
        self.assertEqual(source.rust_too_old("1.85.1%", "1.85"), "")
        msg = source.rust_too_old("1.81.0%", "1.85")
        self.assertIn("needs Rust >= 1.85", msg)
        self.assertIn("Rust 1.81.0 (RUSTVERSION)", msg)
        self.assertIn("scarthgap/rust", msg)
        self.assertIn("Rust 1.75", source.rust_too_old("1.75%", "1.85"))

class Sysusers(unittest.TestCase):
    def test_user_and_groups(self):
        users, groups = source.sysusers_useradd('u gdr - "gdr agent" /var/lib/gdr /usr/sbin/nologin\ng gdrusers -\n')
        self.assertEqual(users, "--system --no-create-home --home-dir /var/lib/gdr --shell /usr/sbin/nologin "
                                "--comment 'gdr agent' --user-group gdr")
        self.assertEqual(groups, "--system gdrusers")

    def test_declared_group_and_ids(self):
        users, groups = source.sysusers_useradd("g gdr 990\nu! gdr 990\n")
        self.assertEqual(groups, "--system --gid 990 gdr")
        self.assertIn("--uid 990", users)
        self.assertTrue(users.endswith("--gid gdr gdr"))


if __name__ == "__main__":
    unittest.main()
