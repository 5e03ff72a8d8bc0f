//! `--controllers` parsing against upstream's rules (kubernetes/controller-manager options/generic.go
//! and app/helper.go `IsControllerEnabled`).

use controller_manager::manager::{ControllerSelection, KnownControllers};
use proptest::prelude::*;

fn ccm() -> KnownControllers {
    KnownControllers::new()
        .with("cloud-node-controller", &["cloud-node"], false)
        .with(
            "cloud-node-lifecycle-controller",
            &["cloud-node-lifecycle"],
            false,
        )
        .with("service-lb-controller", &["service"], false)
        .with("node-route-controller", &["route"], false)
        .with("node-ipam-controller", &["nodeipam"], true)
}

fn list(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn parse(items: &[&str]) -> ControllerSelection {
    ControllerSelection::parse(&list(items), &ccm()).unwrap()
}

#[test]
fn star_enables_everything_not_disabled_by_default() {
    let s = parse(&["*"]);
    assert_eq!(
        s.enabled(),
        vec![
            "cloud-node-controller",
            "cloud-node-lifecycle-controller",
            "service-lb-controller",
            "node-route-controller"
        ]
    );
    assert!(!s.is_enabled("node-ipam-controller"));
    assert_eq!(ControllerSelection::all(&ccm()), s);
}

#[test]
fn star_minus_alias_disables_the_canonical_controller() {
    let s = parse(&["*", "-route"]);
    assert!(!s.is_enabled("node-route-controller"));
    assert!(!s.is_enabled("route"));
    assert!(s.is_enabled("service-lb-controller"));
}

#[test]
fn without_star_only_named_controllers_run() {
    let s = parse(&["cloud-node", "service-lb-controller"]);
    assert_eq!(
        s.enabled(),
        vec!["cloud-node-controller", "service-lb-controller"]
    );
}

#[test]
fn named_controller_disabled_by_default_can_be_enabled() {
    let s = parse(&["*", "nodeipam"]);
    assert!(s.is_enabled("node-ipam-controller"));
}

#[test]
fn first_matching_entry_wins() {
    assert!(parse(&["route", "-route"]).is_enabled("route"));
    assert!(!parse(&["-node-route-controller", "route", "*"]).is_enabled("route"));
}

#[test]
fn empty_list_enables_nothing() {
    assert!(parse(&[]).enabled().is_empty());
}

#[test]
fn unknown_names_are_all_reported_with_upstream_text_and_the_known_list() {
    let err = ControllerSelection::parse(&list(&["*", "-bogus", "nope", "-*", "route"]), &ccm())
        .unwrap_err();
    let names: Vec<&str> = err.unknown.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, vec!["bogus", "nope", "*"]);
    assert_eq!(
        err.unknown[0].to_string(),
        r#""bogus" is not in the list of known controllers"#
    );
    let text = err.to_string();
    assert!(
        text.contains(r#""nope" is not in the list of known controllers"#),
        "{text}"
    );
    assert!(
        text.contains(r#""*" is not in the list of known controllers"#),
        "{text}"
    );
    for known in ccm().names() {
        assert!(text.contains(known), "{text} should list {known}");
    }
}

#[test]
fn unknown_name_is_never_enabled() {
    assert!(!parse(&["*"]).is_enabled("bogus"));
}

/// Upstream's algorithm on plain strings: normalise (`ApplyTo`), validate, then `IsControllerEnabled`.
fn upstream_model(entries: &[String], known: &KnownControllers, name: &str) -> Option<bool> {
    let mut normalised = Vec::new();
    for e in entries {
        if e == "*" {
            normalised.push(e.clone());
            continue;
        }
        let (dash, bare) = match e.strip_prefix('-') {
            Some(b) => ("-", b),
            None => ("", e.as_str()),
        };
        let canonical = known.canonical(bare)?;
        normalised.push(format!("{dash}{canonical}"));
    }
    for e in &normalised {
        if e == name {
            return Some(true);
        }
        if e.strip_prefix('-') == Some(name) {
            return Some(false);
        }
    }
    let disabled_by_default = known
        .iter()
        .any(|c| c.name == name && c.disabled_by_default);
    Some(normalised.iter().any(|e| e == "*") && !disabled_by_default)
}

fn entry() -> impl Strategy<Value = String> {
    let words = prop::sample::select(vec![
        "*",
        "cloud-node",
        "cloud-node-controller",
        "service",
        "service-lb-controller",
        "route",
        "node-route-controller",
        "nodeipam",
        "node-ipam-controller",
        "cloud-node-lifecycle",
        "unknown",
    ]);
    (any::<bool>(), words).prop_map(|(dash, w)| if dash { format!("-{w}") } else { w.to_string() })
}

proptest! {
    #[test]
    fn matches_upstream_model(entries in prop::collection::vec(entry(), 0..8)) {
        let known = ccm();
        let parsed = ControllerSelection::parse(&entries, &known);
        let has_unknown = entries.iter().any(|e| {
            e != "*" && known.canonical(e.strip_prefix('-').unwrap_or(e)).is_none()
        });
        prop_assert_eq!(parsed.is_err(), has_unknown);
        match parsed {
            Err(err) => {
                let expected = entries.iter().filter(|e| {
                    e.as_str() != "*" && known.canonical(e.strip_prefix('-').unwrap_or(e)).is_none()
                }).count();
                prop_assert_eq!(err.unknown.len(), expected);
            }
            Ok(sel) => {
                for name in known.names() {
                    prop_assert_eq!(Some(sel.is_enabled(name)), upstream_model(&entries, &known, name));
                }
            }
        }
    }

    #[test]
    fn a_leading_entry_decides(entries in prop::collection::vec(entry(), 0..6), pick in 0usize..5, disable in any::<bool>()) {
        let known = ccm();
        let name = known.names().nth(pick).unwrap().to_string();
        let mut all = vec![if disable { format!("-{name}") } else { name.clone() }];
        all.extend(entries.into_iter().filter(|e| e.trim_start_matches('-') != "unknown" && e != "-*"));
        let sel = ControllerSelection::parse(&all, &known).unwrap();
        prop_assert_eq!(sel.is_enabled(&name), !disable);
    }
}
