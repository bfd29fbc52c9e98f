//! A metering proxy between the store and moto_server.
//!
//! moto_server answers every Query and Scan with a constant
//! `ConsumedCapacity` of 1.0, whatever it read, so the read units are
//! computed here instead, from the items on the wire, by DynamoDB's
//! documented rules: an item's size is the sum of its attribute names and
//! values (strings by UTF-8 bytes, numbers about one byte per two
//! significant digits plus one, maps and lists 3 bytes plus one per
//! element); a Query or Scan page costs its items' total size rounded up to
//! 4 KB, one unit per 4 KB when strongly consistent and half a unit when
//! eventually consistent, and never less than one such 4 KB step, even
//! empty.
//!
//! The proxy also captures, on demand, the items the store's own `put`
//! encodes (answering the PutItem itself), so the benchmark can load a
//! table with BatchWriteItem of exactly the items the store writes.
//!
//! ```text
//!  DynamoStore ──HTTP──► Meter ──HTTP──► moto_server
//!                          ├ Query/Scan pages: items, bytes ─► read units
//!                          └ capture on: PutItem ─► captured items, "{}"
//! ```

use anyhow::Context;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A raw item in DynamoDB's JSON (`{"name": {"S": "…"}, …}`).
pub type JsonItem = Map<String, Value>;

/// One page of a Query or Scan, as it crossed the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// `Query` or `Scan`.
    pub op: String,
    /// The index queried, if any.
    pub index: Option<String>,
    /// Whether the read was strongly consistent.
    pub consistent: bool,
    /// Items returned.
    pub items: usize,
    /// Their total size by DynamoDB's rules.
    pub bytes: u64,
}

impl Page {
    /// Read units DynamoDB charges for this page.
    pub fn read_units(&self) -> f64 {
        let steps = self.bytes.div_ceil(4096).max(1) as f64;
        if self.consistent { steps } else { steps / 2.0 }
    }
}

#[derive(Debug)]
struct MeterState {
    upstream: String,
    http: reqwest::Client,
    capture: AtomicBool,
    captured: Mutex<Vec<JsonItem>>,
    pages: Mutex<Vec<Page>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running proxy; it stops with the runtime.
#[derive(Debug, Clone)]
pub struct Meter {
    /// Where clients reach it: `http://127.0.0.1:<port>`.
    pub url: String,
    state: Arc<MeterState>,
}

impl Meter {
    /// Starts a proxy to `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> anyhow::Result<Self> {
        let state = Arc::new(MeterState {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder().pool_max_idle_per_host(64).build()?,
            capture: AtomicBool::new(false),
            captured: Mutex::new(Vec::new()),
            pages: Mutex::new(Vec::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let app = Router::new().fallback(proxy).with_state(state.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("meter: {e}");
            }
        });
        Ok(Self { url, state })
    }

    /// While on, PutItem requests are captured and answered by the proxy,
    /// not forwarded.
    pub fn set_capture(&self, on: bool) {
        self.state.capture.store(on, Ordering::SeqCst);
    }

    /// The items captured since the last call.
    pub fn take_captured(&self) -> Vec<JsonItem> {
        std::mem::take(&mut *lock(&self.state.captured))
    }

    /// The read pages seen since the last call.
    pub fn take_pages(&self) -> Vec<Page> {
        std::mem::take(&mut *lock(&self.state.pages))
    }
}

async fn proxy(State(state): State<Arc<MeterState>>, request: Request) -> Response {
    match forward(&state, request).await {
        Ok(response) => response,
        Err(e) => (StatusCode::BAD_GATEWAY, format!("meter: {e:#}")).into_response(),
    }
}

/// Hop-by-hop headers and those the client library sets itself.
fn passes(name: &HeaderName) -> bool {
    ![header::HOST, header::CONTENT_LENGTH, header::CONNECTION, header::TRANSFER_ENCODING]
        .contains(name)
}

async fn forward(state: &MeterState, request: Request) -> anyhow::Result<Response> {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20).await.context("reading the request")?;
    let operation = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or_default()
        .to_owned();
    if operation == "PutItem" && state.capture.load(Ordering::SeqCst) {
        let mut put: Value = serde_json::from_slice(&body).context("a PutItem request")?;
        let item = match put.get_mut("Item").map(Value::take) {
            Some(Value::Object(item)) => item,
            _ => anyhow::bail!("PutItem without an Item"),
        };
        lock(&state.captured).push(item);
        return Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/x-amz-json-1.0")
            .body(Body::from("{}"))?);
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut upstream = state
        .http
        .request(parts.method.clone(), format!("{}{path}", state.upstream))
        .body(body.clone());
    for (name, value) in &parts.headers {
        if passes(name) {
            upstream = upstream.header(name, value);
        }
    }
    let reply = upstream.send().await.context("forwarding to moto_server")?;
    let status = reply.status();
    let headers = reply.headers().clone();
    let bytes = reply.bytes().await.context("reading moto_server's reply")?;
    if status.is_success() && (operation == "Query" || operation == "Scan") {
        let page = measure(&operation, &body, &bytes)?;
        lock(&state.pages).push(page);
    }
    let mut response = Response::builder().status(status);
    for (name, value) in &headers {
        if passes(name) {
            response = response.header(name, value);
        }
    }
    Ok(response.body(Body::from(bytes))?)
}

