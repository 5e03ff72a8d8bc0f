//! The two Event API calls the recorder makes, behind a trait so retry behaviour is tested without a
//! server.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

/// Creates and patches Events in their own namespace.
pub(crate) trait EventWriter: Send + Sync + 'static {
    fn create(&self, event: Event) -> BoxFuture<'_, Result<Event, kube::Error>>;
    fn patch(
        &self,
        namespace: String,
        name: String,
        patch: serde_json::Value,
    ) -> BoxFuture<'_, Result<Event, kube::Error>>;
}

/// The real writer: `Api<Event>` per namespace.
pub(crate) struct KubeEventWriter {
    client: kube::Client,
}

impl KubeEventWriter {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl EventWriter for KubeEventWriter {
    fn create(&self, event: Event) -> BoxFuture<'_, Result<Event, kube::Error>> {
        Box::pin(async move {
            let namespace = event.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            api.create(&PostParams::default(), &event).await
        })
    }

    fn patch(
        &self,
        namespace: String,
        name: String,
        patch: serde_json::Value,
    ) -> BoxFuture<'_, Result<Event, kube::Error>> {
        Box::pin(async move {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            api.patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
        })
    }
}
