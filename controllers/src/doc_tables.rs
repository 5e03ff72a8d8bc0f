//! Keeps the "behaviour → test" tables in the controllers' module docs true: every test a table
//! cites must exist, so renaming or deleting a test without fixing the table fails here.
//!
//! A table is one whose header ends in `| Test |`. In its last column, `m::tests::name` is a test in
//! the controller's file `m.rs` (or the `m_tests.rs` it includes), `tests::name` one in `mod.rs`, `crate::m::tests::name` one in
//! `src/m.rs`, `tests/x.rs::name` one in `tests/x.rs`; a bare `name` is in the file the cell
//! named last, or else in the `tests/*.rs` files the paragraph above the table names. `{a, b}`
//! lists several, and `prefix_*` wants at least one test whose name starts with `prefix_`.

use std::fs;
use std::path::{Path, PathBuf};

const CONTROLLERS: [&str; 4] = ["node", "node_lifecycle", "route", "service"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files a module path names, relative to the controller's folder `dir`.
fn module_files(dir: &Path, module: &str) -> Vec<PathBuf> {
    if module == "self" {
        return vec![dir.join("mod.rs")];
    }
    let (base, module) = match module.strip_prefix("crate::") {
        Some(rest) => (root().join("src"), rest),
        None => (dir.to_path_buf(), module),
    };
    let path = base.join(module.replace("::", "/"));
    let mut files = vec![
        path.with_extension("rs"),
        path.join("mod.rs"),
        PathBuf::from(format!("{}_tests.rs", path.display())),
    ];
    files.retain(|f| f.is_file());
    files
}

/// `a::{b, c}` → [`a::b`, `a::c`].
fn expand(token: &str) -> Vec<String> {
    match token.split_once('{') {
        Some((head, rest)) => rest
            .trim_end_matches('}')
            .split(',')
            .map(|t| format!("{head}{}", t.trim()))
            .collect(),
        None => vec![token.to_owned()],
    }
}

fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Whether a test called `name` (or, for `prefix_*`, one starting with `prefix_`) is in `files`.
fn defined(files: &[PathBuf], name: &str) -> bool {
    let want = match name.strip_suffix('*') {
        Some(prefix) => format!("fn {prefix}"),
        None => format!("fn {name}("),
    };
    files
        .iter()
        .any(|f| fs::read_to_string(f).is_ok_and(|text| text.contains(&want)))
}

/// Every cited test that does not exist, as `file: token`.
fn missing_in(controller: &str) -> Vec<String> {
    let dir = root().join("src").join(controller);
    let doc = fs::read_to_string(dir.join("mod.rs")).expect("the controller's mod.rs");
    let mut missing = Vec::new();
    let mut in_table = false;
    let mut defaults: Vec<PathBuf> = Vec::new();
    let mut cited = 0;
    for line in doc.lines().filter_map(|l| l.strip_prefix("//!")) {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            if !line.is_empty() {
                defaults = backticked(line)
                    .into_iter()
                    .filter(|t| t.starts_with("tests/"))
                    .map(|t| root().join(t))
                    .collect();
            }
            continue;
        }
        if line.ends_with("| Test |") {
            in_table = true;
            continue;
        }
        let cell = line.trim_end_matches('|').rsplit('|').next().unwrap_or("");
        if !in_table || cell.trim_start().starts_with("---") {
            continue;
        }
        let mut files = defaults.clone();
        for token in backticked(cell).into_iter().flat_map(expand) {
            let name = match token.split_once(".rs::") {
                Some((file, name)) => {
                    files = vec![root().join(format!("{file}.rs"))];
                    name.to_owned()
                }
                None => match token
                    .strip_prefix("tests::")
                    .map(|name| ("self", name))
                    .or_else(|| token.split_once("::tests::"))
                {
                    Some((module, name)) => {
                        files = module_files(&dir, module);
                        name.rsplit("::").next().unwrap_or(name).to_owned()
                    }
                    None => token.clone(),
                },
            };
            cited += 1;
            if files.is_empty() || !defined(&files, &name) {
                missing.push(format!("{controller}/mod.rs: `{token}`"));
            }
        }
    }
    assert!(
        cited > 0,
        "{controller}/mod.rs cites no test: is the table still there?"
    );
    missing
}

#[test]
fn every_test_a_behaviour_table_cites_exists() {
    let missing: Vec<String> = CONTROLLERS.iter().flat_map(|c| missing_in(c)).collect();
    assert!(
        missing.is_empty(),
        "module docs cite tests that do not exist (rename them in the table too):\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_renamed_test_is_caught() {
    let dir = root().join("src/route");
    assert!(defined(&module_files(&dir, "plan"), "plan_table"));
    assert!(!defined(&module_files(&dir, "plan"), "no_such_test"));
    assert!(defined(&module_files(&dir, "crate::retry"), "retr*"));
    assert_eq!(expand("m::tests::{a, b}"), ["m::tests::a", "m::tests::b"]);
}
