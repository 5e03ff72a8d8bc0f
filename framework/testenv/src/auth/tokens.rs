//! Bearer-token authentication: the static tokens configured on the builder (upstream's
//! `--token-auth-file`) and the ServiceAccount tokens the TokenRequest API mints, each checked for
//! expiry (on tokio's clock, so a paused test clock expires them), audience, and the
//! ServiceAccount still existing with the uid it had when the token was issued.

use std::collections::HashMap;

use parking_lot::Mutex;
use rand::Rng;
use serde_json::Value;
use tokio::time::{Duration, Instant};

use crate::api::kinds::lookup;
use crate::storage::store::Store;

/// The audience kube-apiserver accepts and gives tokens by default
/// (`--api-audiences` defaults to the issuer, `https://kubernetes.default.svc.cluster.local`).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Who a request is, as upstream's `user.Info` (extra is not modelled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `system:serviceaccount:kube-system:node-controller`.
    pub name: String,
    /// UID (empty when the authenticator has none).
    pub uid: String,
    /// Groups, `system:authenticated` included for every authenticated user.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The user of a request without credentials.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// A user a token authenticated, with `system:authenticated` added as upstream's
    /// `AuthenticatedGroupAdder` does.
    pub fn authenticated(name: &str, uid: &str, groups: &[&str]) -> UserInfo {
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_string()).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        UserInfo {
            name: name.into(),
            uid: uid.into(),
            groups,
        }
    }

    /// The user a ServiceAccount token authenticates as.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> UserInfo {
        let ns_group = format!("system:serviceaccounts:{namespace}");
        UserInfo::authenticated(
            &format!("system:serviceaccount:{namespace}:{name}"),
            uid,
            &["system:serviceaccounts", &ns_group],
        )
    }
}

/// A ServiceAccount token the TokenRequest API handed out.
#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    name: String,
    uid: String,
    audiences: Vec<String>,
    expires: Instant,
}

/// Every token this server accepts.
#[derive(Debug, Default)]
pub struct Tokens {
    statics: HashMap<String, UserInfo>,
    issued: Mutex<HashMap<String, Issued>>,
}

/// A token that authenticated: who, and for which of the requested audiences.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The user.
    pub user: UserInfo,
    /// The requested audiences the token is valid for.
    pub audiences: Vec<String>,
}

impl Tokens {
    /// Accepts these static tokens.
    pub fn new(statics: HashMap<String, UserInfo>) -> Tokens {
        Tokens {
            statics,
            issued: Mutex::new(HashMap::new()),
        }
    }

    /// Mints a token for ServiceAccount `namespace/name` (uid `uid`), valid for `seconds` and the
    /// given audiences.
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: Vec<String>,
        seconds: u64,
    ) -> String {
        let token = random_token();
        let issued = Issued {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            audiences,
            expires: Instant::now() + Duration::from_secs(seconds),
        };
        self.issued.lock().insert(token.clone(), issued);
        token
    }

    /// Authenticates `token` for one of `audiences` (upstream: the API server's own audience for
    /// ordinary requests, a TokenReview's `spec.audiences` when it names some). `None` is
    /// upstream's "invalid bearer token".
    pub fn authenticate(
        &self,
        store: &Store,
        token: &str,
        audiences: &[String],
    ) -> Option<Authenticated> {
        if let Some(user) = self.statics.get(token) {
            // Static tokens carry no audience: they are valid for whatever the server accepts.
            return Some(Authenticated {
                user: user.clone(),
                audiences: audiences.to_vec(),
            });
        }
        // Only ServiceAccount tokens need the store (static ones spare every request its lock).
        let issued = self.issued.lock().get(token).cloned()?;
        if Instant::now() >= issued.expires {
            return None;
        }
        let matched: Vec<String> = audiences
            .iter()
            .filter(|a| issued.audiences.contains(a))
            .cloned()
            .collect();
        if matched.is_empty() {
            return None;
        }
        let res = lookup("", "v1", "serviceaccounts")?;
        let live = store.with(|s| {
            s.get(res, &issued.namespace, &issued.name)
                .is_some_and(|sa| {
                    sa.pointer("/metadata/uid").and_then(Value::as_str) == Some(issued.uid.as_str())
                        && sa.pointer("/metadata/deletionTimestamp").is_none()
                })
        });
        live.then(|| Authenticated {
            user: UserInfo::service_account(&issued.namespace, &issued.name, &issued.uid),
            audiences: matched,
        })
    }
}

/// 64 random alphanumeric characters.
pub fn random_token() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    (0..64)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}
