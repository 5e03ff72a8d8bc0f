//! Tests of the redacted YAML config parser: every error names the key and position, none
//! quotes a value or a line of the file.

use super::*;
use serde::Deserialize;

const SECRET: &str = "s3cr3t-value";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct Config {
    token: String,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    port: u16,
    #[serde(default)]
    mode: Option<Mode>,
    #[serde(default)]
    zones: Vec<Zone>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
enum Mode {
    Fast,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Zone {
    name: String,
}

fn err(yaml: &str) -> ConfigFileError {
    match parse_yaml::<Config>(yaml.as_bytes()) {
        Ok(c) => panic!("{yaml:?} parsed: {c:?}"),
        Err(e) => e,
    }
}

#[test]
fn errors_name_key_and_position_and_never_the_value() {
    for (yaml, says) in [
        (
            format!("region: eu\ntoken: [ \"{SECRET}\" ]\n"),
            "key token (line 2, column 8): expected string scalar",
        ),
        (
            format!("token: {SECRET}\nenabled: {SECRET}\n"),
            "key enabled (line 2, column 10): invalid boolean",
        ),
        (
            format!("token: x\nport: {SECRET}\n"),
            "key port (line 2, column 7): invalid u16",
        ),
        (
            format!("token: x\nmode: {SECRET}\n"),
            "key mode (line 2, column 7): unknown value, expected one of Fast",
        ),
        (
            format!("token: {SECRET}\nnoSuchKey: 1\n"),
            "key noSuchKey (line 2, column 1): unknown field `noSuchKey`, expected one of",
        ),
        (
            format!("token: x\nzones:\n  - name: a\n  - name: [{SECRET}]\n"),
            "key zones[1].name (line 4, column 11): expected string scalar",
        ),
        (
            format!("region: {SECRET}\n"),
            "the document (line 1, column 1): missing field `token`",
        ),
        (
            format!("token: \"{SECRET}\nregion: [\n"),
            "the document (line 1, column 8): unclosed quote",
        ),
    ] {
        let e = err(&yaml);
        let text = e.to_string();

        assert!(text.contains(says), "{yaml:?}: {text}");
        assert!(!text.contains(SECRET), "{yaml:?} leaked: {text}");
        assert!(!text.contains('\n'), "{yaml:?}: {text}");
        assert!(e.at.line().is_some(), "{yaml:?}: {text}");
    }
}

#[test]
fn a_runaway_message_is_cut() {
    let long = "x".repeat(10_000);
    let reason = cut(redact(&format!("custom failure {long}")));
    // A 10,000-character unknown key.
    let text = err(&format!("token: x\n{long}: 1\n")).to_string();
    assert!(text.len() < 3 * MAX_REASON, "{}", text.len());
    assert!(
        reason.len() <= MAX_REASON + '…'.len_utf8(),
        "{}",
        reason.len()
    );
}

#[test]
fn quoted_text_in_other_messages_is_taken_out() {
    assert_eq!(
        redact("bad token \"s3cr3t\" here `more` and \"unclosed"),
        "bad token \"…\" here `…` and \"…"
    );
}

#[test]
fn an_empty_document_is_null() {
    assert!(
        parse_yaml::<Option<Config>>(b"---\n# only a comment\n")
            .unwrap()
            .is_none()
    );
}
