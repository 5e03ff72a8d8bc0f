//! The functions a Kubernetes CEL environment declares, with their overloads: CEL's standard
//! operators and functions, and the libraries kube-apiserver adds (strings, lists, sets, regex,
//! URLs, IP/CIDR, quantity, semver, named formats, optionals, math, base64). Each overload is one
//! line, `[receiver:]name(params)result`, read once; `A` and `B` are type parameters.

use std::collections::HashMap;
use std::rc::Rc;

use super::super::types::{Decl, Ty};

/// The overloads, one per line.
const DECLARATIONS: &[&str] = &[
    "!_(bool)bool",
    "-_(int)int",
    "-_(double)double",
    "_==_(A,A)bool",
    "_!=_(A,A)bool",
    "_+_(int,int)int",
    "_+_(uint,uint)uint",
    "_+_(double,double)double",
    "_+_(string,string)string",
    "_+_(bytes,bytes)bytes",
    "_+_(list(A),list(A))list(A)",
    "_+_(timestamp,duration)timestamp",
    "_+_(duration,timestamp)timestamp",
    "_+_(duration,duration)duration",
    "_-_(int,int)int",
    "_-_(uint,uint)uint",
    "_-_(double,double)double",
    "_-_(timestamp,timestamp)duration",
    "_-_(timestamp,duration)timestamp",
    "_-_(duration,duration)duration",
    "_*_(int,int)int",
    "_*_(uint,uint)uint",
    "_*_(double,double)double",
    "_/_(int,int)int",
    "_/_(uint,uint)uint",
    "_/_(double,double)double",
    "_%_(int,int)int",
    "_%_(uint,uint)uint",
    "_[_](list(A),int)A",
    "_[_](map(A,B),A)B",
    "@in(A,list(A))bool",
    "@in(A,map(A,B))bool",
    "size(string)int",
    "size(bytes)int",
    "size(list(A))int",
    "size(map(A,B))int",
    "string:size()int",
    "bytes:size()int",
    "list(A):size()int",
    "map(A,B):size()int",
    "string:contains(string)bool",
    "string:startsWith(string)bool",
    "string:endsWith(string)bool",
    "string:matches(string)bool",
    "matches(string,string)bool",
    "int(int)int",
    "int(uint)int",
    "int(double)int",
    "int(string)int",
    "int(timestamp)int",
    "uint(int)uint",
    "uint(uint)uint",
    "uint(double)uint",
    "uint(string)uint",
    "double(int)double",
    "double(uint)double",
    "double(double)double",
    "double(string)double",
    "string(int)string",
    "string(uint)string",
    "string(double)string",
    "string(bool)string",
    "string(bytes)string",
    "string(string)string",
    "string(timestamp)string",
    "string(duration)string",
    "string(net.IP)string",
    "string(net.CIDR)string",
    "bytes(string)bytes",
    "bytes(bytes)bytes",
    "bool(bool)bool",
    "bool(string)bool",
    "timestamp(string)timestamp",
    "timestamp(int)timestamp",
    "timestamp(timestamp)timestamp",
    "duration(string)duration",
    "duration(duration)duration",
    "dyn(A)dyn",
    "type(A)type(A)",
    "timestamp:getFullYear()int",
    "timestamp:getFullYear(string)int",
    "timestamp:getMonth()int",
    "timestamp:getMonth(string)int",
    "timestamp:getDayOfYear()int",
    "timestamp:getDayOfYear(string)int",
    "timestamp:getDayOfMonth()int",
    "timestamp:getDayOfMonth(string)int",
    "timestamp:getDate()int",
    "timestamp:getDate(string)int",
    "timestamp:getDayOfWeek()int",
    "timestamp:getDayOfWeek(string)int",
    "timestamp:getHours()int",
    "timestamp:getHours(string)int",
    "timestamp:getMinutes()int",
    "timestamp:getMinutes(string)int",
    "timestamp:getSeconds()int",
    "timestamp:getSeconds(string)int",
    "timestamp:getMilliseconds()int",
    "timestamp:getMilliseconds(string)int",
    "duration:getHours()int",
    "duration:getMinutes()int",
    "duration:getSeconds()int",
    "duration:getMilliseconds()int",
    "string:charAt(int)string",
    "string:indexOf(string)int",
    "string:indexOf(string,int)int",
    "string:lastIndexOf(string)int",
    "string:lastIndexOf(string,int)int",
    "string:lowerAscii()string",
    "string:upperAscii()string",
    "string:replace(string,string)string",
    "string:replace(string,string,int)string",
    "string:split(string)list(string)",
    "string:split(string,int)list(string)",
    "string:substring(int)string",
    "string:substring(int,int)string",
    "string:trim()string",
    "string:reverse()string",
    "string:format(list(dyn))string",
    "list(string):join()string",
    "list(string):join(string)string",
    "strings.quote(string)string",
    "list(A):isSorted()bool",
    "list(A):sum()A",
    "list(A):min()A",
    "list(A):max()A",
    "list(A):indexOf(A)int",
    "list(A):lastIndexOf(A)int",
    "list(A):slice(int,int)list(A)",
    "list(dyn):flatten()list(dyn)",
    "list(dyn):flatten(int)list(dyn)",
    "list(A):reverse()list(A)",
    "list(A):sort()list(A)",
    "list(A):distinct()list(A)",
    "list(A):first()optional(A)",
    "list(A):last()optional(A)",
    "lists.range(int)list(int)",
    "string:find(string)string",
    "string:findAll(string)list(string)",
    "string:findAll(string,int)list(string)",
    "kubernetes.authorization.Authorizer:path(string)kubernetes.authorization.PathCheck",
    "kubernetes.authorization.Authorizer:group(string)kubernetes.authorization.GroupCheck",
    "kubernetes.authorization.Authorizer:serviceAccount(string,string)kubernetes.authorization.Authorizer",
    "kubernetes.authorization.GroupCheck:resource(string)kubernetes.authorization.ResourceCheck",
    "kubernetes.authorization.ResourceCheck:subresource(string)kubernetes.authorization.ResourceCheck",
    "kubernetes.authorization.ResourceCheck:namespace(string)kubernetes.authorization.ResourceCheck",
    "kubernetes.authorization.ResourceCheck:name(string)kubernetes.authorization.ResourceCheck",
    "kubernetes.authorization.ResourceCheck:check(string)kubernetes.authorization.Decision",
    "kubernetes.authorization.PathCheck:check(string)kubernetes.authorization.Decision",
    "kubernetes.authorization.Decision:allowed()bool",
    "kubernetes.authorization.Decision:reason()string",
    "kubernetes.authorization.Decision:errored()bool",
    "kubernetes.authorization.Decision:error()string",
    "url(string)kubernetes.URL",
    "isURL(string)bool",
    "kubernetes.URL:getScheme()string",
    "kubernetes.URL:getHost()string",
    "kubernetes.URL:getHostname()string",
    "kubernetes.URL:getPort()string",
    "kubernetes.URL:getEscapedPath()string",
    "kubernetes.URL:getQuery()map(string,list(string))",
    "ip(string)net.IP",
    "isIP(string)bool",
    "ip.isCanonical(string)bool",
    "net.IP:family()int",
    "net.IP:isUnspecified()bool",
    "net.IP:isLoopback()bool",
    "net.IP:isLinkLocalMulticast()bool",
    "net.IP:isLinkLocalUnicast()bool",
    "net.IP:isGlobalUnicast()bool",
    "cidr(string)net.CIDR",
    "isCIDR(string)bool",
    "net.CIDR:containsIP(string)bool",
    "net.CIDR:containsIP(net.IP)bool",
    "net.CIDR:containsCIDR(string)bool",
    "net.CIDR:containsCIDR(net.CIDR)bool",
    "net.CIDR:ip()net.IP",
    "net.CIDR:masked()net.CIDR",
    "net.CIDR:prefixLength()int",
    "quantity(string)kubernetes.Quantity",
    "isQuantity(string)bool",
    "kubernetes.Quantity:isInteger()bool",
    "kubernetes.Quantity:asInteger()int",
    "kubernetes.Quantity:asApproximateFloat()double",
    "kubernetes.Quantity:sign()int",
    "kubernetes.Quantity:add(kubernetes.Quantity)kubernetes.Quantity",
    "kubernetes.Quantity:add(int)kubernetes.Quantity",
    "kubernetes.Quantity:sub(kubernetes.Quantity)kubernetes.Quantity",
    "kubernetes.Quantity:sub(int)kubernetes.Quantity",
    "kubernetes.Quantity:isGreaterThan(kubernetes.Quantity)bool",
    "kubernetes.Quantity:isLessThan(kubernetes.Quantity)bool",
    "kubernetes.Quantity:compareTo(kubernetes.Quantity)int",
    "semver(string)kubernetes.Semver",
    "semver(string,bool)kubernetes.Semver",
    "isSemver(string)bool",
    "isSemver(string,bool)bool",
    "kubernetes.Semver:major()int",
    "kubernetes.Semver:minor()int",
    "kubernetes.Semver:patch()int",
    "kubernetes.Semver:isGreaterThan(kubernetes.Semver)bool",
    "kubernetes.Semver:isLessThan(kubernetes.Semver)bool",
    "kubernetes.Semver:compareTo(kubernetes.Semver)int",
    "format.dns1123Label()kubernetes.NamedFormat",
    "format.dns1123Subdomain()kubernetes.NamedFormat",
    "format.dns1035Label()kubernetes.NamedFormat",
    "format.qualifiedName()kubernetes.NamedFormat",
    "format.dns1123LabelPrefix()kubernetes.NamedFormat",
    "format.dns1123SubdomainPrefix()kubernetes.NamedFormat",
    "format.dns1035LabelPrefix()kubernetes.NamedFormat",
    "format.labelValue()kubernetes.NamedFormat",
    "format.uri()kubernetes.NamedFormat",
    "format.uuid()kubernetes.NamedFormat",
    "format.byte()kubernetes.NamedFormat",
    "format.date()kubernetes.NamedFormat",
    "format.datetime()kubernetes.NamedFormat",
    "format.named(string)optional(kubernetes.NamedFormat)",
    "kubernetes.NamedFormat:validate(string)optional(list(string))",
    "sets.contains(list(A),list(A))bool",
    "sets.equivalent(list(A),list(A))bool",
    "sets.intersects(list(A),list(A))bool",
    "optional.of(A)optional(A)",
    "optional.ofNonZeroValue(A)optional(A)",
    "optional.none()optional(dyn)",
    "optional(A):hasValue()bool",
    "optional(A):value()A",
    "optional(A):orValue(A)A",
    "optional(A):or(optional(A))optional(A)",
    "math.ceil(double)double",
    "math.floor(double)double",
    "math.round(double)double",
    "math.trunc(double)double",
    "math.abs(int)int",
    "math.abs(uint)uint",
    "math.abs(double)double",
    "math.sign(int)int",
    "math.sign(uint)uint",
    "math.sign(double)double",
    "math.sqrt(int)double",
    "math.sqrt(uint)double",
    "math.sqrt(double)double",
    "math.isInf(double)bool",
    "math.isNaN(double)bool",
    "math.isFinite(double)bool",
    "math.bitAnd(int,int)int",
    "math.bitAnd(uint,uint)uint",
    "math.bitOr(int,int)int",
    "math.bitOr(uint,uint)uint",
    "math.bitXor(int,int)int",
    "math.bitXor(uint,uint)uint",
    "math.bitNot(int)int",
    "math.bitNot(uint)uint",
    "math.bitShiftLeft(int,int)int",
    "math.bitShiftLeft(uint,int)uint",
    "math.bitShiftRight(int,int)int",
    "math.bitShiftRight(uint,int)uint",
    "base64.encode(bytes)string",
    "base64.decode(string)bytes",
    "jsonpatch.escapeKey(string)string",
];

