//! `docs/metrics.md` is the contract of `/metrics`: this test parses the doc's tables, runs the
//! built binary with `--dev` until its controllers have done their work, scrapes `/metrics` (plain
//! HTTP, `--dev`'s default; `admin_tls.rs` covers HTTPS), and
//! checks both directions: every documented metric is exposed with its documented type and exactly
//! its documented label names (and values, where the doc lists them), and nothing undocumented is
//! exposed.

mod admin_support;

use std::collections::{BTreeMap, BTreeSet};

use admin_support::{Admin, DevBinary, scratch_dir};

const DOC: &str = include_str!("../../docs/metrics.md");

/// One row of a `| metric | type | labels | ...` table.
#[derive(Debug)]
struct Documented {
    name: String,
    kind: String,
    /// Label name → the values the doc allows (empty: any value).
    labels: BTreeMap<String, BTreeSet<String>>,
}

impl Documented {
    /// The OpenMetrics family name: counters are declared without `_total`.
    fn family(&self) -> &str {
        match self.kind.as_str() {
            "counter" => self.name.strip_suffix("_total").unwrap_or(&self.name),
            _ => &self.name,
        }
    }
}

/// Backticked words in `text`.
fn code_spans(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Splits a labels cell such as "`controller`, `result` (`success`, `error`)" at the commas
/// outside parentheses.
fn label_entries(cell: &str) -> Vec<String> {
    let (mut entries, mut current, mut depth) = (Vec::new(), String::new(), 0u32);
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                entries.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    entries.push(current);
    entries
        .into_iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

fn parse_labels(cell: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cell = cell.trim();
    if cell == "–" || cell == "-" {
        return BTreeMap::new();
    }
    label_entries(cell)
        .iter()
        .map(|entry| {
            let (name, values) = match entry.split_once('(') {
                Some((name, values)) => (name, code_spans(values)),
                None => (entry.as_str(), Vec::new()),
            };
            let name = code_spans(name)
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("label entry without a `name`: {entry:?}"));
            (name, values.into_iter().collect())
        })
        .collect()
}

/// Every row of every table whose header starts `| metric | type | labels`.
fn documented() -> Vec<Documented> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in DOC.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() >= 3 && cells[..3] == ["metric", "type", "labels"] {
            in_table = true;
            continue;
        }
        if !in_table || cells[0].starts_with("---") {
            continue;
        }
        let name = code_spans(cells[0])
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("metric cell without a `name`: {line}"));
        let kind = cells[1]
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        rows.push(Documented {
            name,
            kind,
            labels: parse_labels(cells[2]),
        });
    }
    rows
}

/// One exposed sample: its metric name and labels.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
}

/// Parses `name{k="v",...} value` (label values may hold escaped quotes).
fn parse_sample(line: &str) -> Sample {
    let Some(open) = line.find('{') else {
        let name = line.split_whitespace().next().unwrap_or_default();
        return Sample {
            name: name.to_string(),
            labels: BTreeMap::new(),
        };
    };
    let name = line[..open].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[open + 1..];
    while !rest.starts_with('}') {
        let eq = rest
            .find("=\"")
            .unwrap_or_else(|| panic!("bad labels in {line:?}"));
        let key = rest[..eq].trim_start_matches(',').to_string();
        let mut value = String::new();
        let mut chars = rest[eq + 2..].char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => {
                    if let Some((_, c)) = chars.next() {
                        value.push(c);
                    }
                }
                Some((i, '"')) => break eq + 2 + i + 1,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value in {line:?}"),
            }
        };
        labels.insert(key, value);
        rest = rest[end..].trim_start_matches(',');
    }
    Sample { name, labels }
}

/// `# TYPE` declarations and samples, grouped by family.
fn parse_exposition(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(decl) = line.strip_prefix("# TYPE ") {
            let mut parts = decl.split_whitespace();
            let (Some(family), Some(kind)) = (parts.next(), parts.next()) else {
                panic!("bad TYPE line {line:?}");
            };
            types.insert(family.to_string(), kind.to_string());
        } else if let Some(help) = line.strip_prefix("# HELP ") {
            // The encoder adds the full stop; a help text that brings its own shows two.
            assert!(
                !help.ends_with(".."),
                "help text ends with two full stops: {line}"
            );
        } else if !line.starts_with('#') && !line.is_empty() {
            samples.push(parse_sample(line));
        }
    }
    (types, samples)
}

/// Which family a sample belongs to, and whether it is a histogram bucket (which adds `le`).
fn family_of<'a>(sample: &str, types: &'a BTreeMap<String, String>) -> Option<(&'a str, bool)> {
    for (family, kind) in types {
        let suffixes: &[&str] = match kind.as_str() {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_sum", "_count", "_created"],
            _ => &[""],
        };
        for suffix in suffixes {
            if sample.strip_suffix(suffix) == Some(family.as_str()) {
                return Some((family, *suffix == "_bucket"));
            }
        }
    }
    None
}

