//! The name → initializer map (upstream `newControllerInitializers`): what controllers a manager
//! knows, their aliases, whether `*` turns them on, and how each is built.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::context::InitContext;
use super::selection::{ControllerSelection, KnownControllers};

/// What an initializer decided.
pub enum InitOutcome {
    /// The controller registered its informers and handlers; the future runs its workers and is
    /// polled only after every cache has synced. It must return once the context's shutdown
    /// token is cancelled and its in-flight work has drained. With
    /// [`super::ManagerConfig::warm_standby`] the initializer itself runs on a standby, before the
    /// start hook: it must not write, call the cloud or spawn anything; the future runs on the
    /// leader only.
    Started(BoxFuture<'static, ()>),
    /// The controller cannot run in this configuration (e.g. the cloud lacks a facet); logged as
    /// "Skipping", as upstream.
    NotStarted(String),
}

impl fmt::Debug for InitOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitOutcome::Started(_) => f.write_str("Started"),
            InitOutcome::NotStarted(reason) => f.debug_tuple("NotStarted").field(reason).finish(),
        }
    }
}

/// An initializer's failure; it aborts start-up, so the message must say what to change.
pub type InitError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Builds one controller from the shared context.
pub type InitFn<C> =
    Arc<dyn Fn(InitContext<C>) -> BoxFuture<'static, Result<InitOutcome, InitError>> + Send + Sync>;

/// A controller's start-up requirement, checked against the embedder's context before anything
/// starts (see [`Initializer::validate`]).
pub type ValidateFn<C> = Arc<dyn Fn(&C) -> Result<(), InitError> + Send + Sync>;

/// One entry of the map.
pub struct Initializer<C> {
    pub(crate) name: String,
    pub(crate) aliases: Vec<String>,
    pub(crate) enabled_by_default: bool,
    /// `Ok` if the controller may run sharded (`--sharded-controllers`), else why not.
    pub(crate) shardable: Result<(), String>,
    pub(crate) init: InitFn<C>,
    pub(crate) validate: Option<ValidateFn<C>>,
}

/// Why an unmarked controller cannot be sharded.
const NOT_DECLARED_SHARDABLE: &str =
    "its initializer does not declare it shardable (Initializer::shardable)";

impl<C> Clone for Initializer<C> {
    fn clone(&self) -> Self {
        Initializer {
            name: self.name.clone(),
            aliases: self.aliases.clone(),
            enabled_by_default: self.enabled_by_default,
            shardable: self.shardable.clone(),
            init: self.init.clone(),
            validate: self.validate.clone(),
        }
    }
}

impl<C: Send + Sync + 'static> Initializer<C> {
    /// A controller known by its canonical `name`, on by default under `--controllers=*`.
    pub fn new<F, Fut>(name: impl Into<String>, init: F) -> Self
    where
        F: Fn(InitContext<C>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<InitOutcome, InitError>> + Send + 'static,
    {
        Initializer {
            name: name.into(),
            aliases: Vec::new(),
            enabled_by_default: true,
            shardable: Err(NOT_DECLARED_SHARDABLE.to_string()),
            init: Arc::new(move |ctx| Box::pin(init(ctx))),
            validate: None,
        }
    }

    /// Another accepted spelling, e.g. upstream's legacy short names (`cloud-node`).
    pub fn alias(mut self, alias: impl Into<String>) -> Self {
        self.aliases.push(alias.into());
        self
    }

    /// Leaves the controller off under `*`; it runs only when named explicitly.
    pub fn disabled_by_default(mut self) -> Self {
        self.enabled_by_default = false;
        self
    }

    /// Declares that the controller may run sharded: on every replica at once, each reconciling
    /// the keys its ring assigns it. Its initializer must then gate its reconciles through
    /// [`InitContext::shard`] (a [`crate::shard::ShardLayer`] and
    /// [`crate::shard::requeue_gained`]), and any periodic loop must act only on admitted keys.
    pub fn shardable(mut self) -> Self {
        self.shardable = Ok(());
        self
    }

    /// Says why the controller cannot be sharded; `--sharded-controllers` naming it is refused
    /// with this reason.
    pub fn not_shardable(mut self, reason: impl Into<String>) -> Self {
        self.shardable = Err(reason.into());
        self
    }

    /// Checks what the controller needs before anything starts (no admin port, no Lease, no
    /// informer), when it is selected: `check` gets the context every initializer gets and
    /// returns the error the initializer would return, so a configuration that can never start
    /// is refused at once instead of after the Lease is won. A configuration in which the
    /// initializer only skips ([`InitOutcome::NotStarted`]) must pass. Keep the initializer's own
    /// check: it is the backstop.
    pub fn validate(
        mut self,
        check: impl Fn(&C) -> Result<(), InitError> + Send + Sync + 'static,
    ) -> Self {
        self.validate = Some(Arc::new(check));
        self
    }

    /// The canonical name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Why the map refused an entry.
#[derive(Debug, thiserror::Error)]
pub enum InitializersError {
    /// Two entries (or an alias and a name) share a spelling.
    #[error("controller name or alias {0:?} is registered twice")]
    Duplicate(String),
    /// A name that `--controllers` could never select.
    #[error(
        "controller name or alias {0:?} is not valid: it must be non-empty, not '*', and not start with '-'"
    )]
    InvalidName(String),
}

