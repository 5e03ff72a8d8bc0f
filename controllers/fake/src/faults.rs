//! The fake cloud's call log and fault injection.
//!
//! Controller tests assert on what the controllers asked the cloud ("EnsureLoadBalancer was called
//! once for default/web, by the leader"), and make the cloud misbehave on purpose: return an error
//! (or panic, as a buggy provider would) for the next `n` calls of one method (optionally only
//! for one key), or answer slowly. Latency
//! uses `tokio::time::sleep`, so tests on a paused clock stay instant and deterministic.
//!
//! Order inside one call: latency first, then a hold (`gates.rs`), then the fault (if one
//! matches), then the real work. The call is logged when it completes, so a call abandoned while
//! waiting (a timed-out or cancelled reconcile) never reached the cloud and is not in the log.
//!
//! The log is a ring of the newest [`DEFAULT_CALL_LOG_CAPACITY`] calls (a long `--dev` run or a
//! benchmark must not grow); per-method counters keep the totals, so counting never misses a
//! call the ring has dropped.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use cloud_controllers::cloud::CloudError;

/// Names every provider call the fake records, so tests select calls and faults without typos.
///
/// [`Method::as_str`] gives the upstream Go method name (`"EnsureLoadBalancer"`), which is also
/// what appears in logs and in [`CloudCall`]'s `Display`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // each variant is the upstream method of the same name
#[non_exhaustive]
pub enum Method {
    Initialize,
    GetLoadBalancer,
    /// Synchronous in the contract: logged, but faults, latency and holds do not apply.
    GetLoadBalancerName,
    EnsureLoadBalancer,
    UpdateLoadBalancer,
    EnsureLoadBalancerDeleted,
    NodeAddresses,
    NodeAddressesByProviderID,
    InstanceID,
    InstanceType,
    InstanceTypeByProviderID,
    InstanceExistsByProviderID,
    InstanceShutdownByProviderID,
    InstanceExists,
    InstanceShutdown,
    InstanceMetadata,
    GetZoneByProviderID,
    GetZoneByNodeName,
    ListClusters,
    Master,
    ListRoutes,
    CreateRoute,
    DeleteRoute,
}

impl Method {
    /// The upstream (Go) name of the method, as operators know it from k8s.io/cloud-provider.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Initialize => "Initialize",
            Method::GetLoadBalancer => "GetLoadBalancer",
            Method::GetLoadBalancerName => "GetLoadBalancerName",
            Method::EnsureLoadBalancer => "EnsureLoadBalancer",
            Method::UpdateLoadBalancer => "UpdateLoadBalancer",
            Method::EnsureLoadBalancerDeleted => "EnsureLoadBalancerDeleted",
            Method::NodeAddresses => "NodeAddresses",
            Method::NodeAddressesByProviderID => "NodeAddressesByProviderID",
            Method::InstanceID => "InstanceID",
            Method::InstanceType => "InstanceType",
            Method::InstanceTypeByProviderID => "InstanceTypeByProviderID",
            Method::InstanceExistsByProviderID => "InstanceExistsByProviderID",
            Method::InstanceShutdownByProviderID => "InstanceShutdownByProviderID",
            Method::InstanceExists => "InstanceExists",
            Method::InstanceShutdown => "InstanceShutdown",
            Method::InstanceMetadata => "InstanceMetadata",
            Method::GetZoneByProviderID => "GetZoneByProviderID",
            Method::GetZoneByNodeName => "GetZoneByNodeName",
            Method::ListClusters => "ListClusters",
            Method::Master => "Master",
            Method::ListRoutes => "ListRoutes",
            Method::CreateRoute => "CreateRoute",
            Method::DeleteRoute => "DeleteRoute",
        }
    }

    /// Every method, in the order of the contract.
    pub const ALL: [Method; 23] = [
        Method::Initialize,
        Method::GetLoadBalancer,
        Method::GetLoadBalancerName,
        Method::EnsureLoadBalancer,
        Method::UpdateLoadBalancer,
        Method::EnsureLoadBalancerDeleted,
        Method::NodeAddresses,
        Method::NodeAddressesByProviderID,
        Method::InstanceID,
        Method::InstanceType,
        Method::InstanceTypeByProviderID,
        Method::InstanceExistsByProviderID,
        Method::InstanceShutdownByProviderID,
        Method::InstanceExists,
        Method::InstanceShutdown,
        Method::InstanceMetadata,
        Method::GetZoneByProviderID,
        Method::GetZoneByNodeName,
        Method::ListClusters,
        Method::Master,
        Method::ListRoutes,
        Method::CreateRoute,
        Method::DeleteRoute,
    ];

    /// The method with this upstream name (`"UpdateLoadBalancer"`), as config files spell it.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a recorded call ended, kept as text so the log stays `Clone` and comparable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The call succeeded.
    Ok,
    /// The call failed with this error message.
    Err(String),
}

