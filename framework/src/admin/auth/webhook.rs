//! The two delegated checks, as k8s.io/apiserver's webhook token authenticator and webhook
//! authorizer over a client: a `TokenReview` per bearer token and a `SubjectAccessReview` per
//! (user, verb, path), each answer cached for its TTL. Transport and server errors are retried
//! with upstream's backoff (5 tries, 500 ms × 1.5ⁿ) and never cached.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use super::cache::TtlCache;
use super::user::UserInfo;

/// Upstream's `TokenRequestTimeout` and SAR client timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Upstream's `DefaultAuthWebhookRetryBackoff`: steps, first pause, factor.
const RETRY_STEPS: u32 = 5;
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_FACTOR: f64 = 1.5;

/// A TokenReview answer worth caching: a user, or "not authenticated" without an error.
type TokenAnswer = Option<UserInfo>;

/// Bearer tokens checked by the API server.
pub(crate) struct TokenReviewer {
    client: kube::Client,
    ttl: Duration,
    /// Keyed by a salted SHA-256 of the token, as upstream's cache, so no token is kept.
    cache: TtlCache<[u8; 32], TokenAnswer>,
    salt: [u8; 32],
}

impl TokenReviewer {
    pub(crate) fn new(client: kube::Client, ttl: Duration) -> Self {
        TokenReviewer {
            client,
            ttl,
            cache: TtlCache::new(),
            salt: rand::random(),
        }
    }

    fn key(&self, token: &str) -> [u8; 32] {
        let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
        hash.update(&self.salt);
        hash.update(token.as_bytes());
        let mut key = [0u8; 32];
        key.copy_from_slice(hash.finish().as_ref());
        key
    }

    /// `Ok(Some(user))` authenticated, `Ok(None)` not, `Err` the review failed or said why not.
    pub(crate) async fn review(&self, token: &str) -> Result<TokenAnswer, String> {
        let key = self.key(token);
        if let Some(answer) = self.cache.get(&key) {
            return Ok(answer);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let reviewed = with_retries(|| {
            let api = api.clone();
            let review = review.clone();
            async move { api.create(&PostParams::default(), &review).await }
        })
        .await
        .map_err(|e| format!("TokenReview failed: {}", describe(&e)))?;
        let status = reviewed.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            // An error the server gives is returned, not cached, as upstream.
            if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                return Err(error);
            }
            self.cache.insert(key, None, self.ttl);
            return Ok(None);
        }
        let user = status.user.unwrap_or_default();
        let answer = Some(UserInfo {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        });
        self.cache.insert(key, answer.clone(), self.ttl);
        Ok(answer)
    }
}

/// The answer of a SubjectAccessReview, as upstream's authorizer reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    Deny(String),
    NoOpinion(String),
}

/// Non-resource requests checked by the API server.
pub(crate) struct AccessReviewer {
    client: kube::Client,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: TtlCache<String, Decision>,
}

impl AccessReviewer {
    pub(crate) fn new(client: kube::Client, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        AccessReviewer {
            client,
            allowed_ttl,
            denied_ttl,
            cache: TtlCache::new(),
        }
    }

    /// May `user` do `verb` on `path`?
    pub(crate) async fn review(
        &self,
        user: &UserInfo,
        verb: &str,
        path: &str,
    ) -> Result<Decision, String> {
        let spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some(verb.to_string()),
            }),
            resource_attributes: None,
        };
        // Upstream keys the cache by the serialized review spec.
        let key = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        if let Some(decision) = self.cache.get(&key) {
            return Ok(decision);
        }
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let reviewed = with_retries(|| {
            let api = api.clone();
            let review = review.clone();
            async move { api.create(&PostParams::default(), &review).await }
        })
        .await
        .map_err(|e| format!("SubjectAccessReview failed: {}", describe(&e)))?;
        let status = reviewed.status.unwrap_or_default();
        let reason = status.reason.unwrap_or_default();
        let denied = status.denied == Some(true);
        if status.allowed && denied {
            return Err(
                "webhook subject access review returned both allow and deny response".into(),
            );
        }
        let (decision, ttl) = match (status.allowed, denied) {
            (true, _) => (Decision::Allow, self.allowed_ttl),
            (false, true) => (Decision::Deny(reason), self.denied_ttl),
            (false, false) => (Decision::NoOpinion(reason), self.denied_ttl),
        };
        self.cache.insert(key, decision.clone(), ttl);
        Ok(decision)
    }
}

/// Retries what upstream's `DefaultShouldRetry` retries: no answer, 429 and 5xx (kube's client
/// already retries 429, 503 and 504 itself; this adds the rest and transport errors).
async fn with_retries<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut pause = RETRY_FIRST;
    let mut attempt = 1;
    loop {
        let result = match tokio::time::timeout(REQUEST_TIMEOUT, call()).await {
            Ok(result) => result,
            Err(_) => Err(kube::Error::Service(
                format!("no answer within {REQUEST_TIMEOUT:?}").into(),
            )),
        };
        match result {
            Err(e) if attempt < RETRY_STEPS && retryable(&e) => {
                tracing::debug!(error = %e, attempt, "delegated auth review failed; retrying");
                tokio::time::sleep(pause).await;
                pause = pause.mul_f64(RETRY_FACTOR);
                attempt += 1;
            }
            other => return other,
        }
    }
}

fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::HttpError(_) => true,
        _ => false,
    }
}

/// Extra attributes in upstream's shape, for building users in tests and header auth.
pub(crate) type Extra = BTreeMap<String, Vec<String>>;

/// An API error as kube-apiserver worded it (kube's own text repeats the whole Status).
pub(crate) fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(env: &kube_testenv::TestEnv, resource: &str) -> usize {
        env.requests()
            .iter()
            .filter(|r| r.resource == resource)
            .count()
    }

    #[tokio::test]
    async fn server_errors_are_retried_and_never_cached() {
        let env = kube_testenv::TestEnv::builder()
            .authorization(true)
            .start()
            .await
            .unwrap();
        let token = env.token_for_service_account("default", "scraper").unwrap();
        let reviewer = TokenReviewer::new(env.client(), Duration::from_secs(3600));
        env.faults().fail_next(2, 500, None);
        let user = reviewer.review(&token).await.unwrap().unwrap();
        assert_eq!(user.name, "system:serviceaccount:default:scraper");
        assert_eq!(count(&env, "tokenreviews"), 3, "two 500s, then the answer");
        reviewer.review(&token).await.unwrap();
        assert_eq!(count(&env, "tokenreviews"), 3, "the answer is cached");

        let reviews = AccessReviewer::new(env.client(), Duration::ZERO, Duration::ZERO);
        env.faults().fail_next(1, 403, None);
        let err = reviews.review(&user, "get", "/metrics").await.unwrap_err();
        assert!(err.starts_with("SubjectAccessReview failed"), "{err}");
        assert_eq!(
            count(&env, "subjectaccessreviews"),
            1,
            "a 403 is not retried"
        );
        assert_eq!(
            reviews.review(&user, "get", "/metrics").await,
            Ok(Decision::NoOpinion(String::new())),
            "no rule grants it; the failure was not cached"
        );
    }
}