/// The ordered map of every controller a manager can run; embedders add theirs beside the stock ones.
pub struct Initializers<C> {
    entries: Vec<Initializer<C>>,
}

impl<C> Default for Initializers<C> {
    fn default() -> Self {
        Initializers {
            entries: Vec::new(),
        }
    }
}

impl<C> Clone for Initializers<C> {
    fn clone(&self) -> Self {
        Initializers {
            entries: self.entries.clone(),
        }
    }
}

impl<C: Send + Sync + 'static> Initializers<C> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry after the existing ones. Clashing names are reported by [`Self::check`]
    /// (and so by the manager before anything starts), which keeps building the map infallible.
    pub fn with(mut self, entry: Initializer<C>) -> Self {
        self.entries.push(entry);
        self
    }

    /// Adds every entry of `other` after this map's own.
    pub fn merge(mut self, other: Initializers<C>) -> Self {
        self.entries.extend(other.entries);
        self
    }

    /// Removes an entry by canonical name, e.g. to replace a stock controller with one's own.
    pub fn without(mut self, name: &str) -> Self {
        self.entries.retain(|e| e.name != name);
        self
    }

    /// Fails when two entries share a name or alias, or one is spelled `*` or empty.
    pub fn check(&self) -> Result<(), InitializersError> {
        let mut seen = std::collections::HashSet::new();
        for e in &self.entries {
            for spelling in std::iter::once(&e.name).chain(e.aliases.iter()) {
                if spelling.is_empty() || spelling == "*" || spelling.starts_with('-') {
                    return Err(InitializersError::InvalidName(spelling.clone()));
                }
                if !seen.insert(spelling.as_str()) {
                    return Err(InitializersError::Duplicate(spelling.clone()));
                }
            }
        }
        Ok(())
    }

    /// Canonical names, aliases and defaults, for `--controllers` parsing and `--help`.
    pub fn known(&self) -> KnownControllers {
        let mut known = KnownControllers::new();
        for e in &self.entries {
            let aliases: Vec<&str> = e.aliases.iter().map(String::as_str).collect();
            known.add(&e.name, &aliases, !e.enabled_by_default);
        }
        known
    }

    /// What the [`Initializer::validate`] checks of the controllers `selection` enables refuse
    /// in `extra`, each as `controller "NAME": ERROR`, in registration order.
    pub(crate) fn unmet_requirements(
        &self,
        selection: &ControllerSelection,
        extra: &C,
    ) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| selection.is_enabled(&e.name))
            .filter_map(|e| {
                let check = e.validate.as_ref()?;
                check(extra)
                    .err()
                    .map(|err| format!("controller {:?}: {err}", e.name))
            })
            .collect()
    }

    /// Entries in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Initializer<C>> {
        self.entries.iter()
    }
}
