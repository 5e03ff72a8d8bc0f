//! The served types at run time: [`Served`] is either a built-in kind of the static
//! [`TABLE`](crate::api::kinds::TABLE) or a type a CustomResourceDefinition registered, and
//! [`Registry`] holds the CRD-defined ones, whose ids follow the built-ins'.
//!
//! # The one list-type lookup
//!
//! [`Served::list_type`] answers "what kind of list is at this path, with which keys" for every
//! type, and it is the only place a patch asks: strategic merge patch goes through it (custom
//! resources take none: 415), and server-side apply should too, to merge lists the way the type
//! declares. Paths are dotted field names without indices (the items of a list share the list's
//! path), e.g. `spec.ports` or `status.conditions`. (The custom-resource schema validator
//! enforces `set` / `map` uniqueness from the same schema fields, in `api::structural`.)
//! - built-ins: from the kind's `patch_lists` (the Go `patchStrategy`/`patchMergeKey` tags) plus
//!   the ObjectMeta lists every type shares;
//! - custom resources: from the structural schema's `x-kubernetes-list-type` and
//!   `x-kubernetes-list-map-keys`.
//!
//! `None` means atomic: the list is replaced whole.

use std::sync::Arc;

use crate::api::structural::Schema;

use crate::api::kind::{Kind, Lifecycle, ListStrategy, NameRule};
use crate::api::kinds::{ResId, TABLE};
pub use crate::api::structural::ListType;

/// The `scale` subresource of a custom resource: where the replica counts live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSpec {
    /// `specReplicasPath`, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// `statusReplicasPath`, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// `labelSelectorPath`, if any.
    pub label_selector: Option<String>,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Header.
    pub name: String,
    /// OpenAPI type (`integer`, `number`, `string`, `boolean`, `date`).
    pub ty: String,
    /// OpenAPI format.
    pub format: String,
    /// Description (defaulted from the JSONPath as upstream).
    pub description: String,
    /// 0 = shown, >0 = only with `-o wide`.
    pub priority: i64,
    /// The JSONPath, e.g. `.spec.size`.
    pub json_path: String,
}

/// One served version of a CRD-defined type.
#[derive(Debug)]
pub struct CustomType {
    /// `metadata.name` of the CRD.
    pub crd: String,
    /// API group.
    pub group: String,
    /// This version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// List kind.
    pub list_kind: String,
    /// Plural (URL segment).
    pub plural: String,
    /// Singular.
    pub singular: String,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Categories (`kubectl get <category>`).
    pub categories: Vec<String>,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// `subresources.status` declared.
    pub status: bool,
    /// `subresources.scale` declared.
    pub scale: Option<ScaleSpec>,
    /// The structural schema of this version.
    pub schema: Option<Schema>,
    /// The schema's CEL rules, compiled (`None` when it has none).
    pub rules: Option<crate::api::cel::compile::RuleTree>,
    /// The `openAPIV3Schema` as written, for the OpenAPI document.
    pub openapi: Option<serde_json::Value>,
    /// Printer columns of this version (defaulted to Age when none are declared).
    pub columns: Vec<Column>,
    /// Field selector labels from `selectableFields` (`spec.color`).
    pub selectable: Vec<String>,
    /// The id whose object map holds this CRD's objects (every version shares it).
    pub objects: ResId,
    /// The version objects are stored at (`apiVersion` in the store).
    pub storage_version: String,
    /// `storageVersionHash` for discovery.
    pub storage_hash: String,
}

/// A served type: a built-in table entry or a CRD-defined version. Cheap to clone.
#[derive(Debug, Clone)]
pub enum Served {
    /// One of [`TABLE`].
    Builtin(&'static Kind),
    /// Registered by a CRD.
    Custom(Arc<CustomType>),
}

/// List strategies every built-in type shares through ObjectMeta.
const COMMON_PATCH_LISTS: &[(&str, ListStrategy)] = &[
    ("metadata.finalizers", ListStrategy::MergeScalars),
    ("metadata.ownerReferences", ListStrategy::MergeByKey("uid")),
];

impl Served {
    /// API group (empty for core).
    pub fn group(&self) -> &str {
        match self {
            Served::Builtin(k) => k.ty.group,
            Served::Custom(c) => &c.group,
        }
    }

