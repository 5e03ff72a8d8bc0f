//! One request from arrival to response: injected latency and faults, authentication and
//! authorization, dispatch to discovery / handlers / watch, and the request log entry.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use futures::StreamExt;
use http::{HeaderValue, Method, Request, Response, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};

use super::deadline;
use super::negotiation::{encode_response, json_body, negotiate};
use super::respond::{
    Body, error_response, full, json_headers, json_response, pretty, table_response, with_warnings,
};
use super::route::{Route, filter_from, parse_query, route};
use crate::admission::chain::Outcome;
use crate::admission::webhooks::Requester;
use crate::api::decoding;
use crate::api::status::ApiError;
use crate::api::types::Served;
use crate::auth;
use crate::crd::conversion;
use crate::fields;
use crate::handlers::{self, DeleteOptions, ListParams, Target, Verb, WriteOptions};
use crate::http::accept::{Answer, Conversion};
use crate::http::fieldcheck::{self, Directive};
use crate::http::protobuf::Format;
use crate::http::shared::{RequestRecord, Shared};
use crate::http::watch::{self, WatchParams};
use crate::http::{discovery, openapi, partial, query, table, watch_list};
use crate::patch::PatchKind;
use serde_json::Value;

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
    let pretty = pretty(&query, user_agent.as_deref());
    let mut route = shared
        .store
        .with(|s| route(&method, &path, &query, s.types()));
    if let Route::OpenApiV2(pb) = &mut route {
        *pb = header(header::ACCEPT).is_some_and(|a| openapi::wants_v2_protobuf(&a));
    }
    let answer = negotiate(&route, &accept);
    let conversion = answer.as_ref().map(|a| a.conversion).unwrap_or_default();
    let cert = req.extensions().get::<auth::ClientCertUser>();
    let user = auth::identify(&shared.store, &shared.auth, cert, req.headers());
    let mut record = RequestRecord {
        verb: String::new(),
        resource: String::new(),
        subresource: None,
        namespace: None,
        name: None,
        query: raw_query.clone(),
        user_agent: user_agent.clone(),
        accept: (!accept.is_empty()).then(|| accept.clone()),
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
            let body = match crate::api::limits::read_body(req.into_body()).await {
                Ok(b) => b,
                Err(e) => return finish(&shared, record, error_response(&e, pretty), &method),
            };
            let (content_type, body) = match json_body(&route, content_type, body) {
                Ok(b) => b,
                Err(e) => return finish(&shared, record, error_response(&e, pretty), &method),
            };
            let answer_error = answer.as_ref().err().cloned();
            let user_agent = record.user_agent.clone();
            let timeout = shared.request_timeout;
            let (shared, method, path) = (shared.clone(), method.clone(), path.clone());
            let work = move || {
                let req = Req {
                    user: user.as_ref().ok(),
                    query: &query,
                    user_agent: user_agent.as_deref(),
                    content_type: &content_type,
                    body: &body,
                    pretty,
                    conversion,
                };
                let admitted = auth::admit(
                    &shared.store,
                    &shared.auth,
                    &user,
                    (method.as_str(), &path),
                    &query,
                    &content_type,
                    &body,
                );
                match (admitted, answer_error) {
                    (Err(e), _) | (Ok(None), Some(e)) => error_response(&e, pretty),
                    (Ok(Some((code, v))), _) => json_response(code, &v, pretty),
                    // Admission and conversion webhooks are awaited on this thread; the
                    // runtime's workers stay free meanwhile.
                    (Ok(None), None) => {
                        let runtime = tokio::runtime::Handle::current();
                        runtime.block_on(dispatch(&shared, route, &req))
                    }
                }
            };
            deadline::run(timeout, work)
                .await
                .unwrap_or_else(|e| error_response(&e, pretty))
        }
    };
    let response = match answer {
        Ok(Answer {
            format: Format::Protobuf,
            ..
        }) => encode_response(response, record.verb == "watch").await,
        _ => response,
    };
    finish(&shared, record, response, &method)
}

/// Audit ID, request log and post-write hooks for a response about to leave.
pub(super) fn finish(
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
    auth::served(&shared.store, method.as_str(), &record.path, record.status);
    tracing::debug!(verb = %record.verb, path = %record.path, status = record.status, "request");
    shared.log.lock().push(record);
    response
}

/// What a handler needs from the request besides the route.
pub(super) struct Req<'a> {
    user: Option<&'a auth::UserInfo>,
    query: &'a HashMap<String, String>,
    user_agent: Option<&'a str>,
    content_type: &'a str,
    body: &'a [u8],
    pretty: bool,
    conversion: Conversion,
}

pub(super) async fn dispatch(shared: &Arc<Shared>, route: Route, req: &Req<'_>) -> Response<Body> {
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
        Route::Resource { target, verb } => resource(shared, &target, verb, req).await,
    };
    result.unwrap_or_else(|e| error_response(&e, pretty))
}