/// The page a Query or Scan `request` got as `reply`.
fn measure(op: &str, request: &[u8], reply: &[u8]) -> anyhow::Result<Page> {
    let request: Value = serde_json::from_slice(request).context("a read request")?;
    let reply: Value = serde_json::from_slice(reply).context("a read reply")?;
    let items = reply.get("Items").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let bytes = items.iter().filter_map(Value::as_object).map(item_size).sum();
    Ok(Page {
        op: op.to_owned(),
        index: request.get("IndexName").and_then(Value::as_str).map(str::to_owned),
        consistent: request.get("ConsistentRead").and_then(Value::as_bool).unwrap_or(false),
        items: items.len(),
        bytes,
    })
}

/// The size of an item by DynamoDB's rules.
pub fn item_size(item: &JsonItem) -> u64 {
    item.iter().map(|(name, value)| name.len() as u64 + value_size(value)).sum()
}

/// The size of one typed value (`{"S": "…"}`), its name excluded.
fn value_size(value: &Value) -> u64 {
    let Some((kind, inner)) = value.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    let strings = |v: &Value, size: fn(&str) -> u64| -> u64 {
        v.as_array().map_or(0, |a| a.iter().filter_map(Value::as_str).map(size).sum())
    };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, |s| s.len() as u64),
        "N" => inner.as_str().map_or(0, number_size),
        "B" => inner.as_str().map_or(0, base64_len),
        "BOOL" | "NULL" => 1,
        "SS" => strings(inner, |s| s.len() as u64),
        "NS" => strings(inner, number_size),
        "BS" => strings(inner, base64_len),
        "L" => inner.as_array().map_or(0, |l| 3 + l.iter().map(|e| 1 + value_size(e)).sum::<u64>()),
        "M" => inner.as_object().map_or(0, |m| {
            3 + m.iter().map(|(k, e)| 1 + k.len() as u64 + value_size(e)).sum::<u64>()
        }),
        _ => 0,
    }
}

/// About one byte per two significant digits, plus one.
fn number_size(number: &str) -> u64 {
    let mantissa = number.split(['e', 'E']).next().unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len().max(1) as u64;
    significant.div_ceil(2) + 1
}

/// Raw bytes of a base64 text.
fn base64_len(text: &str) -> u64 {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count() as u64;
    (text.len() as u64 / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size(item: Value) -> u64 {
        item_size(item.as_object().unwrap())
    }

    #[test]
    fn sizes_follow_the_documented_rules() {
        assert_eq!(size(json!({"pk": {"S": "abc"}})), 5);
        assert_eq!(size(json!({"n": {"N": "12345"}})), 1 + 3 + 1);
        assert_eq!(size(json!({"n": {"N": "1000"}})), 1 + 1 + 1, "trailing zeros are trimmed");
        assert_eq!(size(json!({"n": {"N": "-0.0012"}})), 1 + 1 + 1);
        assert_eq!(size(json!({"b": {"BOOL": true}, "z": {"NULL": true}})), 4);
        assert_eq!(size(json!({"m": {"M": {"a": {"BOOL": true}}}})), 1 + 3 + (1 + 1 + 1));
        assert_eq!(size(json!({"l": {"L": [{"S": "xy"}, {"N": "7"}]}})), 1 + 3 + (1 + 2) + (1 + 2));
        assert_eq!(size(json!({"m": {"M": {}}})), 4, "an empty map is 3 bytes");
        assert_eq!(size(json!({"b": {"B": "aGVsbG8="}})), 1 + 5);
    }

    #[test]
    fn pages_cost_4kb_steps_with_a_minimum() {
        let page = |bytes, consistent| Page {
            op: "Scan".into(),
            index: None,
            consistent,
            items: 0,
            bytes,
        };
        assert_eq!(page(0, false).read_units(), 0.5, "an empty query still costs");
        assert_eq!(page(0, true).read_units(), 1.0);
        assert_eq!(page(4096, true).read_units(), 1.0);
        assert_eq!(page(4097, true).read_units(), 2.0);
        assert_eq!(page(4097, false).read_units(), 1.0);
    }
}
