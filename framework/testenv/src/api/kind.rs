//! What a built-in kind is, as one value ([`Kind`]): its type (names, scope and OpenAPI schema
//! from k8s-openapi), discovery names, REST behaviour, name rule, field selectors and strategic
//! merge list strategies, admission (defaults and validation), printer, protobuf message and
//! server-side-apply shape. Every field is required, so a kind that leaves one out does not
//! compile (within `rest`, `admission` and `apply` a kind names what it has and takes the rest
//! from `Rest::PLAIN`, `Admission::NONE`, `Shape::NONE`); the per-kind values are in `kinds`,
//! one file each.

use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use prost::Message;
use serde_json::Value;

use crate::api::cluster::Cluster;
use crate::api::protobuf::{self, Json};
use crate::api::status::{ApiError, Cause};

/// One built-in kind.
#[derive(Debug)]
pub struct Kind {
    /// Group, version, kind, plural, scope and OpenAPI schema, from the k8s-openapi type.
    pub ty: Type,
    /// Discovery names beyond the type's own.
    pub names: Names,
    /// How the REST storage treats it.
    pub rest: Rest,
    /// What storing or deleting one sets off beyond the object itself.
    pub lifecycle: Lifecycle,
    /// The rule upstream validates `metadata.name` with.
    pub name_rule: NameRule,
    /// Field selectors beyond `metadata.name` / `metadata.namespace`: (selector label, dotted
    /// JSON path of the value it matches).
    pub field_selectors: &'static [(&'static str, &'static str)],
    /// Strategic-merge-patch list strategies: (dotted path of the list, strategy). Lists not named
    /// here are replaced whole, as upstream does for lists without a patch strategy.
    pub patch_lists: &'static [(&'static str, ListStrategy)],
    /// Defaults and validation.
    pub admission: Admission,
    /// The columns `kubectl get` shows, and the cells of one object.
    pub printer: Printer,
    /// The k8s-pb message of the kind and of its list.
    pub protobuf: Protobuf,
    /// What server-side apply needs to know beyond the list strategies.
    pub apply: Shape,
}

/// The k8s-openapi type of a kind: its names, scope and schema in one place.
#[derive(Debug, Clone, Copy)]
pub struct Type {
    /// API group, empty for core.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name (URL segment).
    pub plural: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Adds the type's JSON schema to a generator, answering a `$ref` to it.
    pub schema: fn(&mut SchemaGenerator) -> Value,
}

/// Whether a k8s-openapi scope is a namespace.
pub trait Scope {
    /// Objects live in a namespace.
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

impl Type {
    /// The type of `T`.
    pub const fn of<T>() -> Type
    where
        T: k8s_openapi::Resource + JsonSchema,
        T::Scope: Scope,
    {
        Type {
            group: T::GROUP,
            version: T::VERSION,
            kind: T::KIND,
            plural: T::URL_PATH_SEGMENT,
            namespaced: <T::Scope as Scope>::NAMESPACED,
            schema: schema_of::<T>,
        }
    }
}

/// The `$ref` of `T`'s schema, its definitions added to `g`.
pub fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

/// Discovery's names for a kind besides its plural.
#[derive(Debug, Clone, Copy)]
pub struct Names {
    /// Singular name (empty for the review APIs, as upstream).
    pub singular: &'static str,
    /// kubectl short names.
    pub short: &'static [&'static str],
    /// Categories (`kubectl get all`).
    pub categories: &'static [&'static str],
}

/// How the REST storage treats a kind.
#[derive(Debug, Clone, Copy)]
pub struct Rest {
    /// Whether `/status` is a separate subresource (main endpoint ignores status and vice versa).
    pub status: bool,
    /// Whether PUT on a missing object creates it (upstream `AllowCreateOnUpdate`).
    pub create_on_update: bool,
    /// Whether the server keeps `metadata.generation` (1 on create, +1 on every change outside
    /// `metadata` and `status`), as the kind's upstream strategy does.
    pub generation: bool,
    /// The verbs discovery lists, in upstream's order.
    pub verbs: &'static [&'static str],
}

