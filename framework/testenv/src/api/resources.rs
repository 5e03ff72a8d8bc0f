//! The resource table: one entry per built-in type (group, version, kind, plural, scope,
//! subresources, strategy, field selectors, strategic-merge-patch metadata). Handlers are generic
//! over the served types (`types::Served`: this table plus what CRDs register at run time), so
//! serving a new built-in type is one more entry here.

/// Which type-specific defaulting and validation a type gets (see `admission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Only the generic object-meta rules.
    Generic,
    /// Node: not-ready taint on create, zero-valued status fields.
    Node,
    /// Service: clusterIP / nodePort allocation, defaults, immutable fields.
    Service,
    /// Namespace: `kubernetes` finalizer, phase, name label, immortal system namespaces.
    Namespace,
    /// CustomResourceDefinition: defaults, validation, names and conditions (see `crd`).
    Crd,
    /// A type a CRD defines: its structural schema (never in the table, see `types`).
    CustomResource,
}

/// How a strategic merge patch treats one list field (from the Go `patchStrategy` /
/// `patchMergeKey` struct tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// `patchStrategy:"merge"` with `patchMergeKey`: items are merged by that key.
    MergeByKey(&'static str),
    /// `patchStrategy:"merge"` on a list of scalars: set union, order kept.
    MergeScalars,
}

/// The name rule upstream validates `metadata.name` with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most types).
    Subdomain,
    /// RFC 1123 label (namespaces).
    Label,
    /// RFC 1035 label (services).
    Dns1035,
    /// Any path-segment-safe name (events).
    PathSegment,
}

/// One served resource type.
#[derive(Debug)]
pub struct ResourceType {
    /// API group, empty for core.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name (URL segment).
    pub plural: &'static str,
    /// Singular name for discovery.
    pub singular: &'static str,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether `/status` is a separate subresource (main endpoint ignores status and vice versa).
    pub status_subresource: bool,
    /// Whether PUT on a missing object creates it (upstream `AllowCreateOnUpdate`).
    pub create_on_update: bool,
    /// Defaulting / validation hooks.
    pub strategy: Strategy,
    /// Name validation rule.
    pub name_rule: NameRule,
    /// Field selectors beyond `metadata.name` / `metadata.namespace`: (selector label, dotted
    /// JSON path of the value it matches).
    pub field_selectors: &'static [(&'static str, &'static str)],
    /// Strategic-merge-patch list strategies: (dotted path of the list, strategy). Lists not named
    /// here are replaced whole, as upstream does for lists without a patch strategy.
    pub patch_lists: &'static [(&'static str, ListStrategy)],
}

const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject.kind", "involvedObject.kind"),
    ("involvedObject.namespace", "involvedObject.namespace"),
    ("involvedObject.name", "involvedObject.name"),
    ("involvedObject.uid", "involvedObject.uid"),
    ("involvedObject.apiVersion", "involvedObject.apiVersion"),
    (
        "involvedObject.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    ("involvedObject.fieldPath", "involvedObject.fieldPath"),
    ("reason", "reason"),
    ("reportingComponent", "reportingComponent"),
    ("source", "source.component"),
    ("type", "type"),
];

const EVENTS_V1_FIELDS: &[(&str, &str)] = &[
    ("regarding.kind", "regarding.kind"),
    ("regarding.namespace", "regarding.namespace"),
    ("regarding.name", "regarding.name"),
    ("regarding.uid", "regarding.uid"),
    ("regarding.apiVersion", "regarding.apiVersion"),
    ("regarding.resourceVersion", "regarding.resourceVersion"),
    ("regarding.fieldPath", "regarding.fieldPath"),
    ("reason", "reason"),
    ("reportingController", "reportingController"),
    ("type", "type"),
];

