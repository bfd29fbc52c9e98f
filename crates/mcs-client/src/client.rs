//! The client: one method per endpoint, retries (its configuration:
//! [`crate::config`]).

use crate::backoff::Attempts;
use crate::config::ClientConfig;
use crate::tls::Transport;
use crate::{Error, Section};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use mcs_api::{
    ClusterList, ClusterRegistered, ClusterRegistration, ExportAccepted, ExportKey, ExportList,
    ExportRequest, ImportList, Label, PoolId, PoolList, PoolRegistered, PoolRegistration, RouterId,
    RouterList, RouterRegistered, RouterRegistration, Withdrawal, Withdrawn,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A typed client of the registry's API; cheap to clone (one connection
/// pool shared by the clones).
///
/// Every call retries `503` and transport errors with jittered
/// exponential backoff (at least the `Retry-After` the registry sent)
/// until [`ClientConfig::retry_deadline`], and never retries another
/// status. Registrations are heartbeats, so retrying one is safe; a
/// withdrawal retried after a lost reply may answer `404` (it was done).
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The base URL without a trailing `/`; paths are appended to it.
    base: String,
    config: ClientConfig,
    transport: Transport,
    /// The last error a retry followed, with its cause chain; cleared by a
    /// success. What [`Client::gave_up`] tells when a caller's own bound
    /// cancels a call between retries.
    last_retried: Mutex<Option<String>>,
}

/// One reply to a list request: the list and its `ETag`, or `None` for a
/// `304` (unchanged).
pub(crate) type Polled<L> = Option<(L, String)>;

