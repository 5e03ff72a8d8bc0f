//! One HTTP request from arrival to response: URL parsing into (group, version, namespace,
//! resource, name, subresource) and a kube-apiserver verb, injected latency and faults, dispatch
//! to discovery / handlers / watch, JSON rendering (pretty for curl, as upstream), and the request
//! log entry.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use serde::Serialize;
use serde_json::Value;

use crate::fieldcheck::{self, Directive};
use crate::fields;
use crate::handlers::{self, DeleteOptions, ListParams, Target, WriteOptions};
use crate::patch::{self, PatchKind};
use crate::protobuf::{self, Format};
use crate::selectors::{FieldSelector, Filter, LabelSelector};
use crate::status::ApiError;
use crate::types::Registry;
use crate::watch::{self, WatchParams};
use crate::{RequestRecord, Shared};
use crate::{auth, decoding, discovery, openapi, query, table, watch_list};

/// Response body type of the server.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string into a map (last value wins).
pub fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

/// What a request addresses.
#[derive(Debug)]
enum Route {
    NonResource(&'static str),
    ApiGroup(String),
    ResourceList(String, String),
    OpenApiRoot,
    OpenApi(String, String),
    /// `/openapi/v2`; true when the client asked for protobuf.
    OpenApiV2(bool),
    Resource {
        target: Target,
        verb: &'static str,
    },
    NotFound,
}

fn route(method: &Method, path: &str, query: &HashMap<String, String>, types: &Registry) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::NonResource("version"),
        ["healthz"] | ["livez"] | ["readyz"] => return Route::NonResource("healthz"),
        ["api"] => return Route::NonResource("api"),
        ["apis"] => return Route::NonResource("apis"),
        ["openapi", "v2"] => return Route::OpenApiV2(false),
        ["openapi", "v3"] => return Route::OpenApiRoot,
        ["openapi", "v3", "api", v] => return Route::OpenApi(String::new(), (*v).to_string()),
        ["openapi", "v3", "apis", g, v] => {
            return Route::OpenApi((*g).to_string(), (*v).to_string());
        }
        ["apis", g] => return Route::ApiGroup((*g).to_string()),
        ["api", v] => return Route::ResourceList(String::new(), (*v).to_string()),
        ["apis", g, v] => return Route::ResourceList((*g).to_string(), (*v).to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    let (ns, plural, name, sub) = match rest {
        ["namespaces", ns, "status" | "finalize"] if group.is_empty() => {
            (None, "namespaces", Some(*ns), rest.get(2).copied())
        }
        ["namespaces", ns, plural] => (Some(*ns), *plural, None, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        [plural] => (None, *plural, None, None),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return Route::NotFound,
    };
    let Some(res) = types.lookup(group, version, plural) else {
        return Route::NotFound;
    };
    let Some(rt) = types.get(res) else {
        return Route::NotFound;
    };
    if ns.is_some() && !rt.namespaced() {
        return Route::NotFound;
    }
    match sub {
        None => {}
        Some("status") if rt.status_subresource() => {}
        Some("scale") if rt.scale().is_some() => {}
        // TokenRequest, served by `auth` before dispatch.
        Some("token") if rt.plural() == "serviceaccounts" => {}
        Some(_) => return Route::NotFound,
    }
    let watching = watch::flag(query.get("watch").map(String::as_str));
    let verb = match (method, name.is_some()) {
        (&Method::GET, true) if watching => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) if watching => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) => "create",
        (&Method::POST, true) if sub.is_some() => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unsupported",
    };
    let target = Target {
        res,
        rt,
        ns: ns.map(String::from),
        name: name.map(String::from),
        sub: sub.map(String::from),
    };
    Route::Resource { target, verb }
}

fn pretty(query: &HashMap<String, String>, ua: Option<&str>) -> bool {
    match query.get("pretty") {
        Some(v) => watch::flag(Some(v)),
        None => ua.is_some_and(|u| u.starts_with("curl/") || u.contains("Wget")),
    }
}

