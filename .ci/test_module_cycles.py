#!/usr/bin/env python3
"""Tests of the house checks themselves (`.ci/module-cycles`, `.ci/long-files`) on tiny fake crates.

Run: python3 .ci/test_module_cycles.py
"""

import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), os.path.join(HERE, name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


cycles_check = load("module-cycles")
long_check = load("long-files")


class FakeCrate:
    """A temporary directory holding `files` (path -> text)."""

    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for rel, text in files.items():
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.dir.cleanup()

    def graph(self):
        _, graph = cycles_check.edges(self.root)
        return graph

    def check(self):
        return cycles_check.check([self.root])


def m(path):
    return tuple(p for p in path.split("::") if p)


class Edges(unittest.TestCase):
    def assert_edge(self, files, src, dst, name):
        with FakeCrate(files) as c:
            graph = c.graph()
        self.assertIn(m(dst), graph[m(src)], f"no edge {src} -> {dst}: {graph}")
        self.assertIn(name, graph[m(src)][m(dst)])

    def assert_no_edges(self, files):
        with FakeCrate(files) as c:
            graph = c.graph()
        self.assertEqual({k: v for k, v in graph.items() if v}, {})

    def test_crate_path_written_inline(self):
        self.assert_edge(
            {"lib.rs": "mod a; mod b;", "a.rs": "fn f() { crate::b::g(); }", "b.rs": "pub fn g() {}"},
            "a", "b", "g",
        )

    def test_super_and_self_paths(self):
        files = {
            "lib.rs": "mod p;",
            "p/mod.rs": "mod c; mod d; pub struct T;",
            "p/c.rs": "use super::T; fn f() { self::super::d::h(); }",
            "p/d.rs": "pub fn h() {}",
        }
        self.assert_edge(files, "p::c", "p", "T")
        self.assert_edge(files, "p::c", "p::d", "h")

    def test_child_module_named_directly(self):
        self.assert_edge(
            {"lib.rs": "mod auth;", "auth/mod.rs": "mod reviews; fn f() { reviews::serve(); }", "auth/reviews.rs": "pub fn serve() {}"},
            "auth", "auth::reviews", "serve",
        )

    def test_module_imported_by_name_then_used_through_it(self):
        self.assert_edge(
            {"lib.rs": "mod auth; mod router;", "router.rs": "use crate::auth;\nfn f() { auth::identify(); }", "auth.rs": "pub fn identify() {}"},
            "router", "auth", "identify",
        )

    def test_nested_module_imported_by_name(self):
        self.assert_edge(
            {
                "lib.rs": "mod crd; mod handlers;",
                "handlers.rs": "use crate::crd;\nfn f() { crd::lifecycle::check_creatable(); }",
                "crd/mod.rs": "pub mod lifecycle;",
                "crd/lifecycle.rs": "pub fn check_creatable() {}",
            },
            "handlers", "crd::lifecycle", "check_creatable",
        )

    def test_super_module_imported_then_used(self):
        self.assert_edge(
            {"lib.rs": "mod p;", "p/mod.rs": "mod a; mod x;", "p/a.rs": "use super::x;\nfn f() { x::y(); }", "p/x.rs": "pub fn y() {}"},
            "p::a", "p::x", "y",
        )

    def test_grouped_use_and_renames(self):
        files = {
            "lib.rs": "mod a; mod b; mod m;",
            "m.rs": "use crate::{a, b::c as d};\nfn f() { a::one(); d::two(); }",
            "a.rs": "pub fn one() {}",
            "b/mod.rs": "pub mod c;",
            "b/c.rs": "pub fn two() {}",
        }
        self.assert_edge(files, "m", "a", "one")
        self.assert_edge(files, "m", "b::c", "two")

    def test_reexport_is_followed_to_the_defining_file(self):
        files = {
            "lib.rs": "mod p; mod user;",
            "p/mod.rs": "mod inner;\npub(crate) use inner::Thing;",
            "p/inner.rs": "pub struct Thing;",
            "user.rs": "use crate::p::Thing;",
        }
        self.assert_edge(files, "user", "p::inner", "Thing")
        with FakeCrate(files) as c:
            graph = c.graph()
        self.assertNotIn(m("p::inner"), graph[m("p")], "a re-export alone is not an edge")

    def test_glob_import_brings_siblings_into_scope(self):
        self.assert_edge(
            {"lib.rs": "mod p;", "p/mod.rs": "mod a; mod b;", "p/a.rs": "use super::*;\nfn f() { b::g(); }", "p/b.rs": "pub fn g() {}"},
            "p::a", "p::b", "g",
        )

    def test_comments_strings_and_test_code_are_not_edges(self):
        self.assert_no_edges(
            {
                "lib.rs": "mod a; mod b;",
                "a.rs": (
                    "// crate::b::g\n/* crate::b::g /* nested */ crate::b::g */\n"
                    "const S: &str = \"crate::b::g\"; const R: &str = r#\"b::g \"quoted\"\"#;\n"
                    "const C: char = '\"'; fn lt<'a>(x: &'a str) -> &'a str { x }\n"
                    "#[cfg(test)]\nmod tests {\n    use crate::b::g;\n}\n"
                    "#[cfg(test)]\nuse crate::b::g;\n"
                    "#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod more;\n"
                ),
                "a_tests.rs": "use crate::b::g;",
                "b.rs": "pub fn g() {}",
            }
        )

    def test_code_after_a_test_module_still_counts(self):
        self.assert_edge(
            {"lib.rs": "mod a; mod b;", "a.rs": "#[cfg(test)]\nmod tests {}\nfn f() { crate::b::g(); }", "b.rs": "pub fn g() {}"},
            "a", "b", "g",
        )

    def test_external_crates_and_std_are_not_edges(self):
        self.assert_no_edges(
            {"lib.rs": "mod a; mod b;", "a.rs": "use std::sync::Arc; use serde_json::Value; fn f() { ::b::g(); }", "b.rs": ""}
        )


class Circles(unittest.TestCase):
    PLANTED = {
        "lib.rs": "mod auth; mod discovery; mod router;",
        "auth/mod.rs": "mod reviews;\npub fn identify() { reviews::serve(); }",
        "auth/reviews.rs": "pub fn serve() { crate::router::decode_body(); }",
        "router.rs": "use crate::discovery;\npub fn decode_body() { discovery::verbs(); }",
        "discovery.rs": "use crate::auth;\npub fn verbs() { auth::identify(); }",
    }

    def test_planted_circle_is_reported_with_files_and_names(self):
        with FakeCrate(self.PLANTED) as c:
            bad, lines = c.check()
        self.assertEqual(bad, 1)
        text = "\n".join(lines)
        for step in (
            "auth/mod.rs -> auth/reviews.rs  (serve)",
            "auth/reviews.rs -> router.rs  (decode_body)",
            "router.rs -> discovery.rs  (verbs)",
            "discovery.rs -> auth/mod.rs  (identify)",
        ):
            self.assertIn(step, text)

    def test_two_files_using_each_other(self):
        files = {
            "lib.rs": "mod crd; mod handlers;",
            "handlers.rs": "use crate::crd;\npub fn delete() { crd::lifecycle::instance_removed(); }",
            "crd/mod.rs": "pub mod lifecycle;",
            "crd/lifecycle.rs": "use crate::handlers;\npub fn instance_removed() {}\nfn f() { handlers::delete(); }",
        }
        with FakeCrate(files) as c:
            bad, lines = c.check()
        self.assertEqual(bad, 1, lines)
        self.assertIn("crd/lifecycle.rs -> handlers.rs  (delete)", "\n".join(lines))

    def test_clean_tree_has_no_circle(self):
        files = dict(self.PLANTED)
        files["discovery.rs"] = "pub fn verbs() {}"
        with FakeCrate(files) as c:
            bad, lines = c.check()
        self.assertEqual((bad, lines), (0, []))

    def test_parent_that_only_declares_and_reexports_is_not_a_circle(self):
        files = {
            "lib.rs": "mod p;",
            "p/mod.rs": "mod a;\npub use a::A;\npub struct Error;",
            "p/a.rs": "use super::Error;\npub struct A(Error);",
        }
        with FakeCrate(files) as c:
            self.assertEqual(c.check()[0], 0)

    def test_parent_calling_a_child_that_uses_it_is_a_circle(self):
        files = {
            "lib.rs": "mod p;",
            "p/mod.rs": "mod a;\npub struct Error;\nfn f() { a::run(); }",
            "p/a.rs": "use super::Error;\npub fn run() -> Option<Error> { None }",
        }
        with FakeCrate(files) as c:
            self.assertEqual(c.check()[0], 1)

    def test_folders_using_each_other_through_different_files_are_a_circle(self):
        # No two files use each other, but `auth/` and `shared.rs` do: an arrow back up.
        files = {
            "lib.rs": "mod auth; mod shared;",
            "shared.rs": "use crate::auth::Tls;\npub struct Shared(Tls);",
            "auth/mod.rs": "mod tls; mod impersonation;\npub use tls::Tls;",
            "auth/tls.rs": "pub struct Tls;",
            "auth/impersonation.rs": "use crate::shared::Shared;\nfn f(_: &Shared) {}",
        }
        with FakeCrate(files) as c:
            bad, lines = c.check()
        self.assertEqual(bad, 1, lines)
        text = "\n".join(lines)
        self.assertIn("between folders", text)
        self.assertIn("auth/ <-> shared.rs", text)
        self.assertIn("auth/impersonation.rs -> shared.rs  (Shared)", text)
        self.assertIn("shared.rs -> auth/tls.rs  (Tls)", text)

    def test_nested_folders_are_checked_below_their_parent(self):
        files = {
            "lib.rs": "mod api;",
            "api/mod.rs": "mod kinds; mod rules;",
            "api/kinds/mod.rs": "mod node;",
            "api/kinds/node.rs": "use crate::api::rules::check;\npub fn node() { check(); }",
            "api/rules/mod.rs": "mod check; mod other;\npub use check::check;",
            "api/rules/check.rs": "pub fn check() {}",
            "api/rules/other.rs": "fn f() { crate::api::kinds::node::node(); }",
        }
        with FakeCrate(files) as c:
            bad, lines = c.check()
        self.assertEqual(bad, 1, lines)
        self.assertIn("between folders in", lines[0])
        self.assertIn("api/kinds/ <-> api/rules/", lines[0])

    def test_a_file_circle_across_folders_is_reported_once(self):
        files = {
            "lib.rs": "mod crd; mod handlers;",
            "handlers.rs": "pub fn delete() { crate::crd::lifecycle::removed(); }",
            "crd/mod.rs": "pub mod lifecycle;",
            "crd/lifecycle.rs": "pub fn removed() {}\nfn f() { crate::handlers::delete(); }",
        }
        with FakeCrate(files) as c:
            bad, lines = c.check()
        self.assertEqual(bad, 1, lines)
        self.assertNotIn("between folders", "\n".join(lines))

    def test_one_way_folders_are_clean(self):
        files = {
            "lib.rs": "mod auth; mod shared;",
            "shared.rs": "use crate::auth::Tls;\npub struct Shared(Tls);",
            "auth/mod.rs": "mod tls;\npub use tls::Tls;",
            "auth/tls.rs": "pub struct Tls;",
        }
        with FakeCrate(files) as c:
            self.assertEqual(c.check(), (0, []))

    def test_a_known_circle_waits_and_a_stale_known_line_fails(self):
        files = {"lib.rs": "mod a; mod b;", "a.rs": "fn f() { crate::b::g(); }", "b.rs": "pub fn g() { crate::a::f(); }"}
        with FakeCrate(files) as c:
            key = f"{c.root}: a.rs <-> b.rs"
            self.assertEqual(cycles_check.report([c.root], {})[0], 1)
            status, lines = cycles_check.report([c.root], {key: "being fixed"})
            self.assertEqual(status, 0, lines)
            self.assertIn("known, waiting", lines[-1])
            status, lines = cycles_check.report([c.root], {key: "x", f"{c.root}: gone.rs <-> b.rs": "y"})
            self.assertEqual(status, 1)
            self.assertTrue(any("circle that is gone" in line for line in lines))


class LongFiles(unittest.TestCase):
    def test_only_non_test_files_over_the_limit_fail(self):
        long = "fn f() {}\n" * 601
        files = {
            "crate/src/lib.rs": "mod big; mod ok; mod x;\n",
            "crate/src/big.rs": long,
            "crate/src/ok.rs": "fn f() {}\n" * 600,
            "crate/src/x.rs": "#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;\n",
            "crate/src/x_tests.rs": long,
            "crate/src/printers/tests.rs": long,
            "crate/tests/suite.rs": long,
            "crate/benches/bench.rs": long,
            "target/debug/build/gen.rs": long,
        }
        with FakeCrate(files) as c:
            found = long_check.long_files(c.root)
        self.assertEqual(found, [(os.path.join("crate", "src", "big.rs"), 601)])


if __name__ == "__main__":
    unittest.main()
