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
why = 'leaves: contract{extra0}'
[[level]]
units = ["policy"]
why = "policy: rules"
[[level]]
units = ["tools", "verify"]
why = "turn tools and verify gates"
[[level]]
units = ["run"]
why = "run: engine"
[[level]]
units = ["cli", "lib", "main"]
why = "entry points: cli, lib and main"
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
        table = TABLE.format(extra0=', "io-harness-x"').replace('units = ["run"]\nwhy = "run: engine"',
                                                   'units = ["run", "io-harness-y"]\nwhy = "run and y"')
        files = {"crates/x/Cargo.toml": crate_manifest("io-harness-x", 'why = { path = "../y", package = "io-harness-y" }'),
                 "crates/x/src/lib.rs": "pub fn f() { why::g(); }\n",
                 "crates/y/Cargo.toml": crate_manifest("io-harness-y"),
                 "crates/y/src/lib.rs": "pub fn g() {}\n"}
        self.assertFails(check(files, table=table),
                         "upward import: crates/x/Cargo.toml:7 `[dependencies] why` (manifest) "
                         "(io-harness-x, level 0) -> io-harness-y (level 3)")

    def test_member_crate_source_and_dev_dependency(self):
        table = TABLE.format(extra0=', "io-harness-x"').replace('units = ["run"]\nwhy = "run: engine"',
                                                   'units = ["run", "io-harness-y"]\nwhy = "run and y"')
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
        table = TABLE.format(extra0="").replace('units = ["run"]\nwhy = "run: engine"',
                                                   'units = ["run", "io-harness-y"]\nwhy = "run and y"')
        files = {"crates/y/Cargo.toml": crate_manifest("io-harness-y"),
                 "crates/y/src/lib.rs": "pub fn g() {}\n",
                 "src/lib.rs": BASE["src/lib.rs"] + "pub use io_harness_y as y;\n",
                 "src/policy.rs": "use crate::y::g;\n"}
        self.assertFails(check(files, table=table), "src/policy.rs:1 `crate::y::g` (policy, level 1) -> io-harness-y")
        self.assertFails(check({"src/policy.rs": "use crate::X;\n"}), "-> lib (level 4)")

    def test_table_entry_without_why_refused(self):
        table = TABLE.format(extra0="").replace('why = "policy: rules"', 'why = " "')
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


BODY150 = "".join(f"    let _v{k} = {k};\n" for k in range(150))
POL = BASE.get("src/policy.rs", "")


def big_fn(sig, post=""):
    return f"#[allow(dead_code)]\n{sig} {{\n{BODY150}{post}}}\n"


def member(name, deps="", dev=""):
    return {f"crates/{name}/Cargo.toml": crate_manifest(name, deps, dev), f"crates/{name}/src/lib.rs": "//! x\n"}


