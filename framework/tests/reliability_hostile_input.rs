//! Hostile operator input to the framework's parsers (issue 9): `--controllers` lists, Go
//! durations and whole generic flag sets that are malformed, huge or odd must give a clear error
//! (saying what to write instead), never a panic, and never a silently wrong value.
//!
//! The inputs below include the seeds and findings of the cargo-fuzz targets in `framework/fuzz/`
//! (`controllers_flag`, `go_duration`), kept here so they run in CI without nightly features.

use std::time::Duration;

use clap::Parser;
use controller_manager::manager::{ControllerSelection, KnownControllers};
use controller_manager::options::{GenericOptions, GoDuration};

fn known() -> KnownControllers {
    KnownControllers::new()
        .with("cloud-node-controller", &["cloud-node"], false)
        .with("service-lb-controller", &["service"], false)
        .with("node-route-controller", &["route"], false)
        .with("opt-in", &[], true)
}

fn parse(list: &str) -> Result<ControllerSelection, String> {
    let entries: Vec<String> = list.split(',').map(str::to_string).collect();
    ControllerSelection::parse(&entries, &known()).map_err(|e| e.to_string())
}

#[test]
fn controllers_flag_rejects_every_unknown_entry_at_once_and_says_what_is_known() {
    for bad in [
        "",
        "-",
        "--",
        "**",
        "-*",
        "*,-",
        "cloud-node,,route",
        " cloud-node",
        "CLOUD-NODE",
        "cloud-node\0",
        "clöud-nöde",
        "🙂",
        "-opt-in-",
    ] {
        let err = parse(bad).expect_err(bad);
        assert!(
            err.contains("known controllers: cloud-node-controller"),
            "{bad:?}: {err}"
        );
    }
    let err = parse("a,b,*,c").expect_err("three unknown");
    for name in ["\"a\"", "\"b\"", "\"c\""] {
        assert!(err.contains(name), "{err}");
    }
}

#[test]
fn controllers_flag_survives_huge_lists() {
    let many = vec!["cloud-node"; 100_000].join(",");
    let sel = parse(&many).expect("valid");
    assert!(sel.is_enabled("cloud-node-controller"));
    assert!(!sel.is_enabled("service-lb-controller"));
    let long_name = "x".repeat(1 << 20);
    let err = parse(&long_name).expect_err("unknown");
    assert!(
        err.len() > long_name.len(),
        "the bad entry is named in full"
    );
}

#[test]
fn controllers_flag_valid_odd_forms_mean_what_upstream_means() {
    let sel = parse("*,-route,-opt-in").expect("valid");
    assert_eq!(
        sel.enabled(),
        vec!["cloud-node-controller", "service-lb-controller"]
    );
    // Upstream: the first entry naming a controller wins.
    let sel = parse("route,-route").expect("valid");
    assert!(sel.is_enabled("route"));
    let sel = parse("-route,route,*").expect("valid");
    assert!(!sel.is_enabled("route"));
    assert!(!sel.is_enabled("no-such-controller"));
}

#[test]
fn go_durations_reject_malformed_and_overflowing_values_with_a_reason() {
    for (bad, reason) in [
        ("", "empty"),
        ("   ", "empty"),
        ("-1s", "negative"),
        ("--1s", "negative"),
        ("1", "missing unit"),
        ("s", "missing number"),
        ("1.2.3s", "malformed"),
        (".s", "malformed"),
        ("1d", "unknown unit"),
        ("1S", "unknown unit"),
        ("1e9s", "unknown unit"),
        ("10 s", "unknown unit"),
        ("99999999999999999999999999999999999999999h", "too large"),
        ("9999999999999999999999h", "too large"),
        ("18446744073709551616s", "too large"),
        // One nanosecond past Go's int64 range, and a value that used to parse (found in review)
        // and could overflow `Instant + Duration` in timers.
        ("2562047h47m16.854775808s", "too large"),
        ("5124095576030431h", "too large"),
    ] {
        let err = bad.parse::<GoDuration>().expect_err(bad).to_string();
        assert!(err.contains(reason), "{bad:?}: {err}");
        assert!(err.contains("expected e.g."), "{bad:?}: {err}");
    }
}

#[test]
fn go_durations_parse_odd_but_valid_values_and_round_trip() {
    for (text, want) in [
        ("0", Duration::ZERO),
        ("+5s", Duration::from_secs(5)),
        (".5s", Duration::from_millis(500)),
        ("1.s", Duration::from_secs(1)),
        ("1h1h", Duration::from_secs(7200)),
        ("1µs", Duration::from_micros(1)),
        ("1μs", Duration::from_micros(1)),
        (
            "0.000000000000000000000000001h",
            Duration::ZERO, // below a nanosecond: truncated, as Go does
        ),
        // Go's largest duration (i64::MAX ns).
        (
            "2562047h47m16.854775807s",
            Duration::new(9_223_372_036, 854_775_807),
        ),
    ] {
        let got = text.parse::<GoDuration>().expect(text);
        assert_eq!(got.get(), want, "{text:?}");
        let printed = got.to_string();
        assert_eq!(printed.parse::<GoDuration>().expect(&printed), got);
    }
}

#[derive(Parser, Debug)]
struct Flags {
    #[command(flatten)]
    generic: GenericOptions,
}

#[test]
fn bad_generic_flags_are_reported_not_panicked_on() {
    for args in [
        vec!["--leader-elect-lease-duration=forever"],
        vec!["--leader-elect-lease-duration=-1s"],
        vec!["--kube-api-qps=NaN-ish"],
        vec!["--kube-api-burst=-5"],
        vec!["--leader-elect=maybe"],
        vec!["--no-such-flag"],
        vec!["--min-resync-period=1e3s"],
        vec!["--secure-port=70000"],
    ] {
        let argv = std::iter::once("test").chain(args.iter().copied());
        let err = Flags::try_parse_from(argv).expect_err(&args.join(" "));
        assert!(!err.to_string().is_empty());
    }
    // Values that parse but make no sense are caught by validation, every one of them at once.
    let flags = Flags::try_parse_from([
        "test",
        "--leader-elect-lease-duration=1s",
        "--leader-elect-renew-deadline=5s",
        "--leader-elect-retry-period=0s",
        "--kube-api-qps=-1",
    ])
    .expect("parses");
    let errors = flags.generic.validate();
    assert!(errors.len() >= 2, "{errors:?}");
}
