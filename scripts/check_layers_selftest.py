#!/usr/bin/env python3
"""Self-test of scripts/check-layers: synthetic trees in temp dirs, the script run on each.

Run: python3 scripts/check_layers_selftest.py
"""

import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "check-layers"

ROOT_MANIFEST = """\
[workspace]
members = ["crates/*"]

[package]
name = "io-harness"
version = "0.1.0"
edition = "2024"

[lib]
name = "io_harness"
path = "src/lib.rs"
"""

TABLE = """\
[[level]]
units = ["contract"{extra0}]
why = "leaves"
[[level]]
units = ["policy"]
why = "rules"
[[level]]
units = ["tools", "verify"]
why = "turn tools"
[[level]]
units = ["run"]
why = "engine"
[[level]]
units = ["cli", "lib", "main"]
why = "entry points"
"""

BASE = {
    "src/lib.rs": "pub mod contract;\npub mod policy;\npub mod tools;\npub mod verify;\npub mod run;\n"
                  "pub use run::X;\n",
    "src/main.rs": "mod cli;\nfn main() { cli::main() }\n",
    "src/cli/mod.rs": "use io_harness::run::X;\npub fn main() { let _ = io_harness::X; }\n",
    "src/contract/mod.rs": "pub struct C;\n",
    "src/policy.rs": "use crate::contract::C;\npub struct P;\n",
    "src/tools/mod.rs": "mod read;\npub struct T;\n",
    "src/tools/read.rs": "use super::super::policy::P;\npub fn f() { let _ = crate::contract::C; }\n",
    "src/verify/mod.rs": "use crate::tools::T;\n",
    "src/run/mod.rs": "pub struct X;\npub fn helper() {}\nmod engine;\n",
    "src/run/engine/mod.rs": "mod step;\n",
    "src/run/engine/step.rs": "use super::super::X;\nuse crate::{policy::P, verify};\n",
}


def crate_manifest(name, deps="", dev=""):
    return (f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2024"\n\n'
            f"[dependencies]\n{deps}\n[dev-dependencies]\n{dev}\n")


class Tree:
    def __init__(self, files, table=None, crates=()):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        extra = "".join(f', "{c}"' for c in crates)
        all_files = {"Cargo.toml": ROOT_MANIFEST, "layers.toml": table or TABLE.format(extra0=extra)}
        all_files.update(BASE)
        all_files.update(files)
        for rel, text in all_files.items():
            if text is None:
                continue
            p = self.root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)

    def run(self, *args):
        r = subprocess.run([sys.executable, str(SCRIPT), "--root", str(self.root), *args],
                           capture_output=True, text=True)
        self.tmp.cleanup()
        return r.returncode, r.stdout + r.stderr


def check(files=None, table=None, crates=(), args=()):
    return Tree(files or {}, table, crates).run(*args)


def long_fn(name, body_lines, extra=""):
    """A function of exactly 2 + body_lines lines."""
    body = "".join(f"    let _x{k} = {k};\n" for k in range(body_lines))
    return f"pub fn {name}() {{\n{extra}{body}}}\n"


class Case(unittest.TestCase):
    def assertFails(self, result, *needles, code=1):
        rc, out = result
        self.assertEqual(rc, code, out)
        for n in needles:
            self.assertIn(n, out)


