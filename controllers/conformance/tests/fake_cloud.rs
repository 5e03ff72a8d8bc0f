//! The fake cloud, the reference provider, passes every check, none skipped: once through
//! `run`, and once per check through the macro a provider's own tests use.

mod support;

use fake_cloud::FakeCloud;

#[tokio::test]
async fn the_fake_cloud_passes_every_check() {
    let (cloud, fixture) = support::fake_cloud();
    let report = cloud_provider_conformance::run(&cloud, &fixture).await;
    report.assert_passed();
    assert_eq!(report.skipped().count(), 0, "{report}");
    assert_eq!(
        report.checks.len(),
        cloud_provider_conformance::checks().count()
    );
    // Nothing left behind in the cloud.
    assert!(
        cloud.load_balancers().is_empty(),
        "{:?}",
        cloud.load_balancers()
    );
    assert!(cloud.route_table(support::CLUSTER).is_empty());
}

async fn setup() -> (FakeCloud, cloud_provider_conformance::Fixture) {
    support::fake_cloud()
}

mod each_check {
    cloud_provider_conformance::conformance_tests!(super::setup);
}

/// A cloud offering only some facets: the others' checks are skipped, saying why.
#[tokio::test]
async fn checks_of_missing_facets_are_skipped_with_the_reason() {
    let (_, fixture) = support::fake_cloud();
    let facets = fake_cloud::Facets {
        instances_v2: true,
        ..fake_cloud::Facets::none()
    };
    let cloud = FakeCloud::builder()
        .facets(facets)
        .instance(fake_cloud::FakeInstance::new("node-1").internal_ip("10.0.0.1"))
        .instance(fake_cloud::FakeInstance::new("node-deleted"))
        .build()
        .unwrap();
    cloud.remove_instance("node-deleted");
    let report = cloud_provider_conformance::run(&cloud, &fixture).await;
    let entry = report
        .check("ensure_load_balancer_returns_an_ingress")
        .unwrap();
    assert_eq!(
        entry.outcome,
        cloud_provider_conformance::Outcome::Skipped(
            "the provider does not support it (load_balancer() is None)".into()
        )
    );
    assert!(
        report
            .check("created_route_is_listed")
            .is_some_and(|c| matches!(c.outcome, cloud_provider_conformance::Outcome::Skipped(_)))
    );
    // The stopped instance is not in this cloud: that check fails, naming the rule.
    let failed: Vec<_> = report.failed().map(|c| c.name).collect();
    assert_eq!(
        failed,
        ["stopped_instance_exists_and_reports_shutdown"],
        "{report}"
    );
}

/// A fixture the checks cannot use is one clear failure, and nothing runs.
#[tokio::test]
async fn an_unusable_fixture_fails_before_any_check() {
    let (cloud, mut fixture) = support::fake_cloud();
    fixture.missing = fixture.existing.clone();
    let report = cloud_provider_conformance::run(&cloud, &fixture).await;
    assert_eq!(report.checks.len(), 1);
    assert_eq!(report.checks[0].name, "fixture");
    assert!(report.to_string().contains("must differ"), "{report}");
    assert!(cloud.calls().is_empty());
}
