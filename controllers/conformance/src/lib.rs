//! A conformance kit for cloud providers: checks that a [`CloudProvider`] honours the contract
//! the cloud controllers (cloud-node, cloud-node-lifecycle, service, route) rely on, one named
//! check per upstream rule (`k8s.io/cloud-provider`'s `cloud.go` and the controllers' use of it).
//!
//! Give it the provider and a [`Fixture`] (instances it knows, a Service to balance, route
//! CIDRs); checks of facets the provider does not have are skipped with the reason. In a
//! provider's tests, either one test for everything:
//!
//! ```ignore
//! #[tokio::test]
//! async fn conforms() {
//!     let (provider, fixture) = setup().await;
//!     cloud_provider_conformance::run(&provider, &fixture).await.assert_passed();
//! }
//! ```
//!
//! or one `#[tokio::test]` per check, so each failure is named in the test output, from an async
//! fn returning the provider and the fixture (the caller needs `tokio` with `macros` and `rt`):
//!
//! ```ignore
//! mod conformance {
//!     cloud_provider_conformance::conformance_tests!(super::setup);
//! }
//! ```
//!
//! See `docs/writing-a-provider.md` for the list of checks and the rule each enforces.

mod checks;
mod fixture;
mod report;

use cloud_controllers::cloud::CloudProvider;

pub use checks::{Check, Facet};
pub use fixture::{Fixture, FixtureError, Instance, load_balancer_service};
pub use report::{CheckReport, Failure, Outcome, Report};

/// Every check, in the order [`run`] runs them.
pub fn checks() -> impl Iterator<Item = &'static Check> {
    checks::all()
}

/// Runs every check on `provider`, one after another; each leaves no load balancer or route
/// behind. An unusable fixture fails one entry named `fixture` and runs nothing.
pub async fn run(provider: &dyn CloudProvider, fixture: &Fixture) -> Report {
    run_selected(provider, fixture, |_| true).await
}

/// Runs the check called `name` only (what [`conformance_tests!`] generates a test for); an
/// unknown name is a failed entry, so a renamed check cannot pass silently.
pub async fn run_check(name: &str, provider: &dyn CloudProvider, fixture: &Fixture) -> Report {
    let mut report = run_selected(provider, fixture, |c| c.name == name).await;
    if report.checks.is_empty() {
        report.checks.push(CheckReport {
            name: "unknown-check",
            rule: "every generated test names a check of this kit version",
            outcome: Outcome::Failed(Failure::new(
                format!("one of {:?}", checks().map(|c| c.name).collect::<Vec<_>>()),
                name,
            )),
        });
    }
    report
}

async fn run_selected(
    provider: &dyn CloudProvider,
    fixture: &Fixture,
    selected: impl Fn(&Check) -> bool,
) -> Report {
    let mut report = Report {
        provider: provider.provider_name().to_owned(),
        checks: Vec::new(),
    };
    if let Err(err) = fixture.validate() {
        report.checks.push(CheckReport {
            name: "fixture",
            rule: "the fixture describes what the checks need (see Fixture)",
            outcome: Outcome::Failed(Failure::new("a usable fixture", err.to_string())),
        });
        return report;
    }
    for check in checks().filter(|c| selected(c)) {
        report.checks.push(check.run(provider, fixture).await);
    }
    report
}

/// One `#[tokio::test]` per check, each named after its check, from `$setup`: a path to an async
/// fn returning `(provider, Fixture)`, the provider being a concrete provider or an
/// `Arc<dyn CloudProvider>`. Each test sets up afresh and runs its check alone.
#[macro_export]
macro_rules! conformance_tests {
    ($setup:path) => {
        $crate::__with_check_names!(__conformance_test_fns { $setup });
    };
}

/// Hands the names of every check, in run order, to `$crate::$callback!{ $args ; name, ... }`;
/// the one list [`conformance_tests!`] generates tests from (a unit test compares it with
/// [`checks`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __with_check_names {
    ($callback:ident { $($args:tt)* }) => {
        $crate::$callback! { $($args)* ;
            provider_name_is_a_usable_scheme,
            instance_exists_for_a_running_instance,
            instance_exists_is_false_not_an_error_for_a_deleted_instance,
            instance_shutdown_is_false_for_a_running_instance,
            stopped_instance_exists_and_reports_shutdown,
            instance_metadata_describes_the_instance,
            instance_metadata_provider_id_is_the_providers,
            instance_lookup_prefers_the_provider_id,
            instance_id_rebuilds_the_provider_id,
            instance_id_is_instance_not_found_for_a_deleted_instance,
            instance_exists_by_provider_id_is_false_not_an_error_for_a_deleted_instance,
            stopped_instance_exists_by_provider_id_and_reports_shutdown,
            node_addresses_agree_by_name_and_provider_id,
            zone_agrees_by_name_and_provider_id,
            get_load_balancer_is_none_before_ensure,
            ensure_load_balancer_returns_an_ingress,
            ensure_load_balancer_is_idempotent,
            get_load_balancer_reports_an_ensured_load_balancer,
            update_load_balancer_succeeds_on_an_existing_load_balancer,
            get_load_balancer_is_none_after_ensure_load_balancer_deleted,
            ensure_load_balancer_deleted_succeeds_when_already_gone,
            load_balancer_name_is_stable,
            load_balancer_names_differ_between_services,
            created_route_is_listed,
            create_route_retry_leaves_one_route,
            deleted_route_is_not_listed,
            delete_route_succeeds_when_already_gone,
            routes_are_listed_per_cluster,
        }
    };
}

/// The tests [`conformance_tests!`] generates.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_test_fns {
    ($setup:path ; $($name:ident,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (provider, fixture) = $setup().await;
                $crate::run_check(stringify!($name), &provider, &fixture)
                    .await
                    .assert_passed();
            }
        )*
    };
}

/// The check names as an array (for the unit test below).
#[doc(hidden)]
#[macro_export]
macro_rules! __check_name_array {
    (; $($name:ident,)*) => {
        [$(stringify!($name)),*]
    };
}

#[cfg(test)]
mod tests {
    /// The macro's list is the registry's, so no check lacks its generated test.
    #[test]
    fn generated_tests_are_the_checks() {
        let generated: Vec<&str> = crate::__with_check_names!(__check_name_array {}).to_vec();
        let registered: Vec<&str> = super::checks().map(|c| c.name).collect();
        assert_eq!(generated, registered);
    }

    /// Every check names the rule it enforces.
    #[test]
    fn every_check_names_its_rule() {
        for check in super::checks() {
            assert!(check.rule.len() > 40, "{}: {:?}", check.name, check.rule);
        }
    }
}