fn json_response<T: Serialize>(code: u16, value: &T, pretty: bool) -> Response<Body> {
    let body = if pretty {
        serde_json::to_vec_pretty(value).map(|mut v| {
            v.push(b'\n');
            v
        })
    } else {
        serde_json::to_vec(value)
    };
    let (code, body) = match body {
        Ok(b) => (code, b),
        Err(e) => (
            500,
            serde_json::to_vec(&ApiError::internal(&e.to_string()).to_status()).unwrap_or_default(),
        ),
    };
    let mut resp = Response::new(full(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_headers(resp.headers_mut());
    resp
}

/// The headers of upstream's JSON answers, watches included.
fn json_headers(headers: &mut http::HeaderMap) {
    let json = HeaderValue::from_static("application/json");
    headers.insert(header::CONTENT_TYPE, json);
    let no_cache = HeaderValue::from_static("no-cache, private");
    headers.insert(header::CACHE_CONTROL, no_cache);
}

fn error_response(e: &ApiError, pretty: bool) -> Response<Body> {
    let mut resp = json_response(e.code, &e.to_status(), pretty);
    if let Some(secs) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

fn filter_from(query: &HashMap<String, String>, target: &Target) -> Result<Filter, ApiError> {
    let rt = &target.rt;
    let mut filter = Filter {
        namespace: target.ns.clone().filter(|_| rt.namespaced()),
        labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str), rt)?,
    };
    if let Some(name) = &target.name {
        // GET .../NAME?watch=true is a watch of that one object.
        filter.fields = FieldSelector::parse(&format!("metadata.name={name}"), rt)?;
    }
    Ok(filter)
}

/// Serves one request and logs it.
pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let query = parse_query(&raw_query);
    let header = |h: header::HeaderName| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let user_agent = header(header::USER_AGENT);
    let content_type = header(header::CONTENT_TYPE).unwrap_or_default();
    let accept = header(header::ACCEPT).unwrap_or_default();
    let as_table = table::wanted(&accept);
    let pretty = pretty(&query, user_agent.as_deref());
    let mut route = shared
        .store
        .with(|s| route(&method, &path, &query, s.types()));
    if let Route::OpenApiV2(pb) = &mut route {
        *pb = header(header::ACCEPT).is_some_and(|a| openapi::wants_v2_protobuf(&a));
    }
    let format = negotiate(&route, &accept, as_table);
    let cert = req.extensions().get::<auth::ClientCertUser>();
    let user = auth::identify(&shared, cert, req.headers());
    let mut record = RequestRecord {
        verb: String::new(),
        resource: String::new(),
        subresource: None,
        namespace: None,
        name: None,
        query: raw_query.clone(),
        user_agent: user_agent.clone(),
        status: 0,
        path: path.clone(),
        user: user.as_ref().map(|u| u.name.clone()).unwrap_or_default(),
    };
    match &route {
        Route::Resource { target, verb } => {
            record.verb = (*verb).to_string();
            record.resource = target.rt.plural().to_string();
            record.subresource = target.sub.clone();
            record.namespace = target.ns.clone();
            record.name = target.name.clone();
        }
        _ => record.verb = method.as_str().to_lowercase(),
    }
    let latency = shared.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let response = match shared.faults.take_failure() {
        Some(err) => error_response(&err, pretty),
        None => {
            let body = match crate::limits::read_body(req.into_body()).await {
                Ok(b) => b,
                Err(e) => return finish(&shared, record, error_response(&e, pretty), &method),
            };
            let (content_type, body) = match json_body(&route, content_type, body) {
                Ok(b) => b,
                Err(e) => return finish(&shared, record, error_response(&e, pretty), &method),
            };
            let req = Req {
                query: &query,
                user_agent: record.user_agent.as_deref(),
                content_type: &content_type,
                body: &body,
                pretty,
                as_table,
            };
            match auth::admit(
                &shared,
                &user,
                (method.as_str(), &path),
                &query,
                &content_type,
                &body,
            ) {
                Err(e) => error_response(&e, pretty),
                Ok(Some((code, v))) => json_response(code, &v, pretty),
                Ok(None) => match &format {
                    Err(e) => error_response(e, pretty),
                    Ok(_) => dispatch(&shared, route, &req),
                },
            }
        }
    };
    let response = match format {
        Ok(Format::Protobuf) => encode_response(response, record.verb == "watch").await,
        _ => response,
    };
    finish(&shared, record, response, &method)
}

/// Audit ID, request log and post-write hooks for a response about to leave.
fn finish(
    shared: &Shared,
    mut record: RequestRecord,
    mut response: Response<Body>,
    method: &Method,
) -> Response<Body> {
    if let Ok(id) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
        // Every kube-apiserver response carries the audit ID of its request.
        response.headers_mut().insert("audit-id", id);
    }
    record.status = response.status().as_u16();
    auth::served(shared, method.as_str(), &record.path, record.status);
    tracing::debug!(verb = %record.verb, path = %record.path, status = record.status, "request");
    shared.log.lock().push(record);
    response
}

/// The response format `Accept` asks for: protobuf only for built-in types, and never for a
/// Table or a non-resource path (discovery, OpenAPI, version), which are served as JSON.
fn negotiate(route: &Route, accept: &str, as_table: bool) -> Result<Format, ApiError> {
    match route {
        Route::Resource { target, .. } if !as_table => {
            protobuf::negotiate(accept, target.rt.custom().is_none())
        }
        _ => Ok(Format::Json),
    }
}