/// The operand types each comparison operator takes (cross-type numeric comparisons included).
const COMPARABLE: &[(&str, &str)] = &[
    ("bool", "bool"),
    ("int", "int"),
    ("int", "uint"),
    ("int", "double"),
    ("uint", "uint"),
    ("uint", "int"),
    ("uint", "double"),
    ("double", "double"),
    ("double", "int"),
    ("double", "uint"),
    ("string", "string"),
    ("bytes", "bytes"),
    ("timestamp", "timestamp"),
    ("duration", "duration"),
];

/// One overload.
#[derive(Debug)]
pub struct Overload {
    /// The receiver type of a member function.
    pub receiver: Option<Ty>,
    /// Parameter types.
    pub params: Vec<Ty>,
    /// Result type.
    pub result: Ty,
}

/// Overloads by function name.
struct Table(HashMap<String, Vec<Overload>>);

// `Ty` is `Rc`-based (the checker runs on one thread), so each thread reads its own table.
thread_local! {
    static TABLE: Table = build();
}

fn build() -> Table {
    let mut map: HashMap<String, Vec<Overload>> = HashMap::new();
    let lines = DECLARATIONS.iter().map(|l| l.to_string()).chain(
        ["_<_", "_<=_", "_>_", "_>=_"].iter().flat_map(|op| {
            COMPARABLE
                .iter()
                .map(move |(a, b)| format!("{op}({a},{b})bool"))
        }),
    );
    for line in lines {
        match parse_line(&line) {
            Some((name, o)) => map.entry(name).or_default().push(o),
            None => debug_assert!(false, "unreadable declaration {line}"),
        }
    }
    Table(map)
}