    /// API version.
    pub fn version(&self) -> &str {
        match self {
            Served::Builtin(k) => k.ty.version,
            Served::Custom(c) => &c.version,
        }
    }

    /// Kind.
    pub fn kind(&self) -> &str {
        match self {
            Served::Builtin(k) => k.ty.kind,
            Served::Custom(c) => &c.kind,
        }
    }

    /// Kind of the list (`NodeList`, or the CRD's `listKind`).
    pub fn list_kind(&self) -> String {
        match self {
            Served::Builtin(k) => format!("{}List", k.ty.kind),
            Served::Custom(c) => c.list_kind.clone(),
        }
    }

    /// Plural resource name.
    pub fn plural(&self) -> &str {
        match self {
            Served::Builtin(k) => k.ty.plural,
            Served::Custom(c) => &c.plural,
        }
    }

    /// Singular name.
    pub fn singular(&self) -> &str {
        match self {
            Served::Builtin(k) => k.names.singular,
            Served::Custom(c) => &c.singular,
        }
    }

    /// kubectl short names.
    pub fn short_names(&self) -> Vec<&str> {
        match self {
            Served::Builtin(k) => k.names.short.to_vec(),
            Served::Custom(c) => c.short_names.iter().map(String::as_str).collect(),
        }
    }

    /// Discovery categories (`all` for the built-ins upstream puts there).
    pub fn categories(&self) -> Vec<&str> {
        match self {
            Served::Builtin(k) => k.names.categories.to_vec(),
            Served::Custom(c) => c.categories.iter().map(String::as_str).collect(),
        }
    }

    /// Whether objects live in a namespace.
    pub fn namespaced(&self) -> bool {
        match self {
            Served::Builtin(k) => k.ty.namespaced,
            Served::Custom(c) => c.namespaced,
        }
    }

    /// Whether `/status` is a separate subresource.
    pub fn status_subresource(&self) -> bool {
        match self {
            Served::Builtin(k) => k.rest.status,
            Served::Custom(c) => c.status,
        }
    }

    /// The `/scale` subresource, if declared.
    pub fn scale(&self) -> Option<&ScaleSpec> {
        match self {
            Served::Builtin(_) => None,
            Served::Custom(c) => c.scale.as_ref(),
        }
    }

    /// Whether PUT on a missing object creates it.
    pub fn create_on_update(&self) -> bool {
        match self {
            Served::Builtin(k) => k.rest.create_on_update,
            Served::Custom(_) => false,
        }
    }

    /// What storing or deleting an object sets off beyond itself (custom resources: nothing;
    /// their CRD follows them, see `crd::lifecycle`).
    pub fn lifecycle(&self) -> Lifecycle {
        match self {
            Served::Builtin(k) => k.lifecycle,
            Served::Custom(_) => Lifecycle::Object,
        }
    }

    /// The `metadata.name` rule (custom resources: RFC 1123 subdomain, as upstream).
    pub fn name_rule(&self) -> NameRule {
        match self {
            Served::Builtin(k) => k.name_rule,
            Served::Custom(_) => NameRule::Subdomain,
        }
    }

    /// Whether the server keeps `metadata.generation` (1 on create, +1 on every change outside
    /// `metadata` and `status`): custom resources and the built-ins whose upstream strategy does
    /// (CRDs, EndpointSlices, and Pods since 1.33); not Nodes, Services, ConfigMaps, ....
    pub fn keeps_generation(&self) -> bool {
        match self {
            Served::Builtin(k) => k.rest.generation,
            Served::Custom(_) => true,
        }
    }

    /// The JSON path (dotted) a field selector label selects on, beyond `metadata.name` and
    /// `metadata.namespace`: the kind's field selectors, or a CRD's `selectableFields`.
    pub fn field_selector(&self, label: &str) -> Option<String> {
        match self {
            Served::Builtin(k) => k
                .field_selectors
                .iter()
                .find(|(l, _)| *l == label)
                .map(|(_, p)| (*p).to_string()),
            Served::Custom(c) => c.selectable.iter().find(|l| *l == label).cloned(),
        }
    }