/// A protobuf request body decoded into JSON, once, so everything after reads JSON; custom
/// resources have no protobuf form (415, as upstream).
fn json_body(
    route: &Route,
    content_type: String,
    body: Bytes,
) -> Result<(String, Bytes), ApiError> {
    if !protobuf::is_protobuf(&content_type) {
        return Ok((content_type, body));
    }
    match route {
        Route::Resource { target, .. } if target.rt.custom().is_none() => {
            let json = protobuf::decode(&body)?;
            Ok(("application/json".to_string(), Bytes::from(json)))
        }
        _ => Err(ApiError::unsupported_media_type()),
    }
}

/// A JSON response re-encoded, once, as protobuf: a whole body, or a watch stream frame by
/// frame. A body of another type (text, a Table) or a kind without a protobuf form stays.
async fn encode_response(response: Response<Body>, watch: bool) -> Response<Body> {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    if !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let body = if watch && parts.status == StatusCode::OK {
        let mut pending = bytes::BytesMut::new();
        let frames = body.into_data_stream().map(move |chunk| {
            let chunk = chunk.unwrap_or_default();
            Ok::<_, Infallible>(Frame::data(protobuf::watch_frames(&mut pending, &chunk)))
        });
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(protobuf::WATCH_CONTENT_TYPE),
        );
        StreamBody::new(frames).boxed_unsync()
    } else {
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        match serde_json::from_slice(&bytes)
            .ok()
            .as_ref()
            .and_then(protobuf::encode)
        {
            Some(Err(e)) => {
                tracing::error!(error = %e.message, "protobuf response");
                return error_response(&e, false);
            }
            Some(Ok(pb)) => {
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(protobuf::CONTENT_TYPE),
                );
                parts.headers.remove(header::CONTENT_LENGTH);
                full(pb)
            }
            None => full(bytes),
        }
    };
    Response::from_parts(parts, body)
}

/// What a handler needs from the request besides the route.
struct Req<'a> {
    query: &'a HashMap<String, String>,
    user_agent: Option<&'a str>,
    content_type: &'a str,
    body: &'a [u8],
    pretty: bool,
    as_table: bool,
}

fn dispatch(shared: &Arc<Shared>, route: Route, req: &Req<'_>) -> Response<Body> {
    let pretty = req.pretty;
    let result: Result<Response<Body>, ApiError> = match route {
        Route::NonResource("version") => Ok(json_response(200, &discovery::version(), pretty)),
        Route::NonResource("healthz") => {
            let mut r = Response::new(full("ok"));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            Ok(r)
        }
        Route::NonResource("api") => Ok(json_response(
            200,
            &discovery::api_versions(&shared.address),
            pretty,
        )),
        Route::NonResource(_) => {
            let doc = shared.store.with(|s| discovery::api_groups(s.types()));
            Ok(json_response(200, &doc, pretty))
        }
        Route::ApiGroup(g) => shared
            .store
            .with(|s| discovery::api_group(s.types(), &g))
            .map(|d| json_response(200, &d, pretty))
            .ok_or_else(ApiError::no_route),
        Route::ResourceList(g, v) => shared
            .store
            .with(|s| discovery::resource_list(s.types(), &g, &v))
            .map(|d| json_response(200, &d, pretty))
            .ok_or_else(ApiError::no_route),
        Route::OpenApiRoot => {
            let doc = shared.store.with(|s| openapi::root(s.types()));
            Ok(json_response(200, &doc, pretty))
        }
        Route::OpenApi(g, v) => shared
            .store
            .with(|s| openapi::group_version(s.types(), &g, &v))
            .map(|d| json_response(200, &d, pretty))
            .ok_or_else(ApiError::no_route),
        Route::OpenApiV2(false) => Ok(json_response(200, &openapi::v2_json(), pretty)),
        Route::OpenApiV2(true) => {
            let mut r = Response::new(full(openapi::v2_protobuf()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(openapi::V2_PROTOBUF),
            );
            Ok(r)
        }
        Route::NotFound => Err(ApiError::no_route()),
        Route::Resource { target, verb } => resource(shared, &target, verb, req),
    };
    result.unwrap_or_else(|e| error_response(&e, pretty))
}

pub(crate) fn decode_body(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    if ct == "application/yaml" {
        return patch::decode_yaml(body);
    }
    if !(ct.is_empty() || ct == "application/json" || ct == "*/*") {
        return Err(ApiError::unsupported_media_type());
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}")))
}

/// Adds one `Warning: 299 - "<text>"` header per warning, as upstream's warning recorder.
fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {}", crate::status::go_quote(w))) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn table_response(v: &Value, pretty: bool) -> Response<Body> {
    let mut resp = json_response(200, v, pretty);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json;as=Table;v=v1;g=meta.k8s.io"),
    );
    resp
}

