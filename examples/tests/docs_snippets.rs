//! The code `docs/embedding.md` shows is the code that builds and runs: each `rust` block there
//! must appear verbatim in the example sources.

use std::path::PathBuf;

fn read(rel: &str) -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

#[test]
fn embedding_md_shows_the_real_examples() {
    let doc = read("../docs/embedding.md");
    let sources = [read("src/bin/metal-ccm.rs"), read("src/ready_labeler.rs")];
    let blocks: Vec<&str> = doc
        .split("```rust\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default())
        .collect();
    assert_eq!(
        blocks.len(),
        2,
        "the distro's main and the minimal controller"
    );
    for block in blocks {
        assert!(
            sources.iter().any(|s| s.contains(block)),
            "docs/embedding.md shows code that is not in examples/src:\n{block}"
        );
    }
}
