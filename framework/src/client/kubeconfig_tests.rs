//! A kubeconfig with a credential next to a mistake: every error names the file, the key path
//! and the line, and none quotes the token, the password or a line of the file.

use super::*;

const TOKEN: &str = "s3cr3t";
const PASSWORD: &str = "hunter2";

fn write(name: &str, yaml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kubeconfig-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

fn preamble(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
         contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
    )
}

async fn error_of(name: &str, yaml: &str) -> String {
    let path = write(name, yaml);
    let text = match config_from_kubeconfig(&path).await {
        Ok(_) => panic!("{yaml:?} loaded"),
        Err(e) => e.to_string(),
    };
    assert!(
        text.contains(&path.display().to_string()),
        "no file in {text}"
    );
    for secret in [TOKEN, PASSWORD] {
        assert!(!text.contains(secret), "{yaml:?} leaked {secret}: {text}");
    }
    assert!(!text.contains('\n'), "{text}");
    text
}

#[tokio::test]
async fn a_parse_error_names_the_key_and_line_never_the_token_or_password() {
    let issue = format!(
        "{}users: [{{name: u, user: {{token: [\"{TOKEN}\"], password: {PASSWORD}}}}}]\n",
        preamble("https://127.0.0.1:6443")
    );
    let text = error_of("issue", &issue).await;
    assert!(
        text.contains("key users[0].user.token (line 6, column 33): expected string scalar"),
        "{text}"
    );

    let password = format!(
        "{}users:\n- name: u\n  user:\n    token: {TOKEN}\n    password: [{PASSWORD}]\n",
        preamble("https://127.0.0.1:6443")
    );
    let text = error_of("password", &password).await;
    assert!(
        text.contains("key users[0].user.password (line 10, column"),
        "{text}"
    );

    // The second document of a stream: its key and line are named too.
    let second = format!(
        "{}users: [{{name: u, user: {{token: {TOKEN}}}}}]\n---\nusers:\n- name: v\n  user: {{token: {{value: {TOKEN}}}, password: {PASSWORD}}}\n",
        preamble("https://127.0.0.1:6443")
    );
    let text = error_of("second", &second).await;
    assert!(text.contains("key users[0].user.token (line 10,"), "{text}");
}

#[tokio::test]
async fn undecodable_data_is_named_by_field_without_its_characters() {
    let yaml = format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:6443\", certificate-authority-data: \"ab$d{TOKEN}\"}}}}]\n\
         contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n\
         users: [{{name: u, user: {{password: {PASSWORD}}}}}]\n"
    );
    let text = error_of("ca-data", &yaml).await;
    assert!(
        text.ends_with(
            "failed to load certificate authority: clusters[].cluster.certificate-authority-data is not valid base64"
        ),
        "{text}"
    );
    assert!(!text.contains('$'), "{text}");
}

#[tokio::test]
async fn a_good_kubeconfig_loads_with_its_token() {
    let yaml = format!(
        "{}users: [{{name: u, user: {{token: {TOKEN}}}}}]\n",
        preamble("https://127.0.0.1:6443")
    );
    let config = config_from_kubeconfig(&write("good", &yaml)).await.unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
    assert!(config.auth_info.token.is_some());
}

#[tokio::test]
async fn a_missing_file_is_named() {
    let path = std::env::temp_dir().join("kubeconfig-tests-none/absent");
    let err = config_from_kubeconfig(&path).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot read kubeconfig {}", path.display())),
        "{err}"
    );
}
