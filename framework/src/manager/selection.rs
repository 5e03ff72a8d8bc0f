//! The `--controllers` flag, parsed and decided exactly as upstream kube-controller-manager does, so an
//! operator's existing manifests select the same controllers here.
//!
//! Upstream splits this over `options/generic.go` (`ApplyTo` normalises aliases, `Validate` rejects
//! unknown names) and `app/helper.go` (`IsControllerEnabled`). We do both in
//! [`ControllerSelection::parse`], which either returns a selection that can only answer questions
//! about known controllers, or every problem at once.
//!
//! Rules, in upstream order:
//! - an entry is `*`, `NAME` or `-NAME`; a leading `-` is stripped, an alias is mapped to its canonical
//!   name and the `-` re-attached; `*` is left alone and `-*` is an unknown controller named `*`;
//! - an unknown name fails with `"NAME" is not in the list of known controllers` (the name as typed,
//!   minus the dash); all such errors are collected and reported together;
//! - deciding a name: the first entry equal to `NAME` enables it, the first equal to `-NAME` disables
//!   it; with no such entry the name is enabled only if the list holds `*` and it is not
//!   disabled by default. Without `*`, only the named controllers run.

use std::collections::HashMap;
use std::fmt;

/// One controller the manager knows how to start, so names and aliases can be checked before
/// anything runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownController {
    /// Canonical name, the map key upstream (e.g. `cloud-node-controller`).
    pub name: String,
    /// Legacy names accepted on the command line (e.g. `cloud-node`); never removed upstream.
    pub aliases: Vec<String>,
    /// Not started by `*`; only an explicit `NAME` entry enables it.
    pub disabled_by_default: bool,
}

/// The controllers an operator may name in `--controllers`, built from the initializer map so the
/// flag can never drift from what the binary can actually start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownControllers {
    controllers: Vec<KnownController>,
    /// alias or canonical name -> index into `controllers`.
    lookup: HashMap<String, usize>,
}

impl KnownControllers {
    /// An empty set, to be filled with [`KnownControllers::add`] or [`KnownControllers::with`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a controller; a later registration of the same canonical name replaces the earlier
    /// one, so an embedder can override a stock controller's defaults.
    pub fn add(&mut self, name: &str, aliases: &[&str], disabled_by_default: bool) -> &mut Self {
        let entry = KnownController {
            name: name.to_string(),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            disabled_by_default,
        };
        let index = match self.controllers.iter().position(|c| c.name == name) {
            Some(i) => {
                self.controllers[i] = entry;
                i
            }
            None => {
                self.controllers.push(entry);
                self.controllers.len() - 1
            }
        };
        self.lookup.insert(name.to_string(), index);
        for alias in aliases {
            self.lookup.insert(alias.to_string(), index);
        }
        self
    }

    /// Builder form of [`KnownControllers::add`] for tables written inline.
    pub fn with(mut self, name: &str, aliases: &[&str], disabled_by_default: bool) -> Self {
        self.add(name, aliases, disabled_by_default);
        self
    }

    /// Maps a canonical name or an alias to the canonical name, so callers can accept either.
    pub fn canonical(&self, name_or_alias: &str) -> Option<&str> {
        self.lookup
            .get(name_or_alias)
            .map(|&i| self.controllers[i].name.as_str())
    }

    /// Canonical names in registration order, for error messages and `--help`.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.controllers.iter().map(|c| c.name.as_str())
    }

    /// Every known controller, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &KnownController> {
        self.controllers.iter()
    }

    fn get(&self, canonical: &str) -> Option<&KnownController> {
        self.lookup.get(canonical).map(|&i| &self.controllers[i])
    }
}

/// One normalised `--controllers` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    All,
    Enable(String),
    Disable(String),
}

/// The parsed `--controllers` list: answers "does this controller run?" with upstream's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSelection {
    entries: Vec<Entry>,
    known: KnownControllers,
}

/// One entry of `--controllers` that names no known controller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not in the list of known controllers")]
pub struct UnknownController {
    /// The name as typed, minus a leading dash.
    pub name: String,
}

/// Every problem in a `--controllers` list, reported together so the operator fixes them in one go.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SelectionErrors {
    /// Unknown entries, in the order they were given.
    pub unknown: Vec<UnknownController>,
    /// Canonical names that would have been accepted, so the message says what to write instead.
    pub known: Vec<String>,
}

/// Problems named in one message at most; the rest are counted (a list of 99,000 typos made a
/// 5 MB line).
const SHOWN: usize = 10;

/// The first [`SHOWN`] of `problems` joined by `separator`, then how many more there were.
pub(super) fn listed(problems: &[String], separator: &str) -> String {
    let mut text = problems
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(separator);
    if problems.len() > SHOWN {
        text.push_str(&format!("{separator}and {} more", problems.len() - SHOWN));
    }
    text
}

impl fmt::Display for SelectionErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errors: Vec<String> = self.unknown.iter().map(|e| e.to_string()).collect();
        write!(
            f,
            "{}; known controllers: {} (use '*' for all, '-NAME' to disable one)",
            listed(&errors, ", "),
            self.known.join(", ")
        )
    }
}

impl ControllerSelection {
    /// Parses and validates `--controllers` entries (e.g. `["*", "-route", "cloud-node"]`), mapping
    /// aliases to canonical names; fails with every unknown entry at once.
    pub fn parse(entries: &[String], known: &KnownControllers) -> Result<Self, SelectionErrors> {
        let mut parsed = Vec::with_capacity(entries.len());
        let mut unknown = Vec::new();
        for raw in entries {
            if raw == "*" {
                parsed.push(Entry::All);
                continue;
            }
            let (disable, name) = match raw.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, raw.as_str()),
            };
            match known.canonical(name) {
                Some(canonical) if disable => parsed.push(Entry::Disable(canonical.to_string())),
                Some(canonical) => parsed.push(Entry::Enable(canonical.to_string())),
                None => unknown.push(UnknownController {
                    name: name.to_string(),
                }),
            }
        }
        if !unknown.is_empty() {
            return Err(SelectionErrors {
                unknown,
                known: known.names().map(str::to_string).collect(),
            });
        }
        Ok(Self {
            entries: parsed,
            known: known.clone(),
        })
    }

    /// The upstream default `--controllers=*`: every controller not disabled by default.
    pub fn all(known: &KnownControllers) -> Self {
        Self {
            entries: vec![Entry::All],
            known: known.clone(),
        }
    }

    /// Whether the controller runs; accepts a canonical name or an alias. Unknown names are never
    /// enabled.
    pub fn is_enabled(&self, name: &str) -> bool {
        let Some(canonical) = self.known.canonical(name) else {
            return false;
        };
        for entry in &self.entries {
            match entry {
                Entry::Enable(n) if n == canonical => return true,
                Entry::Disable(n) if n == canonical => return false,
                _ => {}
            }
        }
        let star = self.entries.contains(&Entry::All);
        star && self
            .known
            .get(canonical)
            .is_some_and(|c| !c.disabled_by_default)
    }

    /// The enabled canonical names in registration order, for start-up and logging.
    pub fn enabled(&self) -> Vec<&str> {
        self.known.names().filter(|n| self.is_enabled(n)).collect()
    }
}