/// The verbs of a kind stored with every REST operation.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl Rest {
    /// No status subresource, PUT does not create, no generation, every verb.
    pub const PLAIN: Rest = Rest {
        status: false,
        create_on_update: false,
        generation: false,
        verbs: VERBS,
    };
}

/// What storing or deleting an object of a kind sets off beyond the object itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Nothing.
    Object,
    /// Namespace: deleting one deletes its content; the system namespaces cannot be deleted.
    Namespace,
    /// CustomResourceDefinition: serves, changes and retires the types it defines (`crd`).
    CustomResourceDefinition,
    /// ValidatingAdmissionPolicy: its status controller's `observedGeneration` and
    /// `typeChecking` (`admission::policies::status`).
    AdmissionPolicy,
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

/// A kind's own steps in a write, in the order `admission` runs them (`None`: nothing to do).
/// `old` is the stored object on update, `None` on create.
#[derive(Debug, Clone, Copy)]
pub struct Admission {
    /// The strategy's PrepareForCreate / PrepareForUpdate, before defaulting.
    pub prepare: Option<fn(&mut Value, Option<&Value>)>,
    /// Defaults and conversions on every write (create, update, patch result).
    pub defaults: Option<fn(&mut Value)>,
    /// What the create-time admission plugins add, before validation.
    pub on_create: Option<fn(&mut Value)>,
    /// The kind's validation of a defaulted object (after the object-meta rules).
    pub validate: Option<Validate>,
    /// After validation (and, on create, the namespace and name checks): what needs the cluster
    /// (Service addresses) or runs after the field manager (Node taint, Namespace finalizer).
    pub admit: Option<Admit>,
    /// What a create's writer does not own: removes from the created object (2nd argument) what
    /// admission added that the request (1st) did not carry.
    pub untracked: Option<fn(&Value, &mut Value)>,
    /// The group a 422 names when it is not the kind's own (events.k8s.io Events are validated
    /// as the core Event they convert to).
    pub invalid_as: Option<&'static str>,
}

/// A kind's validation of an object (`old` on update): its 422 causes.
pub type Validate = fn(&Value, Option<&Value>) -> Vec<Cause>;

/// A kind's step that needs the cluster (`old` on update).
pub type Admit = fn(&mut Value, Option<&Value>, &Cluster<'_>) -> Result<(), ApiError>;

impl Admission {
    /// Only the object-meta rules every kind gets.
    pub const NONE: Admission = Admission {
        prepare: None,
        defaults: None,
        on_create: None,
        validate: None,
        admit: None,
        untracked: None,
        invalid_as: None,
    };
}

/// Removes from `view` the fields at `pointers` that `sent` did not carry (and a parent object
/// left empty by that, if `sent` did not carry it either).
pub fn untrack_unsent(sent: &Value, view: &mut Value, pointers: &[&str]) {
    for ptr in pointers {
        if sent.pointer(ptr).is_none()
            && let Some((parent, key)) = ptr.rsplit_once('/')
            && let Some(Value::Object(m)) = view.pointer_mut(parent)
        {
            m.remove(key);
            if m.is_empty()
                && sent.pointer(parent).is_none()
                && let Some((grand, last)) = parent.rsplit_once('/')
                && let Some(Value::Object(g)) = view.pointer_mut(grand)
            {
                g.remove(last);
            }
        }
    }
}

/// A kind's server-side printing: its Table columns and the cells of one object.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    /// The columns, in order.
    pub columns: &'static [Column],
    /// One object's row, a cell per column.
    pub cells: fn(&Value) -> Vec<Value>,
}

impl Printer {
    /// Name and Age, for kinds upstream prints no more of.
    pub const NAME_AGE: Printer = Printer {
        columns: &[Column::text("Name"), Column::text("Age")],
        cells: name_age,
    };
}

