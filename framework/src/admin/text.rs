//! The admin server's plain-text answers: `text/plain; charset=utf-8` with `nosniff`, as
//! component-base and `responsewriters` send them.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The content type of every plain-text answer.
const TEXT: &str = "text/plain; charset=utf-8";

/// `body` as plain text with `status`.
pub(crate) fn text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