impl Client {
    /// A client for `config`; refuses an `http://` URL unless
    /// `allow_insecure_http`, and TLS files that do not load.
    pub fn new(config: ClientConfig) -> Result<Self, Error> {
        let uri: Uri = config
            .base_url
            .parse()
            .map_err(|e| Error::Config(format!("base url {:?}: {e}", config.base_url)))?;
        // The form named when the scheme is wrong: what this client accepts.
        let expected = if config.allow_insecure_http {
            "http://HOST[:PORT] or https://HOST[:PORT]"
        } else {
            "https://HOST[:PORT]"
        };
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") if config.allow_insecure_http => {}
            Some("http") => {
                return Err(Error::Config(format!(
                    "base url {:?} is plain http: use https, or set allow_insecure_http",
                    config.base_url
                )));
            }
            Some(other) => {
                return Err(Error::Config(format!(
                    "base url {:?} is {other}://: expected {expected}",
                    config.base_url
                )));
            }
            None => {
                return Err(Error::Config(format!(
                    "base url {:?} has no scheme: expected {expected}",
                    config.base_url
                )));
            }
        }
        if uri.query().is_some() {
            return Err(Error::Config(format!("base url {:?} has a query", config.base_url)));
        }
        let base = config.base_url.trim_end_matches('/').to_owned();
        let transport = Transport::new(config.clone())?;
        let last_retried = Mutex::new(None);
        Ok(Self { inner: Arc::new(Inner { base, config, transport, last_retried }) })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The error for a call its caller gave up on after `within` (a bound
    /// of its own, shorter than the retries'): a transport error naming the
    /// registry and, when a try failed since the last success, the last
    /// failure with its cause (a refused connection, a 503), which the
    /// cancelled call could no longer return. That failure may be another
    /// call's, as it says: calls share the client.
    pub fn gave_up(&self, within: Duration) -> Error {
        let secs = within.as_secs_f64();
        let base = &self.inner.base;
        let last = self.inner.last_retried.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Error::Transport(
            match last {
                Some(last) => {
                    format!("no answer from {base} within {secs} s; its last failure (of any call): {last}")
                }
                None => format!("no answer from {base} within {secs} s"),
            }
            .into(),
        )
    }

    /// `POST /v1/pools`: registers (or renews) a pool.
    pub async fn register_pool(&self, pool: &PoolRegistration) -> Result<PoolRegistered, Error> {
        self.retrying(|| self.register_pool_once(pool)).await
    }

    /// `DELETE /v1/pools/{pool_id}`.
    pub async fn withdraw_pool(&self, pool: &PoolId, w: &Withdrawal) -> Result<Withdrawn, Error> {
        let path = ["v1", "pools", pool.as_str()];
        self.retrying(|| self.write::<(), _>(Method::DELETE, &path, Some(w), None)).await
    }

    /// `GET /v1/pools`.
    pub async fn pools(&self) -> Result<PoolList, Error> {
        self.list().await
    }

    /// `POST /v1/routers`: registers (or renews) a router replica.
    pub async fn register_router(
        &self,
        router: &RouterRegistration,
    ) -> Result<RouterRegistered, Error> {
        self.retrying(|| self.register_router_once(router)).await
    }

    /// `DELETE /v1/routers/{router_id}`.
    pub async fn withdraw_router(
        &self,
        router: &RouterId,
        w: &Withdrawal,
    ) -> Result<Withdrawn, Error> {
        let path = ["v1", "routers", router.as_str()];
        self.retrying(|| self.write::<(), _>(Method::DELETE, &path, Some(w), None)).await
    }

    /// `GET /v1/routers`.
    pub async fn routers(&self) -> Result<RouterList, Error> {
        self.list().await
    }

    /// `PUT /v1/clusters/{cluster_id}`: registers (or renews) a cluster's
    /// lease, which its exports live on.
    pub async fn register_cluster(
        &self,
        cluster: &Label,
        registration: &ClusterRegistration,
    ) -> Result<ClusterRegistered, Error> {
        self.retrying(|| self.register_cluster_once(cluster, registration)).await
    }

    /// `DELETE /v1/clusters/{cluster_id}`: its exports stop being served.
    pub async fn withdraw_cluster(
        &self,
        cluster: &Label,
        w: &Withdrawal,
    ) -> Result<Withdrawn, Error> {
        let path = ["v1", "clusters", cluster.as_str()];
        self.retrying(|| self.write::<(), _>(Method::DELETE, &path, Some(w), None)).await
    }

    /// `GET /v1/clusters`.
    pub async fn clusters(&self) -> Result<ClusterList, Error> {
        self.list().await
    }

    /// `PUT /v1/clusters/{cluster_id}/exports/{namespace}/{name}`.
    pub async fn put_export(
        &self,
        key: &ExportKey,
        export: &ExportRequest,
    ) -> Result<ExportAccepted, Error> {
        let path = export_path(key);
        self.retrying(|| self.write(Method::PUT, &path, None, Some(export))).await
    }

    /// `DELETE /v1/clusters/{cluster_id}/exports/{namespace}/{name}`; while
    /// the cluster's lease is live, `w.incarnation` must be its holder's.
    pub async fn withdraw_export(
        &self,
        key: &ExportKey,
        w: &Withdrawal,
    ) -> Result<Withdrawn, Error> {
        let path = export_path(key);
        self.retrying(|| self.write::<(), _>(Method::DELETE, &path, Some(w), None)).await
    }

    /// `GET /v1/exports`.
    pub async fn exports(&self) -> Result<ExportList, Error> {
        self.list().await
    }

    /// `GET /v1/imports`.
    pub async fn imports(&self) -> Result<ImportList, Error> {
        self.list().await
    }

    /// `HEAD` of a section's list (with retries): whether the registry
    /// answers it, with no list sent back to decode, so that a probe costs
    /// the same whatever the list holds. A `HEAD` refused has no body: the
    /// refusal is asked again with a `GET`, for the registry's own error.
    pub async fn reachable<L: Section>(&self) -> Result<(), Error> {
        self.retrying(|| async {
            let request = Request::head(self.path(&["v1", L::PATH]));
            let timeout = self.inner.config.request_timeout;
            let (_, status, _, _) = self.send(request, None, timeout).await?;
            if status.is_success() {
                return Ok(());
            }
            self.poll::<L>(None, None).await.map(drop)
        })
        .await
    }

    /// `GET /v1/status`: the registry's status document (with retries).
    pub async fn status(&self) -> Result<mcs_api::Status, Error> {
        self.retrying(|| async {
            let request = Request::get(self.path(&["v1", "status"]));
            let (target, status, headers, body) =
                self.send(request, None, self.inner.config.request_timeout).await?;
            decode(&target, status, &headers, &body)
        })
        .await
    }

    /// `GET` of any section's list (with retries).
    pub async fn list<L: Section>(&self) -> Result<L, Error> {
        let polled = self.retrying(|| self.poll::<L>(None, None)).await?;
        polled.map(|(list, _)| list).ok_or_else(|| {
            Error::Config("the registry answered 304 to an unconditional list".into())
        })
    }

    /// One attempt of `POST /v1/pools` (the keeper's renewal).
    pub(crate) async fn register_pool_once(
        &self,
        pool: &PoolRegistration,
    ) -> Result<PoolRegistered, Error> {
        self.write(Method::POST, &["v1", "pools"], None, Some(pool)).await
    }

    /// One attempt of `POST /v1/routers`.
    pub(crate) async fn register_router_once(
        &self,
        router: &RouterRegistration,
    ) -> Result<RouterRegistered, Error> {
        self.write(Method::POST, &["v1", "routers"], None, Some(router)).await
    }

    /// One attempt of `PUT /v1/clusters/{cluster_id}`.
    pub(crate) async fn register_cluster_once(
        &self,
        cluster: &Label,
        registration: &ClusterRegistration,
    ) -> Result<ClusterRegistered, Error> {
        self.write(Method::PUT, &["v1", "clusters", cluster.as_str()], None, Some(registration))
            .await
    }

    /// One attempt of a list request, conditional on `etag` and waiting
    /// up to `watch` for a change when given.
    pub(crate) async fn poll<L: Section>(
        &self,
        etag: Option<&str>,
        watch: Option<Duration>,
    ) -> Result<Polled<L>, Error> {
        let mut path = self.path(&["v1", L::PATH]);
        let mut timeout = self.inner.config.request_timeout;
        if let Some(wait) = watch {
            let secs = wait.as_secs().max(1);
            path.push_str(&format!("?watch=true&timeout_secs={secs}"));
            timeout += Duration::from_secs(secs);
        }
        let mut request = Request::get(path);
        if let Some(etag) = etag {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        let (target, status, headers, body) = self.send(request, None, timeout).await?;
        if status == StatusCode::NOT_MODIFIED {
            return Ok(None);
        }
        let etag = headers.get(header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let list: L = decode(&target, status, &headers, &body)?;
        // The registry always sends an ETag; rebuild its form if a proxy dropped it.
        let etag = etag.unwrap_or_else(|| {
            let suffix = if list.complete() { "" } else { "-incomplete" };
            format!("\"{}{suffix}\"", list.fingerprint())
        });
        Ok(Some((list, etag)))
    }

    /// One attempt of a write.
    pub(crate) async fn write<B: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: Method,
        path: &[&str],
        query: Option<&Withdrawal>,
        body: Option<&B>,
    ) -> Result<R, Error> {
        if let Some(fence) = &self.inner.config.write_fence {
            fence.check().map_err(Error::Fenced)?;
        }
        let mut path = self.path(path);
        if let Some(query) = query {
            let query = serde_urlencoded::to_string(query)
                .map_err(|e| Error::Config(format!("withdrawal query: {e}")))?;
            if !query.is_empty() {
                path.push('?');
                path.push_str(&query);
            }
        }
        let body = body
            .map(|b| serde_json::to_vec(b).map_err(|e| Error::Config(format!("request body: {e}"))))
            .transpose()?;
        let request = Request::builder().method(method).uri(path);
        let (target, status, headers, reply) =
            self.send(request, body, self.inner.config.request_timeout).await?;
        decode(&target, status, &headers, &reply)
    }

    /// Sends one request and reads its whole reply within `timeout`: the
    /// request as `METHOD URL`, the reply's status, headers and body.
    async fn send(
        &self,
        request: http::request::Builder,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<(String, StatusCode, HeaderMap, Bytes), Error> {
        // Named in every transport error: which call, to which URL.
        let target = format!(
            "{} {}",
            request.method_ref().map_or("?", Method::as_str),
            request.uri_ref().map(ToString::to_string).unwrap_or_default()
        );
        let at = |source: Box<dyn std::error::Error + Send + Sync>| {
            Error::Transport(Box::new(crate::error::AtUrl { target: target.clone(), source }))
        };
        let request = match &body {
            Some(_) => request.header(header::CONTENT_TYPE, "application/json"),
            None => request,
        };
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| Error::Config(format!("request: {e}")))?;
        let http = self.inner.transport.http();
        let exchange = async {
            let response = http.request(request).await.map_err(|e| at(e.into()))?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await.map_err(|e| at(e.into()))?.to_bytes();
            Ok((target.clone(), parts.status, parts.headers, body))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(reply) => reply,
            Err(_) => Err(at(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no reply within {} ms", timeout.as_millis()),
            )
            .into())),
        }
    }

    /// The HTTP client of the current TLS files.
    pub(crate) fn transport_http(&self) -> crate::tls::Http {
        self.inner.transport.http()
    }

    /// Runs `attempt` until it succeeds, fails with an error that is not
    /// retryable, or the retry deadline would pass before the next try.
    pub(crate) async fn retrying<T, F, Fut>(&self, mut attempt: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let deadline = Instant::now() + self.inner.config.retry_deadline;
        let mut attempts = Attempts::new(self.inner.config.backoff);
        let last_retried = |error: Option<&Error>| {
            *self.inner.last_retried.lock().unwrap_or_else(PoisonError::into_inner) =
                error.map(|e| mcs_api::chain(e));
        };
        loop {
            let error = match attempt().await {
                Ok(reply) => {
                    last_retried(None);
                    return Ok(reply);
                }
                Err(error) if error.is_retryable() => error,
                Err(error) => return Err(error),
            };
            last_retried(Some(&error));
            let delay = attempts.delay(error.retry_after());
            if Instant::now() + delay > deadline {
                return Err(error);
            }
            tracing::debug!(%error, delay_ms = delay.as_millis() as u64, "retrying");
            tokio::time::sleep(delay).await;
        }
    }

    /// The URL of `segments` under the base. Every segment is a DNS-1123
    /// label or subdomain, or a hex pool id: nothing to percent-encode.
    pub(crate) fn path(&self, segments: &[&str]) -> String {
        let mut url = self.inner.base.clone();
        for segment in segments {
            url.push('/');
            url.push_str(segment);
        }
        url
    }
}

fn export_path(key: &ExportKey) -> [&str; 6] {
    [
        "v1",
        "clusters",
        key.cluster_id.as_str(),
        "exports",
        key.namespace.as_str(),
        key.name.as_str(),
    ]
}

/// The body of a 2xx reply to `target`, parsed, or the error of any other.
fn decode<T: DeserializeOwned>(
    target: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, Error> {
    if !status.is_success() {
        let retry_after = headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        return Err(Error::from_reply(target, status, retry_after, body));
    }
    serde_json::from_slice(body).map_err(Error::Decode)
}

/// The lists' sections, so that one generic [`Client::list`] and
/// [`Client::watch`](crate::Client::watch) serve them all.
macro_rules! sections {
    ($($list:ident => $path:literal, $field:ident: $item:ty),* $(,)?) => {$(
        impl Section for $list {
            const PATH: &'static str = $path;
            type Item = $item;
            fn complete(&self) -> bool {
                self.complete
            }
            fn fingerprint(&self) -> &str {
                &self.fingerprint
            }
            fn assemble(items: Vec<$item>, complete: bool, fingerprint: String) -> Self {
                $list { $field: items, complete, fingerprint }
            }
        }
    )*};
}

sections!(
    PoolList => "pools", pools: mcs_api::Pool,
    RouterList => "routers", routers: mcs_api::RouterReplica,
    ClusterList => "clusters", clusters: mcs_api::Cluster,
    ExportList => "exports", exports: mcs_api::Export,
    ImportList => "imports", imports: mcs_api::ServiceImport,
);