#[test]
fn the_doc_tables_parse() {
    let rows = documented();
    let find = |name: &str| rows.iter().find(|r| r.name == name).expect(name);
    assert!(rows.len() >= 20, "{rows:#?}");
    let reconciles = find("controller_runtime_reconcile_total");
    assert_eq!(reconciles.kind, "counter");
    assert_eq!(reconciles.family(), "controller_runtime_reconcile");
    assert_eq!(
        reconciles.labels["result"],
        BTreeSet::from(["success".into(), "error".into(), "requeue_after".into()])
    );
    assert!(reconciles.labels["controller"].is_empty());
    let running = find("running_managed_controllers");
    assert_eq!(
        running.labels.keys().collect::<Vec<_>>(),
        ["manager", "name"],
        "parenthesised prose is not a label"
    );
    assert!(find("route_controller_route_sync_total").labels.is_empty());
    assert_eq!(find("workqueue_depth").kind, "gauge");
}

#[test]
fn samples_parse_with_escaped_values() {
    let sample = parse_sample(r#"x_total{a="1",b="say \"hi\", ok"} 3"#);
    assert_eq!(sample.name, "x_total");
    assert_eq!(sample.labels["b"], r#"say "hi", ok"#);
    assert!(parse_sample("y 1").labels.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_and_label_set_matches_docs_metrics_md() -> anyhow::Result<()> {
    let dir = scratch_dir("metrics-contract")?;
    let binary = DevBinary::start(&dir, Admin::Http).await?;
    binary.wait_until_reconciled().await?;

    let scraped = binary.get("/metrics").await?;
    assert_eq!(scraped.status, 200);
    assert!(
        scraped
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        scraped.content_type
    );
    assert!(
        scraped.body.trim_end().ends_with("# EOF"),
        "OpenMetrics ends with # EOF"
    );
    let (types, samples) = parse_exposition(&scraped.body);
    let rows = documented();
    let mut problems = BTreeSet::new();

    for row in &rows {
        match types.get(row.family()) {
            None => {
                problems.insert(format!("{} is documented but not exposed", row.name));
            }
            Some(kind) if *kind != row.kind => {
                problems.insert(format!(
                    "{} is documented as a {} but exposed as a {kind}",
                    row.name, row.kind
                ));
            }
            Some(_) => {}
        }
    }
    for family in types.keys() {
        if !rows.iter().any(|r| r.family() == family) {
            problems.insert(format!("{family} is exposed but not in docs/metrics.md"));
        }
    }
    let mut with_samples = BTreeSet::new();
    for sample in &samples {
        let Some((family, bucket)) = family_of(&sample.name, &types) else {
            problems.insert(format!("sample {} has no # TYPE", sample.name));
            continue;
        };
        with_samples.insert(family.to_string());
        let Some(row) = rows.iter().find(|r| r.family() == family) else {
            continue; // reported above
        };
        let mut expected: BTreeSet<&str> = row.labels.keys().map(String::as_str).collect();
        if bucket {
            expected.insert("le");
        }
        let got: BTreeSet<&str> = sample.labels.keys().map(String::as_str).collect();
        if got != expected {
            problems.insert(format!(
                "{} has labels {got:?}, docs/metrics.md says {expected:?}",
                sample.name
            ));
        }
        for (label, allowed) in &row.labels {
            match sample.labels.get(label) {
                Some(value) if !allowed.is_empty() && !allowed.contains(value) => {
                    problems.insert(format!(
                        "{}{{{label}={value:?}}}: docs/metrics.md allows only {allowed:?}",
                        sample.name
                    ));
                }
                _ => {}
            }
        }
    }
    // Every stock controller's event recorder is counted, not only the one a test looked at.
    for name in ["events_dropped_total", "events_spam_filtered_total"] {
        let row = rows.iter().find(|r| r.name == name).expect(name);
        for component in &row.labels["component"] {
            if !samples
                .iter()
                .any(|s| s.name == name && s.labels.get("component") == Some(component))
            {
                problems.insert(format!("{name}{{component={component:?}}} is not exposed"));
            }
        }
    }
    // A family with no sample would let its labels drift unseen: after a full --dev start, every
    // documented family has at least one series.
    for row in &rows {
        if types.contains_key(row.family()) && !with_samples.contains(row.family()) {
            problems.insert(format!("{} is exposed without any series", row.name));
        }
    }
    assert!(
        problems.is_empty(),
        "/metrics and docs/metrics.md disagree:\n  {}\n\n{}",
        problems.into_iter().collect::<Vec<_>>().join("\n  "),
        scraped.body
    );
    Ok(())
}
