//! `--controllers`: any comma-separated list must select or be rejected with every unknown entry,
//! and a valid selection must answer consistently.
#![no_main]

use controller_manager::manager::{ControllerSelection, KnownControllers};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let known = KnownControllers::new()
        .with("cloud-node-controller", &["cloud-node"], false)
        .with("service-lb-controller", &["service"], false)
        .with("node-route-controller", &["route"], false)
        .with("opt-in", &[], true);
    let entries: Vec<String> = text.split(',').map(str::to_string).collect();
    match ControllerSelection::parse(&entries, &known) {
        Ok(selection) => {
            for name in selection.enabled() {
                assert!(
                    known.canonical(name).is_some(),
                    "{name:?} enabled but unknown"
                );
                assert!(selection.is_enabled(name));
            }
            if known.canonical(text).is_none() {
                assert!(!selection.is_enabled(text), "unknown name {text:?} enabled");
            }
        }
        Err(e) => {
            assert!(!e.unknown.is_empty());
            let _ = e.to_string();
        }
    }
});