fn resource(
    shared: &Arc<Shared>,
    t: &Target,
    verb: &str,
    req: &Req<'_>,
) -> Result<Response<Body>, ApiError> {
    let (query, content_type, body, pretty) = (req.query, req.content_type, req.body, req.pretty);
    let rt = &t.rt;
    let dry_run = query.get("dryRun").is_some_and(|v| v == "All");
    let cfg = &shared.admission;
    let q = |k: &str| query.get(k).cloned().filter(|v| !v.is_empty());
    let write = WriteOptions {
        dry_run,
        manager_given: q("fieldManager").is_some(),
        manager: q("fieldManager").unwrap_or_else(|| fields::default_manager(req.user_agent)),
        force: query.get("force").is_some_and(|v| v == "true"),
    };
    match verb {
        "get" => {
            let obj = shared.store.with(|s| handlers::get(s, t))?;
            if req.as_table {
                return Ok(table_response(&table::single(rt, &obj), pretty));
            }
            Ok(json_response(200, &obj, pretty))
        }
        "list" => {
            query::check_list_rv_match(query)?;
            watch_list::check_list(query, shared.watch.list_support)?;
            let params = ListParams {
                filter: filter_from(query, t)?,
                limit: query::limit(query)?,
                continue_token: q("continue"),
                resource_version: q("resourceVersion"),
                rv_match: q("resourceVersionMatch"),
            };
            let list = shared.store.with(|s| handlers::list(s, t, &params))?;
            if req.as_table {
                let rv = list.resource_version().to_string();
                let items = list.items().iter().map(|o| o.as_ref());
                return Ok(table_response(
                    &table::of(rt, items, &rv, list.continue_token()),
                    pretty,
                ));
            }
            Ok(json_response(200, &list, pretty))
        }
        "watch" => {
            let send_initial_events = watch_list::check_watch(query, shared.watch.list_support)?;
            let params = WatchParams {
                filter: filter_from(query, t)?,
                resource_version: q("resourceVersion"),
                bookmarks: watch::flag(query.get("allowWatchBookmarks").map(String::as_str)),
                send_initial_events,
                timeout: query::watch_timeout(query)?,
                table: req.as_table,
            };
            let mut rx = watch::open(&shared.store, t.res, rt.clone(), params, shared.watch)?;
            let stream = futures::stream::poll_fn(move |cx| {
                rx.poll_recv(cx)
                    .map(|o| o.map(|b| Ok::<_, Infallible>(Frame::data(b))))
            });
            let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
            json_headers(resp.headers_mut());
            Ok(resp)
        }
        "create" | "update" => {
            let (options, write_fn): (_, fn(&mut _, _, _, _, _) -> _) = if verb == "create" {
                ("CreateOptions", handlers::create)
            } else {
                ("UpdateOptions", handlers::update)
            };
            let fv =
                Directive::of_request(q("fieldValidation").as_deref(), options, t.sub.as_deref())?;
            let obj = decode_body(content_type, body)?;
            if t.sub.as_deref() != Some("scale") {
                decoding::check_body(rt, &obj)?;
            }
            let warnings = fieldcheck::check_object(rt, fv, body, &obj)?;
            let (code, v) = shared.store.with(|s| write_fn(s, cfg, t, obj, &write))?;
            Ok(with_warnings(json_response(code, &v, pretty), &warnings))
        }
        "patch" => {
            let kind = PatchKind::from_content_type(content_type);
            if rt.custom().is_some()
                && t.sub.as_deref() != Some("scale")
                && matches!(kind, Some(PatchKind::Strategic) | None)
            {
                return Err(ApiError::patch_type_not_accepted(&[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ]));
            }
            let kind = kind.ok_or_else(ApiError::unsupported_media_type)?;
            if kind == PatchKind::Apply {
                let (code, v) = shared
                    .store
                    .with(|s| handlers::apply(s, cfg, t, body, &write))?;
                return Ok(json_response(code, &v, pretty));
            }
            let fv = Directive::of_request(
                q("fieldValidation").as_deref(),
                "PatchOptions",
                t.sub.as_deref(),
            )?;
            let warnings = fieldcheck::check_patch(rt, fv, kind, body)?;
            let v = shared
                .store
                .with(|s| handlers::patch(s, cfg, t, kind, body, &write))?;
            Ok(with_warnings(json_response(200, &v, pretty), &warnings))
        }
        "delete" => {
            let opts = DeleteOptions::from_body(body, dry_run)?;
            let (code, v) = shared.store.with(|s| handlers::delete(s, t, &opts))?;
            Ok(json_response(code, &v, pretty))
        }
        "deletecollection" => {
            let opts = DeleteOptions::from_body(body, dry_run)?;
            let params = ListParams {
                filter: filter_from(query, t)?,
                ..Default::default()
            };
            let v = shared
                .store
                .with(|s| handlers::delete_collection(s, t, &params, &opts))?;
            Ok(json_response(200, &v, pretty))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}