/// Whether a function of this name is declared (`qualified`: `ns.name`).
pub fn declared(name: &str) -> bool {
    TABLE.with(|t| t.0.contains_key(name))
}

/// Runs `f` with the overloads of `name`.
pub fn with_overloads<R>(name: &str, f: impl FnOnce(&[Overload]) -> R) -> R {
    TABLE.with(|t| f(t.0.get(name).map(Vec::as_slice).unwrap_or(&[])))
}

fn parse_line(line: &str) -> Option<(String, Overload)> {
    let (receiver, rest) = match line.split_once(':') {
        Some((r, rest)) => (Some(parse_type(r)?), rest),
        None => (None, line),
    };
    let open = rest.find('(')?;
    let close = matching(rest, open)?;
    let params = split_top(&rest[open + 1..close])
        .into_iter()
        .map(parse_type)
        .collect::<Option<Vec<_>>>()?;
    let result = parse_type(&rest[close + 1..])?;
    Some((
        rest[..open].to_string(),
        Overload {
            receiver,
            params,
            result,
        },
    ))
}

fn matching(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

fn split_top(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_type(s: &str) -> Option<Ty> {
    let s = s.trim();
    if let Some(inner) = s.strip_suffix(')') {
        let (head, args) = inner.split_once('(')?;
        let args = split_top(args)
            .into_iter()
            .map(parse_type)
            .collect::<Option<Vec<_>>>()?;
        return match (head, args.as_slice()) {
            ("list", [e]) => Some(Ty::list(e.clone())),
            ("map", [k, v]) => Some(Ty::map(k.clone(), v.clone())),
            ("type", [t]) => Some(Ty::Type(Rc::new(t.clone()))),
            ("optional", [t]) => Some(Ty::optional(t.clone())),
            _ => None,
        };
    }
    Some(match s {
        "bool" => Ty::Bool,
        "int" => Ty::Int,
        "uint" => Ty::Uint,
        "double" => Ty::Double,
        "string" => Ty::String,
        "bytes" => Ty::Bytes,
        "null" => Ty::Null,
        "dyn" => Ty::Dyn,
        "timestamp" => Ty::Timestamp,
        "duration" => Ty::Duration,
        "A" => Ty::Param('A'),
        "B" => Ty::Param('B'),
        "kubernetes.URL" => Ty::named("kubernetes.URL"),
        "kubernetes.authorization.Authorizer" => Ty::named("kubernetes.authorization.Authorizer"),
        "kubernetes.authorization.PathCheck" => Ty::named("kubernetes.authorization.PathCheck"),
        "kubernetes.authorization.GroupCheck" => Ty::named("kubernetes.authorization.GroupCheck"),
        "kubernetes.authorization.ResourceCheck" => {
            Ty::named("kubernetes.authorization.ResourceCheck")
        }
        "kubernetes.authorization.Decision" => Ty::named("kubernetes.authorization.Decision"),
        "net.IP" => Ty::named("net.IP"),
        "net.CIDR" => Ty::named("net.CIDR"),
        "kubernetes.Quantity" => Ty::named("kubernetes.Quantity"),
        "kubernetes.Semver" => Ty::named("kubernetes.Semver"),
        "kubernetes.NamedFormat" => Ty::named("kubernetes.NamedFormat"),
        _ => return None,
    })
}

/// Type parameter bindings while one overload is tried.
#[derive(Default)]
pub struct Bindings(Vec<(char, Ty)>);

impl Bindings {
    fn get(&self, c: char) -> Option<&Ty> {
        self.0.iter().find(|(p, _)| *p == c).map(|(_, t)| t)
    }

    fn set(&mut self, c: char, t: Ty) {
        match self.0.iter_mut().find(|(p, _)| *p == c) {
            Some(slot) => slot.1 = t,
            None => self.0.push((c, t)),
        }
    }

    /// Whether `actual` can be passed where `param` is declared, binding type parameters.
    pub fn unify(&mut self, param: &Ty, actual: &Ty) -> bool {
        match (param, actual) {
            (Ty::Param(c), _) => match self.get(*c).cloned() {
                None => {
                    self.set(*c, actual.clone());
                    true
                }
                Some(bound) if bound.is_dyn() => {
                    self.set(*c, actual.clone());
                    true
                }
                Some(bound) => actual.is_dyn() || assignable(&bound, actual),
            },
            (Ty::Dyn, _) | (_, Ty::Dyn) => true,
            (Ty::List(p), Ty::List(a)) => self.unify(&p.ty, &a.ty),
            (Ty::Map(pk, pv), Ty::Map(ak, av)) => {
                self.unify(&pk.ty, &ak.ty) && self.unify(&pv.ty, &av.ty)
            }
            (Ty::Type(p), Ty::Type(a)) => self.unify(p, a),
            (Ty::Opaque(pn, pp), Ty::Opaque(an, ap)) => {
                pn == an
                    && pp.len() == ap.len()
                    && pp.iter().zip(ap.iter()).all(|(p, a)| self.unify(p, a))
            }
            _ => assignable(param, actual),
        }
    }

    /// `t` with its type parameters replaced by their bindings (`dyn` when unbound), keeping
    /// the size bounds of `sized` where the result is the very value an argument was.
    pub fn substitute(&self, t: &Ty) -> Ty {
        match t {
            Ty::Param(c) => self.get(*c).cloned().unwrap_or(Ty::Dyn),
            Ty::List(e) => match &e.ty {
                Ty::Param(c) => match self.get(*c) {
                    Some(bound) => Ty::List(Rc::new(Decl {
                        ty: bound.clone(),
                        max: None,
                        min_size: 1,
                    })),
                    None => Ty::list(Ty::Dyn),
                },
                other => Ty::list(self.substitute(other)),
            },
            Ty::Map(k, v) => Ty::map(self.substitute(&k.ty), self.substitute(&v.ty)),
            Ty::Type(inner) => Ty::Type(Rc::new(self.substitute(inner))),
            Ty::Opaque(n, ps) => Ty::Opaque(
                n,
                ps.iter()
                    .map(|p| self.substitute(p))
                    .collect::<Vec<_>>()
                    .into(),
            ),
            other => other.clone(),
        }
    }
}

/// Whether a value of `actual` fits `declared` (no parameters involved).
fn assignable(declared: &Ty, actual: &Ty) -> bool {
    match (declared, actual) {
        (Ty::Dyn, _) | (_, Ty::Dyn) => true,
        // null fits the types whose values may be absent.
        (Ty::Object(_) | Ty::Opaque(..) | Ty::Timestamp | Ty::Duration | Ty::Null, Ty::Null) => {
            true
        }
        (Ty::Null, Ty::Object(_) | Ty::Opaque(..) | Ty::Timestamp | Ty::Duration) => true,
        (Ty::List(d), Ty::List(a)) => assignable(&d.ty, &a.ty),
        (Ty::Map(dk, dv), Ty::Map(ak, av)) => {
            assignable(&dk.ty, &ak.ty) && assignable(&dv.ty, &av.ty)
        }
        (Ty::Type(d), Ty::Type(a)) => assignable(d, a),
        (Ty::Opaque(dn, dp), Ty::Opaque(an, ap)) => {
            dn == an
                && dp.len() == ap.len()
                && dp.iter().zip(ap.iter()).all(|(d, a)| assignable(d, a))
        }
        _ => declared.same(actual),
    }
}