impl CallOutcome {
    /// Whether the call succeeded; the common assertion in tests.
    pub fn is_ok(&self) -> bool {
        matches!(self, CallOutcome::Ok)
    }
}

/// One provider call, as the controllers made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudCall {
    /// Which method was called.
    pub method: Method,
    /// What it was called for: `namespace/name` of a Service, a node name, a provider ID, or a
    /// cluster name (see the method's docs on [`super::FakeCloud`]).
    pub key: String,
    /// The caller tag of the handle that made the call (see [`super::FakeCloud::set_caller`]);
    /// lets leader-failover tests see which replica talked to the cloud.
    pub caller: Option<String>,
    /// Whether the call succeeded.
    pub outcome: CallOutcome,
    /// When the call came in and when it returned (tokio's clock, so paused-clock tests see
    /// their own time): an overlap check compares two replicas' calls for one key by these.
    pub started: tokio::time::Instant,
    /// See [`Self::started`].
    pub finished: tokio::time::Instant,
}

impl fmt::Display for CloudCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.method, self.key)?;
        if let Some(caller) = &self.caller {
            write!(f, " by {caller}")?;
        }
        match &self.outcome {
            CallOutcome::Ok => f.write_str(" -> ok"),
            CallOutcome::Err(msg) => write!(f, " -> error: {msg}"),
        }
    }
}

/// The error an injected fault returns; a template, because [`CloudError`] is not `Clone`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// Returns [`CloudError::InstanceNotFound`].
    InstanceNotFound,
    /// Returns [`CloudError::NotImplemented`].
    NotImplemented,
    /// Returns [`CloudError::ImplementedElsewhere`].
    ImplementedElsewhere,
    /// Returns [`CloudError::Retry`] with this message and delay.
    Retry {
        /// What the cloud says.
        message: String,
        /// The delay the cloud asks for.
        after: Duration,
    },
    /// Returns [`CloudError::Other`] with this message.
    Other(String),
    /// Panics with this message: a provider bug, to test that the caller's panic guard holds.
    /// The call is not logged (it never completed).
    Panic(String),
    /// Never returns: a hung cloud call, to test the caller's timeout. Not logged either.
    Hang,
}

impl FaultError {
    /// The error to return; panics for [`FaultError::Panic`] and never returns for
    /// [`FaultError::Hang`], which is the point of those faults.
    pub(super) async fn fire(self) -> CloudError {
        match self {
            FaultError::InstanceNotFound => CloudError::InstanceNotFound,
            FaultError::NotImplemented => CloudError::NotImplemented,
            FaultError::ImplementedElsewhere => CloudError::ImplementedElsewhere,
            FaultError::Retry { message, after } => CloudError::Retry { message, after },
            FaultError::Other(message) => CloudError::other(message),
            FaultError::Panic(message) => panic!("{message}"),
            FaultError::Hang => std::future::pending().await,
        }
    }
}

/// A fault to inject into one method: which error, how many times, and for which key.
///
/// ```
/// # use std::time::Duration;
/// # use fake_cloud::FaultSpec;
/// // The next two calls for default/web fail with "quota exceeded"; other services are unaffected.
/// let spec = FaultSpec::other("quota exceeded").times(2).only_for("default/web");
/// // Every call asks to be retried in 30 s, until the fault is cleared.
/// let spec = FaultSpec::retry("busy", Duration::from_secs(30));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSpec {
    error: FaultError,
    remaining: Option<u32>,
    only_for_key: Option<String>,
}