fn name_age(obj: &Value) -> Vec<Value> {
    crate::api::printing::row(obj, vec![crate::api::printing::age(obj).into()])
}

/// One Table column.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Header.
    pub name: &'static str,
    /// OpenAPI type of the cells (`string`, `integer`, `date`).
    pub ty: &'static str,
    /// 0 = shown, 1 = only with `-o wide`.
    pub priority: u8,
}

impl Column {
    /// A string column.
    pub const fn text(name: &'static str) -> Column {
        Column::new(name, "string", 0)
    }

    /// A string column shown only with `-o wide`.
    pub const fn wide(name: &'static str) -> Column {
        Column::new(name, "string", 1)
    }

    /// Any column.
    pub const fn new(name: &'static str, ty: &'static str, priority: u8) -> Column {
        Column { name, ty, priority }
    }

    /// The `columnDefinitions` entry.
    pub fn definition(&self) -> Value {
        let format = if self.name == "Name" { "name" } else { "" };
        serde_json::json!({"name": self.name, "type": self.ty, "format": format, "description": "", "priority": self.priority})
    }
}

/// JSON to protobuf bytes of a message, or the field that does not fit.
pub type Encode = fn(&Value) -> Result<Vec<u8>, String>;
/// Protobuf bytes to the JSON form (without apiVersion and kind) of a message.
pub type Decode = fn(&[u8]) -> Result<Value, String>;

/// The Rust path of a message type (`std::any::type_name`).
#[cfg(test)]
pub type MessageName = fn() -> &'static str;

/// The k8s-pb messages of a kind and of its list.
#[derive(Debug, Clone, Copy)]
pub struct Protobuf {
    /// The kind's message.
    pub kind: (Encode, Decode),
    /// The list's message (`None` for the create-only review APIs, which have no list).
    pub list: Option<(Encode, Decode)>,
    /// The messages' Rust paths, for the test that each kind has its own.
    #[cfg(test)]
    pub messages: (MessageName, Option<MessageName>),
}

impl Protobuf {
    /// Kind `T`, list `L`.
    pub const fn of<T, L>() -> Protobuf
    where
        T: Json + Message + Default,
        L: Json + Message + Default,
    {
        Protobuf {
            kind: (protobuf::encode::<T>, protobuf::decode::<T>),
            list: Some((protobuf::encode::<L>, protobuf::decode::<L>)),
            #[cfg(test)]
            messages: (std::any::type_name::<T>, Some(std::any::type_name::<L>)),
        }
    }

    /// Kind `T`, without a list.
    pub const fn without_list<T: Json + Message + Default>() -> Protobuf {
        Protobuf {
            kind: (protobuf::encode::<T>, protobuf::decode::<T>),
            list: None,
            #[cfg(test)]
            messages: (std::any::type_name::<T>, None),
        }
    }
}

/// What server-side apply needs of a kind beyond its list strategies (dotted paths without list
/// positions; the ObjectMeta maps every kind shares are `fields::shape`'s).
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Lists whose OpenAPI `x-kubernetes-list-map-keys` are not just the patch merge key.
    pub list_keys: &'static [(&'static str, &'static [&'static str])],
    /// Granular maps (`map[string]T`); every other object is a struct.
    pub maps: &'static [&'static str],
    /// Maps and structs replaced whole (`+mapType=atomic`, `+structType=atomic`).
    pub atomic: &'static [&'static str],
    /// Nested structs Go holds by value, so they are in every object even when empty.
    pub value_structs: &'static [&'static str],
    /// Fields the registry allocates after the field manager ran on a create, which the
    /// creator does not own.
    pub allocated_on_create: &'static [&'static str],
}

impl Shape {
    /// Structs and atomic lists only.
    pub const NONE: Shape = Shape {
        list_keys: &[],
        maps: &[],
        atomic: &[],
        value_structs: &[],
        allocated_on_create: &[],
    };
}
