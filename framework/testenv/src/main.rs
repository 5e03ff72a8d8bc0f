//! `kube-testenv --port N --kubeconfig FILE`: runs the embedded API server standalone so kubectl
//! and other programs can use it; serves until Ctrl-C. `--authorization-mode`, `--token-auth-file`
//! and `--https` set up authentication and authorization as the builder does.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

/// `--authorization-mode` values this server implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AuthorizationMode {
    /// Every request is allowed.
    #[value(name = "AlwaysAllow")]
    AlwaysAllow,
    /// Requests are authorized by RBAC (members of system:masters always are).
    #[value(name = "RBAC")]
    Rbac,
}

/// An embedded Kubernetes API server on 127.0.0.1 (plain HTTP) for tests and no-cluster dev runs.
#[derive(Debug, Parser)]
#[command(name = "kube-testenv", version)]
struct Options {
    /// Port on 127.0.0.1 to serve on (0 = a random free port).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Write a kubeconfig for this server to FILE (for kubectl and client-go programs).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// ClusterIP range for Services.
    #[arg(long, default_value = "10.96.0.0/12")]
    service_cluster_ip_range: String,
    /// Events (of all types) a watch can resume across before it gets 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    history_window: usize,
    /// How requests are authorized.
    #[arg(long, value_enum, default_value = "AlwaysAllow")]
    authorization_mode: AuthorizationMode,
    /// Static bearer tokens, one `token,user,uid,"group1,group2"` line each, as kube-apiserver's.
    #[arg(long, value_name = "FILE")]
    token_auth_file: Option<PathBuf>,
    /// Serve HTTPS with a CA made at start (the kubeconfig trusts it); kubectl sends credentials
    /// over TLS only.
    #[arg(long)]
    https: bool,
}

/// One line of a `--token-auth-file`.
struct TokenLine {
    token: String,
    user: String,
    uid: String,
    groups: Vec<String>,
}

/// Parses a `--token-auth-file`, one [`TokenLine`] per non-empty line.
fn token_file(path: &PathBuf) -> Result<Vec<TokenLine>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut cols = line.splitn(4, ',');
        let (Some(token), Some(user), Some(uid)) = (cols.next(), cols.next(), cols.next()) else {
            return Err(format!(
                "token file '{}' must have at least 3 columns (token, user name, user uid), found {}",
                path.display(),
                line.split(',').count()
            ));
        };
        let groups = cols
            .next()
            .map(|g| g.trim_matches('"'))
            .filter(|g| !g.is_empty())
            .map(|g| g.split(',').map(String::from).collect())
            .unwrap_or_default();
        out.push(TokenLine {
            token: token.into(),
            user: user.into(),
            uid: uid.into(),
            groups,
        });
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> ExitCode {
    let opts = Options::parse();
    let mut builder = kube_testenv::TestEnv::builder()
        .port(opts.port)
        .service_cluster_ip_range(&opts.service_cluster_ip_range)
        .history_window(opts.history_window)
        .authorization(opts.authorization_mode == AuthorizationMode::Rbac)
        .https(opts.https);
    if let Some(path) = &opts.token_auth_file {
        let tokens = match token_file(path) {
            Ok(t) => t,
            Err(e) => return fail(&e),
        };
        for t in tokens {
            let groups: Vec<&str> = t.groups.iter().map(String::as_str).collect();
            builder = builder.static_token(&t.token, &t.user, &t.uid, &groups);
        }
    }
    let started = builder.start().await;
    let env = match started {
        Ok(env) => env,
        Err(e) => return fail(&e.to_string()),
    };
    match &opts.kubeconfig {
        Some(path) => {
            if let Err(e) = env.write_kubeconfig(path) {
                return fail(&format!("writing {}: {e}", path.display()));
            }
            eprintln!(
                "kube-testenv serving {} (kubeconfig: {})",
                env.url(),
                path.display()
            );
        }
        None => eprintln!("kube-testenv serving {}", env.url()),
    }
    if let Err(e) = tokio::signal::ctrl_c().await {
        return fail(&format!("waiting for Ctrl-C: {e}"));
    }
    env.shutdown().await;
    ExitCode::SUCCESS
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("kube-testenv: {msg}");
    ExitCode::from(1)
}