impl FaultSpec {
    /// A fault returning `error` on every call until cleared.
    pub fn new(error: FaultError) -> Self {
        Self {
            error,
            remaining: None,
            only_for_key: None,
        }
    }

    /// Fails with [`CloudError::Other`] carrying `message`.
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(FaultError::Other(message.into()))
    }

    /// Fails with [`CloudError::Retry`], to test that controllers honour the cloud's delay.
    pub fn retry(message: impl Into<String>, after: Duration) -> Self {
        Self::new(FaultError::Retry {
            message: message.into(),
            after,
        })
    }

    /// Panics inside the provider call with `message` (see [`FaultError::Panic`]).
    pub fn panic(message: impl Into<String>) -> Self {
        Self::new(FaultError::Panic(message.into()))
    }

    /// The call never returns (see [`FaultError::Hang`]).
    pub fn hang() -> Self {
        Self::new(FaultError::Hang)
    }

    /// Fails with [`CloudError::InstanceNotFound`].
    pub fn instance_not_found() -> Self {
        Self::new(FaultError::InstanceNotFound)
    }

    /// Fails with [`CloudError::NotImplemented`].
    pub fn not_implemented() -> Self {
        Self::new(FaultError::NotImplemented)
    }

    /// Fails with [`CloudError::ImplementedElsewhere`].
    pub fn implemented_elsewhere() -> Self {
        Self::new(FaultError::ImplementedElsewhere)
    }

    /// Fires only for the next `n` matching calls, then the method behaves normally again.
    pub fn times(mut self, n: u32) -> Self {
        self.remaining = Some(n);
        self
    }

    /// Fires only for calls whose key (Service `ns/name`, node name, provider ID) equals `key`.
    pub fn only_for(mut self, key: impl Into<String>) -> Self {
        self.only_for_key = Some(key.into());
        self
    }

    fn matches(&self, key: &str) -> bool {
        self.only_for_key.as_deref().is_none_or(|k| k == key)
    }
}

/// How many calls the log keeps by default; older ones are dropped (their counts are kept).
pub const DEFAULT_CALL_LOG_CAPACITY: usize = 10_000;

/// Call log, faults and latencies of one fake cloud, shared by all its handles.
pub(super) struct Faults {
    state: Mutex<FaultState>,
    /// Bumped after every logged call, so tests can await calls instead of polling.
    logged: watch::Sender<u64>,
    /// Where every logged call is also appended as a JSON line, when set.
    sink: Mutex<Option<std::fs::File>>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            logged: watch::Sender::new(0),
            sink: Mutex::new(None),
        }
    }
}

/// One line of the call-log file: a [`CloudCall`] with wall-clock times, which processes share.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CallLine<'a> {
    method: &'a str,
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    caller: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    started_unix_micros: u128,
    finished_unix_micros: u128,
}

impl CallLine<'_> {
    /// `call` as a line; it finished just now, so its start is now minus how long it took.
    fn write(call: &CloudCall, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let took = call.finished.saturating_duration_since(call.started);
        let line = CallLine {
            method: call.method.as_str(),
            key: &call.key,
            caller: call.caller.as_deref(),
            error: match &call.outcome {
                CallOutcome::Ok => None,
                CallOutcome::Err(message) => Some(message),
            },
            started_unix_micros: now.saturating_sub(took).as_micros(),
            finished_unix_micros: now.as_micros(),
        };
        let mut bytes = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        // One write per line on an append-mode file: lines from a killed process stay whole.
        out.write_all(&bytes)
    }
}

struct FaultState {
    faults: HashMap<Method, Vec<FaultSpec>>,
    latency: HashMap<Method, Duration>,
    /// The newest `capacity` calls, oldest first.
    calls: VecDeque<CloudCall>,
    capacity: usize,
    /// Calls per method since the last clear, including those the ring dropped.
    counts: HashMap<Method, u64>,
}