class Layers(Case):
    def test_clean_tree_passes(self):
        rc, out = check()
        self.assertEqual(rc, 0, out)
        self.assertIn("0 violations", out)

    def test_upward_use(self):
        self.assertFails(check({"src/policy.rs": "use crate::run::X;\n"}),
                         "upward import: src/policy.rs:1 `crate::run::X` (policy, level 1) -> run (level 3)")

    def test_upward_qualified_call_in_body(self):
        src = "pub fn g() {\n    if true {\n        crate::run::helper();\n    }\n}\n"
        self.assertFails(check({"src/policy.rs": src}),
                         "src/policy.rs:3 `crate::run::helper`", "-> run (level 3)")

    def test_upward_through_super_chain(self):
        self.assertFails(check({"src/tools/read.rs": "use super::super::run::X;\n"}),
                         "src/tools/read.rs:1 `super::super::run::X` (tools, level 2) -> run")

    def test_super_inside_inline_test_module(self):
        src = "pub struct P;\n#[cfg(test)]\nmod tests {\n    use super::super::run::X;\n}\n"
        self.assertFails(check({"src/policy.rs": src}), "src/policy.rs:4", "(test code)")

    def test_grouped_use(self):
        self.assertFails(check({"src/contract/mod.rs": "use crate::{policy, run::X};\n"}),
                         "`crate::run::X`", "-> run (level 3)", "-> policy (level 1)")

    def test_same_level_cycle_names_both_edges(self):
        rc, out = check({"src/tools/mod.rs": "mod read;\npub struct T;\nuse crate::verify::V;\n",
                         "src/verify/mod.rs": "use crate::tools::T;\npub struct V;\n"})
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle: tools -> verify -> tools", out)
        self.assertIn("tools -> verify: src/tools/mod.rs:3 `crate::verify::V`", out)
        self.assertIn("verify -> tools: src/verify/mod.rs:1 `crate::tools::T`", out)

    def test_member_crate_depending_on_root_package(self):
        files = {"crates/x/Cargo.toml": crate_manifest("io-harness-x", 'io-harness = { path = "../.." }'),
                 "crates/x/src/lib.rs": ""}
        self.assertFails(check(files, crates=["io-harness-x"]),
                         "member crate depends on the root package io-harness: crates/x/Cargo.toml:7")

    def test_member_crate_depending_upward(self):
        table = TABLE.format(extra0=', "io-harness-x"').replace('units = ["run"]', 'units = ["run", "io-harness-y"]')
        files = {"crates/x/Cargo.toml": crate_manifest("io-harness-x", 'why = { path = "../y", package = "io-harness-y" }'),
                 "crates/x/src/lib.rs": "pub fn f() { why::g(); }\n",
                 "crates/y/Cargo.toml": crate_manifest("io-harness-y"),
                 "crates/y/src/lib.rs": "pub fn g() {}\n"}
        self.assertFails(check(files, table=table),
                         "upward import: crates/x/Cargo.toml:7 `[dependencies] why` (manifest) "
                         "(io-harness-x, level 0) -> io-harness-y (level 3)")

    def test_member_crate_source_and_dev_dependency(self):
        table = TABLE.format(extra0=', "io-harness-x"').replace('units = ["run"]', 'units = ["run", "io-harness-y"]')
        files = {"crates/x/Cargo.toml": crate_manifest("io-harness-x", dev='io-harness-y = { path = "../y" }'),
                 "crates/x/src/lib.rs": "#[cfg(test)]\nmod tests { use io_harness_y::g; }\n",
                 "crates/y/Cargo.toml": crate_manifest("io-harness-y"),
                 "crates/y/src/lib.rs": "pub fn g() {}\n"}
        self.assertFails(check(files, table=table), "upward dev-dependency: crates/x/Cargo.toml:9",
                         "crates/x/src/lib.rs:2 `io_harness_y::g`")

    def test_comment_string_and_doc_text_do_not_count(self):
        src = textwrap.dedent('''\
            // use crate::run::X;
            /* crate::run::X /* nested */ crate::run::X */
            /// mentions crate::run::X in prose
            /// ```
            /// use crate::run::X;
            /// ```
            pub const S: &str = "crate::run::X";
            pub const R: &str = r#"crate::run::X "quoted" "#;
            pub const C: char = '"';
            pub const B: &[u8] = b"crate::run::X";
            ''')
        rc, out = check({"src/policy.rs": src})
        self.assertEqual(rc, 0, out)

    def test_doc_link_counts(self):
        self.assertFails(check({"src/policy.rs": "/// See [`crate::run::X`].\npub struct P;\n"}),
                         "src/policy.rs:1 `crate::run::X` (doc link)")

    def test_crate_alias_and_root_reexport(self):
        table = TABLE.format(extra0="").replace('units = ["run"]', 'units = ["run", "io-harness-y"]')
        files = {"crates/y/Cargo.toml": crate_manifest("io-harness-y"),
                 "crates/y/src/lib.rs": "pub fn g() {}\n",
                 "src/lib.rs": BASE["src/lib.rs"] + "pub use io_harness_y as y;\n",
                 "src/policy.rs": "use crate::y::g;\n"}
        self.assertFails(check(files, table=table), "src/policy.rs:1 `crate::y::g` (policy, level 1) -> io-harness-y")
        self.assertFails(check({"src/policy.rs": "use crate::X;\n"}), "-> lib (level 4)")

    def test_table_entry_without_why_refused(self):
        table = TABLE.format(extra0="").replace('why = "rules"', 'why = " "')
        self.assertFails(check(table=table), "has no `why`", code=2)

    def test_module_not_in_table_refused(self):
        self.assertFails(check({"src/store.rs": "pub struct S;\n"}), "unit `store` exists but no level lists it", code=2)

    def test_unknown_and_duplicate_units_refused(self):
        table = TABLE.format(extra0=', "polcy", "run"')
        self.assertFails(check(table=table), "unknown unit `polcy`", "unit `run` listed twice", code=2)

    def test_planned_unit_accepted(self):
        table = 'planned = ["io-harness-z"]\n' + TABLE.format(extra0=', "io-harness-z"')
        rc, out = check(table=table)
        self.assertEqual(rc, 0, out)