class Attacks(Case):
    """One case per attack of the adversary's set that broke the check (now refused or caught)."""

    def refused(self, files, needle, **kw):
        self.assertFails(check(files, **kw), "refused construct: " + needle)

    # decision 1: constructs that decouple a file from its module or hide a path

    def test_attack_crate_alias_is_refused(self):
        self.refused({"src/policy.rs": POL + "use crate as c;\nfn a() -> Option<c::run::X> { None }\n"},
                     "src/policy.rs:3 `crate as` aliases the crate root")

    def test_attack_super_alias_is_refused(self):
        self.refused({"src/policy.rs": POL + "use super as s;\nfn a() -> Option<s::run::X> { None }\n"},
                     "src/policy.rs:3 `super as` aliases")
        self.refused({"src/policy.rs": POL + "use super::{self as s};\n"}, "src/policy.rs:3 `super::self as`")

    def test_attack_alias_of_a_real_module_is_resolved_not_refused(self):
        rc, out = check({"src/policy.rs": POL + "use crate::run::{self as r};\n"})
        self.assertEqual(rc, 1, out)
        self.assertNotIn("refused construct", out)
        self.assertIn("upward import: src/policy.rs:3 `crate::run::self` (policy, level 1) -> run", out)

    def test_attack_path_attr_into_run_dir_is_refused(self):
        self.refused({"src/run/laundry.rs": "pub(crate) type R = crate::run::X;\n",
                      "src/policy.rs": POL + '#[path = "../run/laundry.rs"]\nmod laundry;\n'},
                     "src/policy.rs:3 #[path] ties a module to a file elsewhere")

    def test_attack_cfg_attr_path_is_refused(self):
        self.refused({"src/policy.rs": POL + '#[cfg_attr(all(), path = "run/laundry.rs")]\nmod laundry;\n'},
                     "src/policy.rs:3 #[cfg_attr(…, path = …)]")

    def test_attack_path_attr_outside_src_is_refused(self):
        self.refused({"shadow/bits.rs": "pub(crate) type R = crate::run::X;\n",
                      "src/policy.rs": POL + '#[path = "../shadow/bits.rs"]\nmod bits;\n'}, "src/policy.rs:3 #[path]")

    def test_attack_path_attr_src_bin_is_refused(self):
        self.refused({"src/bin/helpers/bits.rs": "pub(crate) type R = crate::run::X;\n",
                      "src/policy.rs": POL + '#[path = "bin/helpers/bits.rs"]\nmod bits;\n'}, "src/policy.rs:3 #[path]")

    def test_attack_include_rs_is_refused(self):
        self.refused({"src/run/inc.rs": "type R = crate::run::X;\n",
                      "src/policy.rs": POL + 'include!("run/inc.rs");\n'}, "src/policy.rs:3 include!")

    def test_attack_include_txt_is_refused(self):
        self.refused({"src/ex.txt": "crate::run::X\n",
                      "src/policy.rs": POL + 'fn a() -> bool { matches!(include!("ex.txt"), _) }\n'},
                     "src/policy.rs:3 include!")

    def test_attack_macro_use_textual_is_refused(self):
        lib = BASE["src/lib.rs"].replace("pub mod run;\n", "#[macro_use]\npub mod run;\n")
        self.refused({"src/lib.rs": lib,
                      "src/run/mod.rs": BASE["src/run/mod.rs"] + "macro_rules! x_ty { () => { $crate::run::X } }\n",
                      "src/policy.rs": POL + "fn a() -> Option<x_ty!()> { None }\n"},
                     "src/lib.rs:5 #[macro_use] on a module")

    def test_attack_extern_self_other_name_is_refused(self):
        self.refused({"src/lib.rs": BASE["src/lib.rs"] + "extern crate self as hh;\n",
                      "src/policy.rs": POL + "fn a() -> Option<hh::run::X> { None }\n"},
                     "src/lib.rs:7 `extern crate self as …`")

    def test_attack_extern_self_local_is_refused(self):
        self.refused({"src/policy.rs": POL + "mod ex {\n    extern crate self as me;\n"
                                             "    fn a() -> Option<me::run::X> { None }\n}\n"},
                     "src/policy.rs:4 `extern crate self as …`")

    def test_attack_refusals_ignore_comments_docs_and_strings(self):
        src = POL + ('// use crate as c; #[path = "x.rs"] include!("x")\n/// extern crate self as me;\n'
                     'pub const S: &str = "use super as s; include!(\\"x\\")";\n')
        rc, out = check({"src/policy.rs": src})
        self.assertEqual(rc, 0, out)

    # decision 4: string-literal paths in attributes

    def test_attack_serde_default_string_path_counts(self):
        src = POL + '#[derive(serde::Deserialize)]\nstruct A {\n    #[serde(default = "crate::run::helper")]\n    d: u8,\n}\n'
        self.assertFails(check({"src/policy.rs": src}),
                         "upward import: src/policy.rs:5 `crate::run::helper` (attribute string) (policy, level 1) -> run")

    def test_attack_serde_bound_string_path_counts(self):
        src = POL + '#[serde(bound = "T: serde::Serialize, crate::run::X: serde::Serialize")]\nstruct A<T> { t: T }\n'
        self.assertFails(check({"src/policy.rs": src}), "src/policy.rs:3 `crate::run::X` (attribute string)")

    # decision 2: aliases from lib.rs code only

    def alias_table(self):
        return TABLE.format(extra0=', "io-harness-y"')

    def test_attack_lib_comment_alias_does_not_remap(self):
        files = {**member("io-harness-y"), "src/lib.rs": BASE["src/lib.rs"] + "// use io_harness_y as run;\n",
                 "src/policy.rs": POL + "fn up() -> Option<crate::run::X> { None }\n"}
        self.assertFails(check(files, table=self.alias_table()),
                         "upward import: src/policy.rs:3 `crate::run::X` (policy, level 1) -> run (level 3)")

    def test_attack_lib_string_alias_does_not_remap(self):
        files = {**member("io-harness-y"),
                 "src/lib.rs": BASE["src/lib.rs"] + 'const NOTE: &str = "use io_harness_y as run;";\n',
                 "src/policy.rs": POL + "fn up() -> Option<crate::run::X> { None }\n"}
        self.assertFails(check(files, table=self.alias_table()),
                         "upward import: src/policy.rs:3 `crate::run::X` (policy, level 1) -> run (level 3)")

    # decision 1: macros that move modules or use super::

    def test_attack_macro_generated_mod_name_is_refused(self):
        src = POL + ("macro_rules! gen_mod {\n    ($n:ident) => {\n        mod $n {\n"
                     "            pub(crate) type R = super::super::run::X;\n        }\n    };\n}\ngen_mod!(g);\n")
        rc, out = check({"src/policy.rs": src})
        self.assertEqual(rc, 1, out)
        self.assertIn("refused construct: src/policy.rs:6 macro_rules! body uses `super`", out)
        self.assertIn("refused construct: src/policy.rs:5 macro_rules! body declares a module", out)

    def test_attack_macro_flattens_mod_is_refused(self):
        src = POL + ("macro_rules! flat {\n    ($k:ident $n:ident { $($i:item)* }) => { $($i)* };\n}\n"
                     "flat! {\n    mod x {\n        type R = super::run::X;\n    }\n}\n")
        self.refused({"src/policy.rs": src}, "src/policy.rs:7 a `mod` item inside a macro invocation")

    def test_attack_macro_from_deep_mod_is_refused(self):
        src = POL + ("#[macro_use]\nmod a {\n    macro_rules! m {\n        () => { type R = super::run::X; };\n"
                     "    }\n}\nm!();\n")
        rc, out = check({"src/policy.rs": src})
        self.assertIn("refused construct: src/policy.rs:3 #[macro_use]", out)
        self.assertIn("refused construct: src/policy.rs:6 macro_rules! body uses `super`", out)

    # decision 5: cargo

    def test_attack_cargo_transitive_path_crate_is_refused(self):
        files = {**member("io-harness-x", 'shim = { path = "../../vendor/shim" }'),
                 "vendor/shim/Cargo.toml": crate_manifest("shim", 'io-harness = { path = "../.." }'),
                 "vendor/shim/src/lib.rs": "pub use io_harness::run::X;\n"}
        self.assertFails(check(files, crates=["io-harness-x"]),
                         "refused construct: crates/io-harness-x/Cargo.toml:7 `[dependencies] shim` is a path crate "
                         "outside the workspace's crates/")

    def test_attack_cargo_member_cycle_via_devdep(self):
        files = {**member("io-harness-x", 'io-harness-y = { path = "../io-harness-y" }'),
                 **member("io-harness-y", dev='io-harness-x = { path = "../io-harness-x" }')}
        rc, out = check(files, crates=["io-harness-x", "io-harness-y"])
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle: io-harness-x -> io-harness-y -> io-harness-x", out)

    def test_attack_dev_is_the_table_key_not_a_cfg_substring(self):
        table = TABLE.format(extra0=', "io-harness-x"').replace(
            'units = ["run"]\nwhy = "run: engine"', 'units = ["run", "io-harness-y"]\nwhy = "run and y"')
        files = {**member("io-harness-y")}
        files.update(member("io-harness-x"))
        files["crates/io-harness-x/Cargo.toml"] += ("\n[target.'cfg(feature = \"dev\")'.dependencies]\n"
                                                    'io-harness-y = { path = "../io-harness-y" }\n')
        self.assertFails(check(files, table=table), "upward import: crates/io-harness-x/Cargo.toml:12",
                         "(manifest) (io-harness-x, level 0) -> io-harness-y")

    def test_planned_unit_that_exists_is_refused(self):
        table = 'planned = ["policy"]\n' + TABLE.format(extra0="")
        self.assertFails(check(table=table), "planned unit `policy` exists now", code=2)

    # decision 6: the table's reasons

    def test_attack_table_move_keep_why_is_refused(self):
        table = TABLE.format(extra0="").replace('units = ["contract"]', 'units = ["contract", "policy"]')
        table = table.replace('units = ["policy"]\nwhy = "policy: rules"\n[[level]]\n', '')
        self.assertFails(check(table=table), "level 0: `why` does not name `policy`", code=2)

    def test_why_must_be_one_line(self):
        table = TABLE.format(extra0="").replace('why = "policy: rules"', 'why = """policy:\nrules"""')
        self.assertFails(check(table=table), "level 1 ['policy']: `why` must be one line", code=2)
        table = TABLE.format(extra0="") + '[[exception]]\npath = "src/policy.rs"\nwhy = """a\nb"""\n'
        self.assertFails(check(table=table), "exception for src/policy.rs: `why` must be one line", code=2)

    # decision 3: src/bin is scanned

    def test_src_bin_is_scanned(self):
        self.refused({"src/bin/tool.rs": 'include!("../run/mod.rs");\nfn main() {}\n'}, "src/bin/tool.rs:1 include!")
        self.assertFails(check({"src/bin/tool.rs": big_fn("fn main()")}), "function too long: src/bin/tool.rs:2 `main`")