pub(super) async fn resource(
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
    let who = requester(req.user);
    match verb {
        "get" => {
            let (obj, converter) = shared.store.with(|s| {
                let converter = converter_of(s, t);
                handlers::get(s, t).map(|obj| (obj, converter))
            })?;
            let obj = conversion::read(converter.as_ref(), rt, vec![obj]).await?;
            let obj = obj.into_iter().next().unwrap_or_default();
            if req.conversion == Conversion::Table {
                return Ok(table_response(&table::single(rt, &obj), pretty));
            }
            answered(rt, 200, obj, req)
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
            let (mut list, converter) = shared.store.with(|s| {
                let converter = converter_of(s, t);
                handlers::list(s, t, &params).map(|list| (list, converter))
            })?;
            if converter.is_some() {
                let items = list.items().iter().map(|o| (**o).clone()).collect();
                let items = conversion::read(converter.as_ref(), rt, items).await?;
                list.set_converted_items(items.into_iter().map(Arc::new).collect());
            }
            if let Conversion::Metadata { .. } = req.conversion {
                let list =
                    serde_json::to_value(&list).map_err(|e| ApiError::internal(&e.to_string()))?;
                return answered(rt, 200, list, req);
            }
            if req.conversion == Conversion::Table {
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
                conversion: req.conversion,
            };
            // Through a converted version the events leave the store whole, are converted, and
            // only then become Table rows or metadata, as upstream converts before it encodes.
            let converter = shared.store.with(|s| converter_of(s, t));
            let params = match converter {
                Some(_) => WatchParams {
                    conversion: Conversion::None,
                    ..params
                },
                None => params,
            };
            let mut rx = watch::open(&shared.store, t.res, rt.clone(), params, shared.watch)?;
            let chunks = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
            let stream = match converter {
                None => chunks.boxed(),
                Some(c) => {
                    let (rt, shape) = (rt.clone(), watch_shape(rt, req.conversion));
                    chunks
                        .then(move |b| {
                            let (c, rt, shape) = (c.clone(), rt.clone(), shape.clone());
                            async move { conversion::watch_chunk(&c, &rt, &*shape, b).await }
                        })
                        .boxed()
                }
            };
            let stream = stream.map(|b| Ok::<_, Infallible>(Frame::data(b)));
            let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
            json_headers(resp.headers_mut());
            Ok(resp)
        }
        "create" | "update" => {
            let options = match verb {
                "create" => "CreateOptions",
                _ => "UpdateOptions",
            };
            let fv =
                Directive::of_request(q("fieldValidation").as_deref(), options, t.sub.as_deref())?;
            let obj = crate::api::body::decode_object(rt.kind(), content_type, body)?;
            if t.sub.as_deref() != Some("scale") {
                decoding::check_body(rt, &obj)?;
            }
            let warnings = fieldcheck::check_object(rt, fv, body, &obj)?;
            let v = match verb {
                "create" => Verb::Create(&obj),
                _ => Verb::Update(&obj),
            };
            let out = handlers::write_object(&shared.store, cfg, t, v, &write, &who).await;
            written(rt, out, warnings, req)
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
                let v = Verb::Apply(body);
                let out = handlers::write_object(&shared.store, cfg, t, v, &write, &who).await;
                return written(rt, out, Vec::new(), req);
            }
            let fv = Directive::of_request(
                q("fieldValidation").as_deref(),
                "PatchOptions",
                t.sub.as_deref(),
            )?;
            let warnings = fieldcheck::check_patch(rt, fv, kind, body)?;
            let v = Verb::Patch(kind, body);
            let out = handlers::write_object(&shared.store, cfg, t, v, &write, &who).await;
            written(rt, out, warnings, req)
        }
        "delete" => {
            let opts = DeleteOptions::from_body(body, dry_run)?;
            let out = handlers::delete_object(&shared.store, t, &opts, body, &who).await;
            written(rt, out, Vec::new(), req)
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

/// `v` answering a request for `rt`, as metadata only when `Accept` asked for it.
fn answered(rt: &Served, code: u16, v: Value, req: &Req<'_>) -> Result<Response<Body>, ApiError> {
    let v = match req.conversion {
        Conversion::Metadata { list, version } => partial::convert(rt, v, list, version)?,
        Conversion::None | Conversion::Table => v,
    };
    Ok(json_response(code, &v, req.pretty))
}

/// A write's answer, with the request's own warnings then its webhooks' as `Warning` headers
/// (a refusal carries them too).
fn written(
    rt: &Served,
    out: Outcome,
    mut warnings: Vec<String>,
    req: &Req<'_>,
) -> Result<Response<Body>, ApiError> {
    warnings.extend(out.warnings);
    let resp = match out.result {
        Ok((code, v)) => answered(rt, code, v, req)?,
        Err(e) => error_response(&e, req.pretty),
    };
    Ok(with_warnings(resp, &warnings))
}

/// The user a write's webhooks are told about.
fn requester(user: Option<&auth::UserInfo>) -> Requester {
    user.map(|u| Requester {
        username: u.name.clone(),
        uid: u.uid.clone(),
        groups: u.groups.clone(),
    })
    .unwrap_or_default()
}

/// A converted watch event's object (by event type) as `conversion` asks: a bookmark is
/// shaped only for metadata, as [`watch::open`] shapes it.
fn watch_shape(rt: &Served, conversion: Conversion) -> Arc<conversion::Shape> {
    let rt = rt.clone();
    Arc::new(move |ty: &str, obj: Value| match (ty, conversion) {
        ("BOOKMARK", Conversion::Table) => obj,
        _ => watch::shaped(&rt, conversion, &obj).unwrap_or(obj),
    })
}

/// The conversion webhook a read of `t` needs (none for `/scale`, an `autoscaling/v1` Scale).
fn converter_of(s: &crate::storage::store::State, t: &Target) -> Option<conversion::Converter> {
    match t.sub.as_deref() {
        Some("scale") => None,
        _ => conversion::needed(s, &t.rt),
    }
}