    /// The list type at `path` (see the module doc); `None` = atomic.
    pub fn list_type(&self, path: &str) -> Option<ListType> {
        match self {
            Served::Builtin(k) => COMMON_PATCH_LISTS
                .iter()
                .chain(k.patch_lists.iter())
                .find(|(p, _)| *p == path)
                .map(|(_, s)| match s {
                    ListStrategy::MergeByKey(k) => ListType::Map(vec![(*k).to_string()]),
                    ListStrategy::MergeScalars => ListType::Set,
                }),
            Served::Custom(c) => {
                if let Some(meta) = path.strip_prefix("metadata.") {
                    return match meta {
                        "finalizers" => Some(ListType::Set),
                        "ownerReferences" => Some(ListType::Map(vec!["uid".into()])),
                        _ => None,
                    };
                }
                c.schema.as_ref().and_then(|s| s.list_type(path))
            }
        }
    }

    /// `apiVersion` of the objects.
    pub fn api_version(&self) -> String {
        if self.group().is_empty() {
            self.version().to_string()
        } else {
            format!("{}/{}", self.group(), self.version())
        }
    }

    /// The built-in kind, if this is one.
    pub fn builtin(&self) -> Option<&'static Kind> {
        match self {
            Served::Builtin(k) => Some(k),
            Served::Custom(_) => None,
        }
    }

    /// The CRD-defined type, if this is one.
    pub fn custom(&self) -> Option<&CustomType> {
        match self {
            Served::Builtin(_) => None,
            Served::Custom(c) => Some(c),
        }
    }
}

/// The CRD-defined types; id `TABLE.len() + i` is `custom[i]` (`None` once its CRD is gone or
/// the version is no longer served; ids are never reused, so a stale id finds nothing).
#[derive(Debug, Default)]
pub struct Registry {
    custom: Vec<Option<Arc<CustomType>>>,
}

impl Registry {
    /// The type with this id, if still served.
    pub fn get(&self, res: ResId) -> Option<Served> {
        match TABLE.get(res) {
            Some(r) => Some(Served::Builtin(r)),
            None => self
                .custom
                .get(res - TABLE.len())
                .and_then(Option::as_ref)
                .map(|c| Served::Custom(c.clone())),
        }
    }

    /// The id a request for group/version/plural addresses.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<ResId> {
        crate::api::kinds::lookup(group, version, plural).or_else(|| {
            self.custom
                .iter()
                .position(|c| {
                    c.as_ref().is_some_and(|c| {
                        c.group == group && c.version == version && c.plural == plural
                    })
                })
                .map(|i| i + TABLE.len())
        })
    }

    /// Every served type, built-ins first.
    pub fn all(&self) -> Vec<(ResId, Served)> {
        let builtins = TABLE
            .iter()
            .enumerate()
            .map(|(i, r)| (i, Served::Builtin(r)));
        let custom = self.custom.iter().enumerate().filter_map(|(i, c)| {
            c.as_ref()
                .map(|c| (i + TABLE.len(), Served::Custom(c.clone())))
        });
        builtins.chain(custom).collect()
    }

    /// The id the next registered version gets.
    pub fn next_id(&self) -> ResId {
        TABLE.len() + self.custom.len()
    }

    /// The ids currently registered for a CRD, by version.
    pub fn of_crd(&self, crd: &str) -> Vec<(ResId, Arc<CustomType>)> {
        self.custom
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i + TABLE.len(), c.clone())))
            .filter(|(_, c)| c.crd == crd)
            .collect()
    }

    /// Serves `ty` under `res` (an id from [`Registry::next_id`] or one of the CRD's own).
    pub fn set(&mut self, res: ResId, ty: CustomType) {
        let i = res - TABLE.len();
        if i >= self.custom.len() {
            self.custom.resize(i + 1, None);
        }
        self.custom[i] = Some(Arc::new(ty));
    }

    /// Stops serving `res`.
    pub fn unset(&mut self, res: ResId) {
        if let Some(slot) = res
            .checked_sub(TABLE.len())
            .and_then(|i| self.custom.get_mut(i))
        {
            *slot = None;
        }
    }
}
