//! Cloud provider registry: `--cloud-provider=NAME` picks a factory, `--cloud-config=PATH` feeds it.
//!
//! Upstream (`k8s.io/cloud-provider` plugins.go) keeps a process-global map and exits the
//! process on a duplicate name or an unreadable config file. Here the registry is a value the
//! binary (or an embedding distro) builds, and every failure is a [`RegistryError`] that says
//! what to change. Differences from upstream, on purpose:
//! - an empty name and `external` are errors instead of "no provider": a cloud-controller-manager
//!   without a cloud has nothing to do, and upstream's sample main turns the nil provider into a
//!   fatal exit anyway;
//! - an unknown name lists the registered ones instead of only "unknown cloud provider".

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{BoxError, CloudProvider};

/// Makes a provider from the bytes of its `--cloud-config` file (`None` when no file is given);
/// `Arc` so the registry can be cloned into whatever builds the manager.
pub type ProviderFactory =
    Arc<dyn Fn(Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, BoxError> + Send + Sync>;

/// Why a provider could not be registered or created; the message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// `--cloud-provider` was empty, or a provider was registered without a name.
    #[error(
        "--cloud-provider cannot be empty: set it to one of the registered providers: {registered}"
    )]
    EmptyName {
        /// Comma-separated registered names.
        registered: String,
    },
    /// `--cloud-provider=external` was given to the cloud-controller-manager itself.
    #[error(
        "--cloud-provider=external tells kubelet and kube-controller-manager that a separate cloud-controller-manager runs the cloud loops; this process IS that cloud-controller-manager, so set --cloud-provider to the provider it should run: one of {registered}"
    )]
    External {
        /// Comma-separated registered names.
        registered: String,
    },
    /// No factory is registered under this name.
    #[error("unknown cloud provider {name:?}: registered providers are {registered}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// Comma-separated registered names.
        registered: String,
    },
    /// A second factory was registered under a taken name.
    #[error("cloud provider {name:?} is already registered: pick another name")]
    Duplicate {
        /// The taken name.
        name: String,
    },
    /// `external` is reserved and cannot name a provider.
    #[error(
        "\"external\" is reserved (it means \"no in-process cloud\") and cannot name a provider"
    )]
    ReservedName,
    /// The `--cloud-config` file could not be read.
    #[error("could not read --cloud-config file {0}")]
    ReadConfig(#[source] controller_manager::files::FileError),
    /// The provider's factory failed (bad config, unreachable cloud, ...).
    #[error("could not init cloud provider {name:?}{}: {source}", ConfigFile(config.as_deref()))]
    Init {
        /// The provider.
        name: String,
        /// The `--cloud-config` file it was given, named in the message.
        config: Option<PathBuf>,
        /// The factory's error.
        source: BoxError,
    },
}

/// ` from --cloud-config file PATH`, or nothing without a file.
struct ConfigFile<'a>(Option<&'a Path>);

impl fmt::Display for ConfigFile<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, " from --cloud-config file {}", path.display()),
            None => Ok(()),
        }
    }
}

/// Name -> factory, in registration order (which is the order names are listed in errors).
#[derive(Clone, Default)]
pub struct CloudProviderRegistry {
    providers: Vec<(String, ProviderFactory)>,
}

impl fmt::Debug for CloudProviderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudProviderRegistry")
            .field("names", &self.names())
            .finish()
    }
}