class ShapeAttacks(Case):
    def long(self, files, needle):
        self.assertFails(check(files), needle)

    def test_attack_fn_cfg_any_test_unix_is_measured(self):
        self.long({"src/policy.rs": POL + "#[cfg(any(test, unix))]\n" + big_fn("fn big()")}, "`big` 152 lines")

    def test_attack_fn_param_cfg_test_attr_is_measured(self):
        self.long({"src/policy.rs": POL + big_fn("fn big(#[cfg(test)] _t: u8, _x: u8)")}, "`big` 152 lines")

    def test_attack_fn_const_generic_return_is_measured(self):
        self.long({"src/policy.rs": POL + "struct W<const N: usize>;\n" + big_fn("fn big() -> W<{ 1 }>", "    W\n")},
                  "src/policy.rs:5 `big` 153 lines")

    def test_attack_fn_const_generic_where_is_measured(self):
        self.long({"src/policy.rs": POL + "struct W<const N: usize>;\n" + big_fn("fn big<T>() where W<{ 1 }>: Sized")},
                  "src/policy.rs:5 `big` 152 lines")

    def test_attack_static_closure_is_measured(self):
        self.long({"src/policy.rs": POL + "static BIG: fn() = || {\n" + BODY150 + "};\n"},
                  "function too long: src/policy.rs:3 `static BIG` 152 lines")

    def test_attack_macro_body_as_fn_body_is_measured(self):
        src = POL + "macro_rules! big_body {\n    () => {\n" + BODY150 + "    };\n}\nfn big() {\n    big_body!();\n}\n"
        self.long({"src/policy.rs": src}, "function too long: src/policy.rs:3 `big_body!` 154 lines")

    def test_attack_file_tests_rs_ungated_is_measured(self):
        self.long({"src/policy.rs": POL + "mod tests;\n", "src/policy/tests.rs": big_fn("fn big()")},
                  "function too long: src/policy/tests.rs:2 `big`")

    def test_attack_file_tests_dir_ungated_is_measured(self):
        self.long({"src/tools/mod.rs": BASE["src/tools/mod.rs"] + "mod tests;\n",
                   "src/tools/tests/mod.rs": "// x\n" * 900}, "file too long: src/tools/tests/mod.rs 900 lines")

    def test_attack_file_path_attr_to_tests_rs_is_refused(self):
        self.assertFails(check({"src/tools/mod.rs": BASE["src/tools/mod.rs"] + '#[path = "tests.rs"]\nmod helpers;\n',
                                "src/tools/tests.rs": "// x\n" * 900}),
                         "refused construct: src/tools/mod.rs:3 #[path]", "file too long: src/tools/tests.rs 900 lines")

    def test_attack_file_outside_src_via_path_is_refused(self):
        self.assertFails(check({"src/policy.rs": POL + '#[path = "../shadow/big.rs"]\nmod big;\n',
                                "shadow/big.rs": big_fn("fn big()")}), "refused construct: src/policy.rs:3 #[path]")

    def test_gated_test_module_file_not_measured(self):
        files = {"src/tools/mod.rs": BASE["src/tools/mod.rs"] + "#[cfg(test)]\npub(crate) mod tests;\n",
                 "src/tools/tests/mod.rs": "mod deep;\n" + "// x\n" * 900,
                 "src/tools/tests/deep.rs": big_fn("fn big()")}
        rc, out = check(files)
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