/// Every served type.
pub static TABLE: &[ResourceType] = &[
    ResourceType {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        namespaced: false,
        status_subresource: true,
        create_on_update: false,
        strategy: Strategy::Node,
        name_rule: NameRule::Subdomain,
        field_selectors: &[("spec.unschedulable", "spec.unschedulable")],
        patch_lists: &[
            ("status.conditions", ListStrategy::MergeByKey("type")),
            ("status.addresses", ListStrategy::MergeByKey("type")),
            ("status.images", ListStrategy::MergeByKey("names")),
            ("spec.podCIDRs", ListStrategy::MergeScalars),
        ],
    },
    ResourceType {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        short_names: &["svc"],
        namespaced: true,
        status_subresource: true,
        create_on_update: false,
        strategy: Strategy::Service,
        name_rule: NameRule::Dns1035,
        field_selectors: &[
            ("spec.clusterIP", "spec.clusterIP"),
            ("spec.type", "spec.type"),
        ],
        patch_lists: &[
            ("spec.ports", ListStrategy::MergeByKey("port")),
            ("status.conditions", ListStrategy::MergeByKey("type")),
        ],
    },
    ResourceType {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        namespaced: false,
        status_subresource: true,
        create_on_update: false,
        strategy: Strategy::Namespace,
        name_rule: NameRule::Label,
        field_selectors: &[("status.phase", "status.phase")],
        patch_lists: &[("status.conditions", ListStrategy::MergeByKey("type"))],
    },
    ResourceType {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        short_names: &[],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[("type", "type")],
        patch_lists: &[],
    },
    ResourceType {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        short_names: &["ep"],
        namespaced: true,
        status_subresource: false,
        create_on_update: true,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        namespaced: true,
        status_subresource: false,
        create_on_update: true,
        strategy: Strategy::Generic,
        name_rule: NameRule::PathSegment,
        field_selectors: EVENT_FIELDS,
        patch_lists: &[],
    },
    ResourceType {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        namespaced: true,
        status_subresource: true,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[
            ("spec.nodeName", "spec.nodeName"),
            ("spec.restartPolicy", "spec.restartPolicy"),
            ("spec.schedulerName", "spec.schedulerName"),
            ("spec.serviceAccountName", "spec.serviceAccountName"),
            ("status.phase", "status.phase"),
            ("status.podIP", "status.podIP"),
            ("status.nominatedNodeName", "status.nominatedNodeName"),
        ],
        patch_lists: &[
            ("spec.containers", ListStrategy::MergeByKey("name")),
            ("spec.initContainers", ListStrategy::MergeByKey("name")),
            ("spec.volumes", ListStrategy::MergeByKey("name")),
            ("spec.tolerations", ListStrategy::MergeByKey("key")),
            ("status.conditions", ListStrategy::MergeByKey("type")),
        ],
    },
    ResourceType {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        short_names: &["crd", "crds"],
        namespaced: false,
        status_subresource: true,
        create_on_update: false,
        strategy: Strategy::Crd,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[("status.conditions", ListStrategy::MergeByKey("type"))],
    },
    ResourceType {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        short_names: &[],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        namespaced: true,
        status_subresource: false,
        create_on_update: true,
        strategy: Strategy::Generic,
        name_rule: NameRule::PathSegment,
        field_selectors: EVENTS_V1_FIELDS,
        patch_lists: &[],
    },
    ResourceType {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        short_names: &[],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    // Authentication and authorization (`auth`): ServiceAccounts, the create-only review APIs
    // (answered by `auth`, never stored) and RBAC.
    ResourceType {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        short_names: &["sa"],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenReview",
        plural: "tokenreviews",
        singular: "",
        short_names: &[],
        namespaced: false,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        singular: "",
        short_names: &[],
        namespaced: false,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        singular: "",
        short_names: &[],
        namespaced: false,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "LocalSubjectAccessReview",
        plural: "localsubjectaccessreviews",
        singular: "",
        short_names: &[],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        singular: "clusterrole",
        short_names: &[],
        namespaced: false,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::PathSegment,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        short_names: &[],
        namespaced: false,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::PathSegment,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        singular: "role",
        short_names: &[],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::PathSegment,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        singular: "rolebinding",
        short_names: &[],
        namespaced: true,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::PathSegment,
        field_selectors: &[],
        patch_lists: &[],
    },
    ResourceType {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectRulesReview",
        plural: "selfsubjectrulesreviews",
        singular: "",
        short_names: &[],
        namespaced: false,
        status_subresource: false,
        create_on_update: false,
        strategy: Strategy::Generic,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
    },
];

/// Id of a served type: an index in [`TABLE`], or (from `TABLE.len()` on) a CRD-defined type in
/// `types::Registry`; the store keys objects by it.
pub type ResId = usize;

/// Finds a built-in type by group, version and plural (`types::Registry::lookup` also finds the
/// CRD-defined ones).
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<ResId> {
    TABLE
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}