impl CloudProviderRegistry {
    /// An empty registry, for binaries that ship only their own providers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `factory` under `name`; a taken, empty or reserved name is an error.
    pub fn register(
        &mut self,
        name: &str,
        factory: impl Fn(Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, BoxError>
        + Send
        + Sync
        + 'static,
    ) -> Result<(), RegistryError> {
        if name.is_empty() {
            return Err(RegistryError::EmptyName {
                registered: self.registered(),
            });
        }
        if name == "external" {
            return Err(RegistryError::ReservedName);
        }
        if self.factory(name).is_some() {
            return Err(RegistryError::Duplicate {
                name: name.to_owned(),
            });
        }
        tracing::debug!(provider = name, "registered cloud provider");
        self.providers.push((name.to_owned(), Arc::new(factory)));
        Ok(())
    }

    /// Registered names, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.providers.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Whether `name` is registered (upstream `IsCloudProvider`).
    pub fn contains(&self, name: &str) -> bool {
        self.factory(name).is_some()
    }

    /// Creates the provider `name`, reading `cloud_config` first when given (upstream
    /// `InitCloudProvider`).
    pub fn init(
        &self,
        name: &str,
        cloud_config: Option<&Path>,
    ) -> Result<Arc<dyn CloudProvider>, RegistryError> {
        if name.is_empty() {
            return Err(RegistryError::EmptyName {
                registered: self.registered(),
            });
        }
        if name == "external" {
            return Err(RegistryError::External {
                registered: self.registered(),
            });
        }
        let factory = self.factory(name).ok_or_else(|| RegistryError::Unknown {
            name: name.to_owned(),
            registered: self.registered(),
        })?;
        let config = match cloud_config {
            Some(path) => Some(
                controller_manager::files::read_bounded(path).map_err(RegistryError::ReadConfig)?,
            ),
            None => None,
        };
        let provider = factory(config.as_deref()).map_err(|source| RegistryError::Init {
            name: name.to_owned(),
            config: cloud_config.map(Path::to_owned),
            source,
        })?;
        tracing::info!(provider = name, config = ?cloud_config, "cloud provider initialized");
        Ok(provider)
    }

    fn factory(&self, name: &str) -> Option<&ProviderFactory> {
        self.providers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| f)
    }

    fn registered(&self) -> String {
        if self.providers.is_empty() {
            "(none registered)".to_owned()
        } else {
            self.names().join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> CloudProviderRegistry {
        let mut r = CloudProviderRegistry::new();
        r.register("stub", |_| Err("never built".into())).unwrap();
        r.register("broken", |_| Err("no credentials".into()))
            .unwrap();
        r
    }

    fn err(r: &CloudProviderRegistry, name: &str, path: Option<&Path>) -> RegistryError {
        match r.init(name, path) {
            Ok(_) => panic!("init({name:?}) should fail"),
            Err(e) => e,
        }
    }

    #[test]
    fn empty_name_says_which_names_exist() {
        let msg = err(&registry(), "", None).to_string();
        assert!(msg.contains("--cloud-provider cannot be empty"), "{msg}");
        assert!(msg.contains("stub, broken"), "{msg}");
    }

    #[test]
    fn external_explains_that_this_is_the_external_provider() {
        let e = err(&registry(), "external", None);
        assert!(matches!(e, RegistryError::External { .. }));
        assert!(
            e.to_string()
                .contains("this process IS that cloud-controller-manager")
        );
    }

    #[test]
    fn unknown_lists_registered_names() {
        let msg = err(&registry(), "aws", None).to_string();
        assert_eq!(
            msg,
            "unknown cloud provider \"aws\": registered providers are stub, broken"
        );
        let msg = err(&CloudProviderRegistry::new(), "aws", None).to_string();
        assert!(msg.contains("(none registered)"), "{msg}");
    }

    #[test]
    fn unreadable_config_names_the_path() {
        let path = Path::new("/nonexistent/cloud.yaml");
        let e = err(&registry(), "stub", Some(path));
        assert!(matches!(e, RegistryError::ReadConfig(_)));
        assert!(e.to_string().contains("/nonexistent/cloud.yaml"), "{e}");
    }

    #[test]
    fn factory_failure_is_wrapped_with_the_provider_name() {
        let msg = err(&registry(), "broken", None).to_string();
        assert_eq!(
            msg,
            "could not init cloud provider \"broken\": no credentials"
        );
    }

    #[test]
    fn register_rejects_duplicate_empty_and_reserved_names() {
        let mut r = registry();
        let ok =
            |_: Option<&[u8]>| -> Result<Arc<dyn CloudProvider>, BoxError> { Err("unused".into()) };
        assert!(matches!(
            r.register("stub", ok),
            Err(RegistryError::Duplicate { .. })
        ));
        assert!(matches!(
            r.register("", ok),
            Err(RegistryError::EmptyName { .. })
        ));
        assert!(matches!(
            r.register("external", ok),
            Err(RegistryError::ReservedName)
        ));
        r.register("mine", ok).unwrap();
        assert_eq!(r.names(), vec!["stub", "broken", "mine"]);
        assert!(r.contains("mine") && !r.contains("aws"));
    }
}