class Shape(Case):
    def test_101_line_function_fails_then_passes_with_exception(self):
        files = {"src/contract/mod.rs": "pub struct C;\n" + long_fn("big", 99)}
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("function too long: src/contract/mod.rs:2 `big` 101 lines", out)
        table = TABLE.format(extra0="") + '[[exception]]\npath = "src/contract/mod.rs"\nfn = "big"\nwhy = "table of cases"\n'
        rc, out = check(files, table=table)
        self.assertEqual(rc, 0, out)

    def test_100_line_function_passes(self):
        rc, out = check({"src/contract/mod.rs": long_fn("ok", 98)})
        self.assertEqual(rc, 0, out)

    def test_exception_without_why_refused(self):
        table = TABLE.format(extra0="") + '[[exception]]\npath = "src/contract/mod.rs"\nfn = "big"\n'
        self.assertFails(check(table=table), "needs a `path` and a non-empty `why`", code=2)

    def test_801_line_file_fails(self):
        text = "pub struct C;\n" + "// filler\n" * 800
        self.assertFails(check({"src/contract/mod.rs": text}), "file too long: src/contract/mod.rs 801 lines")
        rc, out = check({"src/contract/mod.rs": "pub struct C;\n" + "// filler\n" * 799})
        self.assertEqual(rc, 0, out)

    def test_test_files_and_test_modules_not_measured(self):
        files = {"src/contract/mod.rs": "pub struct C;\n#[cfg(test)]\nmod tests;\n"
                                        "#[cfg(test)]\nmod inline {\n" + long_fn("t", 200) + "}\n",
                 "src/contract/tests.rs": long_fn("t2", 200) + "// x\n" * 900}
        rc, out = check(files)
        self.assertEqual(rc, 0, out)

    def test_braces_in_strings_chars_raw_strings(self):
        tricky = textwrap.dedent('''\
                let a = "}}}";
                let b = '}';
                let c = r#"}" }}"#;
                let d = b'{';
                let e = br"}}";
                let f: &'static str = "\\"}";
                let g = '\\'';
                // }
                /* } /* } */ } */
            ''')
        src = long_fn("big", 95, extra=tricky.replace("\n", "\n    ").rstrip(" ")) + "pub fn after() {}\n"
        rc, out = check({"src/contract/mod.rs": src})
        self.assertEqual(rc, 1, out)
        self.assertIn("`big` 106 lines", out)
        self.assertNotIn("`after`", out)

    def test_report(self):
        files = {"src/contract/mod.rs": long_fn("mid", 85) + "// x\n" * 600}
        rc, out = check(files, args=["--report"])
        self.assertEqual(rc, 0, out)
        self.assertIn("files over 600 lines: 1", out)
        self.assertIn("src/contract/mod.rs:1 mid 87", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
