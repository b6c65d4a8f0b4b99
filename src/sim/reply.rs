//! The building blocks of the simulator's answers, shared by every request
//! handler: reading a body (bounded in size and time), JSON and plain
//! responses, vLLM-shaped error bodies, injected refusals, and tracing a
//! refused request.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use super::api_error::ApiError;
use super::fault::Refusal;
use super::server_log::LogRecord;
use super::shared::Shared;
use super::stream::SimBody;

/// Largest accepted request body.
pub const MAX_BODY: usize = 8 * 1024 * 1024;

/// Reads the whole body, at most [`MAX_BODY`] bytes within `timeout` (a
/// stalled upload would otherwise hold its connection forever).
pub(super) async fn read_body(
    req: Request<Incoming>,
    timeout: Duration,
) -> Result<bytes::Bytes, ApiError> {
    let collect = Limited::new(req.into_body(), MAX_BODY).collect();
    let Ok(collected) = tokio::time::timeout(timeout, collect).await else {
        return Err(ApiError {
            status: 408,
            kind: "RequestTimeout",
            message: format!("request body not received within {timeout:?}"),
        });
    };
    match collected {
        Ok(b) => Ok(b.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError {
                status: 413,
                kind: "BadRequestError",
                message: format!("request body larger than {MAX_BODY} bytes"),
            })
        }
        Err(e) => Err(ApiError::bad_request(format!(
            "reading the request body: {e}"
        ))),
    }
}

/// The error body and server log outcome of an injected refusal.
pub(super) fn refusal_error(refusal: Refusal) -> (ApiError, &'static str) {
    match refusal {
        Refusal::Http500 => (
            ApiError {
                status: 500,
                kind: "InternalServerError",
                message: "simulated internal error".into(),
            },
            "fault_http_500",
        ),
        Refusal::Http429 => (
            ApiError {
                status: 429,
                kind: "RateLimitError",
                message: "simulated rate limit".into(),
            },
            "fault_http_429",
        ),
    }
}

pub(super) fn shutting_down() -> ApiError {
    ApiError {
        status: 503,
        kind: "ServiceUnavailable",
        message: "the simulator is shutting down".into(),
    }
}

/// Answers with `err` and logs the request as `outcome`.
pub(super) fn refuse(
    shared: &Shared,
    mut rec: LogRecord,
    err: &ApiError,
    outcome: &'static str,
) -> Response<SimBody> {
    if let Some(sink) = &shared.server_log {
        rec.outcome = outcome;
        rec.status = err.status;
        rec.finish = shared.now();
        if rec.arrival.is_zero() {
            rec.arrival = rec.finish;
        }
        sink.record(&rec);
    }
    error(err)
}

pub(super) fn error(err: &ApiError) -> Response<SimBody> {
    json(
        StatusCode::from_u16(err.status).unwrap_or(StatusCode::BAD_REQUEST),
        err.body(),
    )
}

pub(super) fn json(status: StatusCode, body: String) -> Response<SimBody> {
    plain(status, "application/json", body)
}

pub(super) fn plain(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<SimBody> {
    let mut resp = Response::new(SimBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
