//! The provider guide lists every check, so a new check cannot go undocumented.

#[test]
fn the_provider_guide_lists_every_check() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/writing-a-provider.md"),
    )
    .unwrap();
    for check in cloud_provider_conformance::checks() {
        assert!(
            guide.contains(&format!("| `{}` |", check.name)),
            "docs/writing-a-provider.md lists no check {}",
            check.name
        );
    }
}