impl Default for FaultState {
    fn default() -> Self {
        Self {
            faults: HashMap::new(),
            latency: HashMap::new(),
            calls: VecDeque::new(),
            capacity: DEFAULT_CALL_LOG_CAPACITY,
            counts: HashMap::new(),
        }
    }
}

impl Faults {
    pub(super) fn add_fault(&self, method: Method, spec: FaultSpec) {
        if spec.remaining == Some(0) {
            return;
        }
        self.state
            .lock()
            .faults
            .entry(method)
            .or_default()
            .push(spec);
    }

    pub(super) fn clear_faults(&self, method: Option<Method>) {
        let mut state = self.state.lock();
        match method {
            Some(method) => {
                state.faults.remove(&method);
            }
            None => state.faults.clear(),
        }
    }

    pub(super) fn set_latency(&self, method: Method, latency: Duration) {
        let mut state = self.state.lock();
        if latency.is_zero() {
            state.latency.remove(&method);
        } else {
            state.latency.insert(method, latency);
        }
    }

    pub(super) fn latency(&self, method: Method) -> Option<Duration> {
        self.state.lock().latency.get(&method).copied()
    }

    /// The first fault (in the order they were added) that matches this call, consuming one of
    /// its remaining uses; the caller fires it ([`FaultError::fire`]) after the lock is released.
    pub(super) fn take_fault(&self, method: Method, key: &str) -> Option<FaultError> {
        let error = {
            let mut state = self.state.lock();
            let specs = state.faults.get_mut(&method)?;
            let index = specs.iter().position(|s| s.matches(key))?;
            let error = specs[index].error.clone();
            if let Some(remaining) = &mut specs[index].remaining {
                *remaining -= 1;
                if *remaining == 0 {
                    specs.remove(index);
                }
            }
            error
        };
        Some(error)
    }

    /// Appends every call logged from now on to `file` as well (see
    /// [`super::FakeCloudBuilder::call_log_file`]).
    pub(super) fn set_sink(&self, file: std::fs::File) {
        *self.sink.lock() = Some(file);
    }

    pub(super) fn record(&self, call: CloudCall) {
        tracing::debug!(call = %call, "fake cloud call");
        if let Some(file) = self.sink.lock().as_mut()
            && let Err(err) = CallLine::write(&call, file)
        {
            tracing::warn!(error = %err, "fake cloud: cannot append to the call-log file");
        }
        {
            let mut state = self.state.lock();
            *state.counts.entry(call.method).or_default() += 1;
            if state.capacity > 0 {
                if state.calls.len() >= state.capacity {
                    state.calls.pop_front();
                }
                state.calls.push_back(call);
            }
        }
        self.logged.send_modify(|n| *n += 1);
    }

    /// Keeps at most `capacity` calls in the log (0: counters only), dropping the oldest now.
    pub(super) fn set_call_log_capacity(&self, capacity: usize) {
        let mut state = self.state.lock();
        state.capacity = capacity;
        let excess = state.calls.len().saturating_sub(capacity);
        state.calls.drain(..excess);
        state.calls.shrink_to(capacity);
    }

    /// Calls to `method` since the last clear, including those the log no longer holds.
    pub(super) fn count(&self, method: Method) -> u64 {
        self.state.lock().counts.get(&method).copied().unwrap_or(0)
    }

    /// Waits until at least `n` calls to `method` were made, and returns those the log holds.
    pub(super) async fn wait_for_calls(&self, method: Method, n: usize) -> Vec<CloudCall> {
        let mut logged = self.logged.subscribe();
        let n = n as u64;
        // `self.logged` outlives this future: waiting cannot fail.
        let _ = logged.wait_for(|_| self.count(method) >= n).await;
        let state = self.state.lock();
        state
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    pub(super) fn calls(&self) -> Vec<CloudCall> {
        self.state.lock().calls.iter().cloned().collect()
    }

    pub(super) fn clear_calls(&self) {
        let mut state = self.state.lock();
        state.calls.clear();
        state.counts.clear();
    }
}

#[cfg(test)]
#[path = "faults_tests.rs"]
mod tests;
