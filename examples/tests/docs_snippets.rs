//! The docs show code that builds and runs: every `rust` block of `docs/embedding.md` and
//! `docs/writing-a-provider.md` appears verbatim in a compiled example or test (examples/, or
//! the framework's `builder_crd.rs` and `builder_mirror.rs` tests), and the
//! out-of-tree `Cargo.toml` of `docs/embedding.md` asks for the versions this workspace builds
//! with (and kube's features) and has its profiles, so a checkout's build is reused.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap()
}

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).unwrap());
        }
    }
}

fn blocks<'a>(doc: &'a str, lang: &str) -> Vec<&'a str> {
    doc.split(&format!("```{lang}\n"))
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default())
        .collect()
}

#[test]
fn rust_blocks_are_the_real_code() {
    let mut code = Vec::new();
    sources(&root().join("examples/src"), &mut code);
    sources(&root().join("examples/tests"), &mut code);
    code.push(read("framework/tests/builder_crd.rs"));
    code.push(read("framework/tests/builder_mirror.rs"));
    for doc in ["docs/embedding.md", "docs/writing-a-provider.md"] {
        let text = read(doc);
        let rust = blocks(&text, "rust");
        assert!(rust.len() >= 3, "{doc} shows its code");
        for block in rust {
            assert!(
                code.iter().any(|s| s.contains(block)),
                "{doc} shows code that is not in examples/ (or framework/tests/builder_{{crd,mirror}}.rs):\n{block}"
            );
        }
    }
}

/// `name = "v"` or `name = { version = "v", ... }` → (name, line).
fn dependency_lines(toml: &str) -> Vec<(&str, &str)> {
    toml.lines()
        .filter_map(|l| Some((l.split_once(" = ")?.0.trim(), l)))
        .filter(|(name, _)| !name.starts_with('[') && !name.contains(' '))
        .collect()
}

fn quoted_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split('"').nth(1)
}

fn version(line: &str) -> Option<&str> {
    let value = line.split_once(" = ")?.1.trim();
    if value.starts_with('"') {
        value.split('"').nth(1)
    } else {
        quoted_after(line, "version")
    }
}

fn features(line: &str) -> Vec<&str> {
    let Some(start) = line.find("features = [") else {
        return Vec::new();
    };
    let list = &line[start + "features = [".len()..];
    let list = list.split(']').next().unwrap_or_default();
    list.split(',')
        .map(|f| f.trim().trim_matches('"'))
        .filter(|f| !f.is_empty())
        .collect()
}

/// The `[profile...]` sections of a manifest: each header with its settings, comments left out.
fn profiles(toml: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in toml.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            out.push((line.to_string(), Vec::new()));
        } else if let Some((_, settings)) = out.last_mut() {
            settings.push(line.to_string());
        }
    }
    out.retain(|(header, _)| header.starts_with("[profile"));
    out
}

/// The manifest up to its first profile section.
fn before_profiles(toml: &str) -> &str {
    toml.split("\n[profile").next().unwrap_or(toml)
}

#[test]
fn out_of_tree_manifest_matches_the_workspace() {
    let doc = read("docs/embedding.md");
    let toml = blocks(&doc, "toml");
    assert_eq!(toml.len(), 1, "one Cargo.toml to paste");
    let workspace = read("Cargo.toml");
    // Cargo keys each compiled crate by its profile: other settings rebuild every dependency.
    assert_eq!(
        profiles(toml[0]),
        profiles(&workspace),
        "the snippet's profiles are the workspace's"
    );
    let pinned = dependency_lines(before_profiles(&workspace));
    let deps = dependency_lines(before_profiles(toml[0]));
    assert!(deps.len() >= 10, "{deps:?}");
    for (name, line) in deps {
        if ["name", "version", "edition"].contains(&name) {
            continue;
        }
        if let Some(path) = quoted_after(line, "path") {
            let inside = path.trim_start_matches("../cloud-controller-manager/");
            assert!(root().join(inside).join("Cargo.toml").exists(), "{line}");
            continue;
        }
        let Some((_, ours)) = pinned.iter().find(|(n, _)| *n == name) else {
            // Named only to unify features with the checkout's build (tokio-stream): it must be
            // a crate the checkout's lock resolves.
            assert!(
                read("Cargo.lock").contains(&format!("name = \"{name}\"")),
                "{name} is neither a workspace dependency nor in Cargo.lock"
            );
            continue;
        };
        assert_eq!(
            version(line),
            version(ours),
            "{name}: docs say {line}, workspace {ours}"
        );
        // kube's features pick its TLS stack and the runtime: ask for at least ours.
        if name == "kube" {
            for feature in features(ours) {
                assert!(
                    features(line).contains(&feature),
                    "kube needs {feature}: {line}"
                );
            }
        }
    }
}
