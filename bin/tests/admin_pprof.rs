//! `/debug/pprof` on the real binary's secure port, as upstream's `--profiling` (on by default):
//! a caller granted `get` on `/debug/pprof/*` reads a CPU profile and a heap profile (jemalloc's)
//! that decode as pprof protobuf with samples, anonymous and ungranted callers are refused like
//! on `/metrics`, one CPU profile runs at a time (a second is a 503), a heap profile and a CPU
//! profile run together within the profiling memory bound, a bad `seconds` is a 400, and with
//! `--profiling=false` nothing is served.

mod admin_support;

use std::io::Read;

use admin_support::{Ccm, Credentials, Response, scratch_dir};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::PostParams;
use kube_testenv::TestEnv;
use pprof::protos::{Message, Profile};
use serde_json::json;

/// A kube-testenv enforcing RBAC where ServiceAccount `default/profiler` may GET
/// `/debug/pprof/*`; returns it with that account's token and the admin kubeconfig flags.
async fn cluster(dir: &std::path::Path) -> anyhow::Result<(TestEnv, String, Vec<String>)> {
    let env = TestEnv::builder().authorization(true).start().await?;
    let token = env.token_for_service_account("default", "profiler")?;
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "pprof-reader"},
        "rules": [{"nonResourceURLs": ["/debug/pprof/*"], "verbs": ["get"]}]
    }))?;
    Api::<ClusterRole>::all(env.client())
        .create(&PostParams::default(), &role)
        .await?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "pprof-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pprof-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "profiler", "namespace": "default"}]
    }))?;
    Api::<ClusterRoleBinding>::all(env.client())
        .create(&PostParams::default(), &binding)
        .await?;
    let kubeconfig = dir.join("kubeconfig").display().to_string();
    let flags = vec![
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
    ];
    Ok((env, token, flags))
}

/// The profile in `response`: gunzipped, then decoded.
fn decode(response: &Response) -> anyhow::Result<Profile> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(response.bytes.as_slice()).read_to_end(&mut raw)?;
    Ok(Profile::decode(raw.as_slice())?)
}

fn sample_types(profile: &Profile) -> Vec<String> {
    let name = |i: i64| usize::try_from(i).map_or("?", |i| profile.string_table[i].as_str());
    profile
        .sample_type
        .iter()
        .map(|t| format!("{}/{}", name(t.ty), name(t.unit)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_callers_read_cpu_and_heap_profiles() -> anyhow::Result<()> {
    let dir = scratch_dir("admin-pprof")?;
    let (env, token, flags) = cluster(&dir).await?;
    let ccm = Ccm::start(&env, &dir, &flags).await?;
    let granted = Credentials::Token(token.clone());

    let anonymous = ccm.get("/debug/pprof/heap", &Credentials::None).await?;
    assert_eq!(anonymous.status, 403, "{}", anonymous.body);
    assert!(
        anonymous
            .body
            .contains("cannot get path \\\"/debug/pprof/heap\\\"")
    );
    let nobody = env.token_for_service_account("default", "nobody")?;
    let ungranted = ccm
        .get(
            "/debug/pprof/profile?seconds=1",
            &Credentials::Token(nobody),
        )
        .await?;
    assert_eq!(ungranted.status, 403, "{}", ungranted.body);

    let bad = ccm.get("/debug/pprof/profile?seconds=0", &granted).await?;
    assert_eq!(bad.status, 400);
    assert_eq!(
        bad.body,
        "seconds must be a whole number from 1 to 300, got \"0\"\n"
    );

    // Two at once: one profiles, the other is told to wait. Requests to /healthz meanwhile give
    // the sampler CPU time to see.
    let load = || async {
        loop {
            let _ = ccm.get("/healthz", &Credentials::None).await;
        }
    };
    let (first, second) = tokio::select! {
        both = async {
            tokio::join!(
                ccm.get("/debug/pprof/profile?seconds=1", &granted),
                ccm.get("/debug/pprof/profile?seconds=1", &granted),
            )
        } => both,
        _ = async { tokio::join!(load(), load(), load()) } => unreachable!("the load never ends"),
    };
    let (first, second) = (first?, second?);
    let (done, busy) = match first.status {
        200 => (first, second),
        _ => (second, first),
    };
    assert_eq!(done.status, 200, "{}", ccm.logs());
    assert_eq!(done.content_type, "application/octet-stream");
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert!(busy.body.contains("already being taken"), "{}", busy.body);
    let cpu = decode(&done)?;
    assert_eq!(sample_types(&cpu), ["samples/count", "cpu/nanoseconds"]);
    assert!(
        !cpu.sample.is_empty() && !cpu.function.is_empty(),
        "{cpu:?}"
    );
    assert!(cpu.duration_nanos >= 1_000_000_000);

    // A heap profile while a CPU profile runs: the two fit in the bound together.
    let (cpu, heap) = tokio::join!(ccm.get("/debug/pprof/profile?seconds=2", &granted), async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        ccm.get("/debug/pprof/heap", &granted).await
    },);
    let (cpu, heap) = (cpu?, heap?);
    assert_eq!(cpu.status, 200, "{}", cpu.body);
    assert_eq!(heap.status, 200, "{}", heap.body);
    let heap = decode(&heap)?;
    assert_eq!(sample_types(&heap), ["inuse_space/bytes"]);
    assert!(!heap.sample.is_empty(), "jemalloc sampled no allocation");

    let index = ccm.get("/debug/pprof/", &granted).await?;
    assert_eq!(index.status, 200);
    assert!(index.body.contains("profile") && index.body.contains("<a href=\"heap\">"));
    let goroutine = ccm.get("/debug/pprof/goroutine", &granted).await?;
    assert_eq!(goroutine.status, 404);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiling_false_serves_no_pprof() -> anyhow::Result<()> {
    let dir = scratch_dir("admin-pprof-off")?;
    let (env, token, mut flags) = cluster(&dir).await?;
    flags.push("--profiling=false".to_string());
    let ccm = Ccm::start(&env, &dir, &flags).await?;
    let granted = Credentials::Token(token);
    for path in [
        "/debug/pprof/",
        "/debug/pprof/profile?seconds=1",
        "/debug/pprof/heap",
    ] {
        let response = ccm.get(path, &granted).await?;
        assert_eq!(response.status, 404, "{path}: {}", response.body);
    }
    Ok(())
}
