//! Auto-export: every Service matching `--auto-export-selector` gets a
//! ServiceExport of the same name, created by the controller and marked
//! with `app.kubernetes.io/managed-by=<MANAGED_BY>` and an ownerReference
//! to the Service (so it goes with the Service). When the Service stops
//! matching, the ServiceExport is deleted only if it carries that mark:
//! ServiceExports made by users are never touched. Off unless the selector
//! is set; never in the system namespaces nor for `default/kubernetes`
//! ([`excluded`]), whatever their labels: labelling a Service must not be
//! a way around `create serviceexports`. See docs/design.md §13.

use crate::crd::{ServiceExport, ServiceExportSpec};
use crate::pace::{drain, jittered, ticks};
use crate::{Context, MANAGED_BY, metrics};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::core::{Expression, Selector, SelectorExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The label marking a ServiceExport as created by the controller.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// Namespaces whose Services are never auto-exported: Kubernetes' own.
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// Whether the Service `namespace/name` is never auto-exported: one of
/// [`SYSTEM_NAMESPACES`], or the API server's own `default/kubernetes`.
/// An explicit ServiceExport still exports it (that takes the right to
/// create one).
pub fn excluded(namespace: &str, name: &str) -> bool {
    SYSTEM_NAMESPACES.contains(&namespace) || (namespace, name) == ("default", "kubernetes")
}

/// Parses a Kubernetes label selector (`a=b,c!=d,e in (f,g),h notin (i),j,!k`).
pub fn parse_selector(text: &str) -> Result<Selector, String> {
    let mut expressions = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1).ok_or_else(|| format!("unbalanced ')' in {text:?}"))?
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in {text:?}"));
    }
    parts.push(&text[start..]);
    for part in parts.into_iter().map(str::trim) {
        if part.is_empty() {
            return Err(format!("empty requirement in selector {text:?}"));
        }
        expressions.push(parse_requirement(part)?);
    }
    Ok(expressions.into_iter().collect())
}

fn parse_requirement(part: &str) -> Result<Expression, String> {
    let bad = || format!("label selector requirement {part:?} does not parse");
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(key_of(key.trim())?));
    }
    for (op, not) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let (key, value) = (key_of(k.trim())?, value_of(v.trim())?);
            return Ok(if not {
                Expression::NotEqual(key, value)
            } else {
                Expression::Equal(key, value)
            });
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = key_of(words.next().unwrap_or_default())?;
    let Some(rest) = words.next().map(str::trim) else { return Ok(Expression::Exists(key)) };
    let (not, set) = if let Some(set) = rest.strip_prefix("notin") {
        (true, set)
    } else if let Some(set) = rest.strip_prefix("in") {
        (false, set)
    } else {
        return Err(bad());
    };
    let set = set.trim().strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(bad)?;
    let values: BTreeSet<String> =
        set.split(',').map(|v| value_of(v.trim())).collect::<Result<_, _>>()?;
    Ok(if not { Expression::NotIn(key, values) } else { Expression::In(key, values) })
}

fn key_of(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key.len() <= 253 + 1 + 63
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    ok.then(|| key.to_owned()).ok_or_else(|| format!("label key {key:?} is not valid"))
}

fn value_of(value: &str) -> Result<String, String> {
    let ok = value.len() <= 63
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then(|| value.to_owned()).ok_or_else(|| format!("label value {value:?} is not valid"))
}

/// Whether `se` was created by the controller (carries the mark).
pub fn created_by_controller(se: &ServiceExport) -> bool {
    se.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
}

/// The ServiceExport the controller creates for `service`.
pub fn service_export_for(service: &Service) -> Option<ServiceExport> {
    Some(ServiceExport {
        metadata: ObjectMeta {
            name: service.metadata.name.clone(),
            namespace: service.metadata.namespace.clone(),
            labels: Some([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())].into()),
            owner_references: Some(vec![service.controller_owner_ref(&())?]),
            ..ObjectMeta::default()
        },
        spec: ServiceExportSpec::default(),
        status: None,
    })
}

/// Why an auto-export reconcile failed.
#[derive(Debug, thiserror::Error)]
#[error("kubernetes: {0}")]
pub struct Error(#[from] kube::Error);

struct Auto {
    ctx: Arc<Context>,
    selector: Selector,
    /// The ServiceExports carrying the mark, so that a Service that does
    /// not match costs no API call.
    marked: Store<ServiceExport>,
}

async fn reconcile(service: Arc<Service>, auto: Arc<Auto>) -> Result<Action, Error> {
    let result = ensure(&service, &auto).await;
    let outcome = if result.is_ok() { "ok" } else { "error" };
    ::metrics::counter!(metrics::RECONCILES, "controller" => "auto_export", "outcome" => outcome)
        .increment(1);
    result
}

async fn ensure(service: &Service, auto: &Auto) -> Result<Action, Error> {
    let (Some(namespace), name) = (service.namespace(), service.name_any()) else {
        return Ok(Action::await_change());
    };
    let wanted = service.metadata.deletion_timestamp.is_none()
        && !excluded(&namespace, &name)
        && auto.selector.matches(service.labels());
    // The mirror is ready before the controller starts (see `run`).
    if !wanted && auto.marked.get(&ObjectRef::new(&name).within(&namespace)).is_none() {
        return Ok(Action::await_change());
    }
    let api = Api::<ServiceExport>::namespaced(auto.ctx.kube.clone(), &namespace);
    let existing = api.get_opt(&name).await?;
    match existing {
        None if wanted => {
            let Some(se) = service_export_for(service) else { return Ok(Action::await_change()) };
            match api.create(&PostParams::default(), &se).await {
                Ok(_) => tracing::info!(%namespace, %name, "service auto-exported"),
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Being deleted (e.g. by hand): look again once it is gone.
        Some(se) if wanted && se.metadata.deletion_timestamp.is_some() => {
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
        Some(se)
            if !wanted
                && created_by_controller(&se)
                && se.metadata.deletion_timestamp.is_none() =>
        {
            let params = DeleteParams {
                preconditions: Some(Preconditions { uid: se.uid(), resource_version: None }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => tracing::info!(%namespace, %name, "auto-export removed"),
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        _ => {}
    }
    Ok(Action::await_change())
}

fn error_policy(service: Arc<Service>, error: &Error, _: Arc<Auto>) -> Action {
    tracing::warn!(namespace = ?service.namespace(), name = %service.name_any(), error = %mcs_api::chain(error), "auto-export reconcile failed");
    Action::requeue(jittered(Duration::from_secs(5)))
}

/// Runs auto-export for `selector` until `cancel`.
pub async fn run(
    ctx: Arc<Context>,
    selector: Selector,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let kube = ctx.kube.clone();
    let resync = ctx.settings.resync_interval;
    let mirror_stop = cancel.child_token();
    let stop = mirror_stop.clone();
    let resyncs = ticks(resync);
    let marked = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let (store, writer) = reflector::store();
    let mirror = reflector(
        writer,
        crate::watch::lenient::<ServiceExport>(
            kube.clone(),
            marked.clone(),
            "ServiceExport (auto-exported)",
        )
        .default_backoff(),
    )
    .for_each(|_| async {});
    let mirror = tokio::spawn(async move {
        tokio::select! {
            () = mirror => {}
            () = stop.cancelled() => {}
        }
    });
    // Waited for here, once: kube-runtime's readiness wakes only the last of
    // several concurrent waiters, so reconciles must not wait on it.
    tokio::select! {
        ready = store.wait_until_ready() => ready?,
        () = cancel.cancelled() => {}
    }
    if !cancel.is_cancelled() {
        let results =
            Controller::new(Api::<Service>::all(kube.clone()), watcher::Config::default())
                .owns_stream(
                    crate::watch::lenient::<ServiceExport>(
                        kube.clone(),
                        marked,
                        "ServiceExport (auto-exported, owners)",
                    )
                    .touched_objects(),
                )
                .reconcile_all_on(resyncs)
                .graceful_shutdown_on(async move { cancel.cancelled().await })
                .run(reconcile, error_policy, Arc::new(Auto { ctx, selector, marked: store }));
        drain(results, "auto_export").await;
        tracing::info!("auto-export controller stopped");
    }
    mirror_stop.cancel();
    mirror.await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn selectors_parse_and_match_as_kubernetes_does() {
        let s = parse_selector(
            "mcs.example/export=true, tier in (front,back),env notin (dev),!legacy,team",
        )
        .unwrap();
        assert!(s.matches(&labels(&[
            ("mcs.example/export", "true"),
            ("tier", "front"),
            ("team", "a")
        ])));
        assert!(!s.matches(&labels(&[
            ("mcs.example/export", "true"),
            ("tier", "mid"),
            ("team", "a")
        ])));
        assert!(!s.matches(&labels(&[
            ("mcs.example/export", "true"),
            ("tier", "front"),
            ("team", "a"),
            ("env", "dev")
        ])));
        assert!(!s.matches(&labels(&[
            ("mcs.example/export", "true"),
            ("tier", "front"),
            ("team", "a"),
            ("legacy", "")
        ])));
        assert!(
            !s.matches(&labels(&[("mcs.example/export", "true"), ("tier", "front")])),
            "team must exist"
        );
        let s = parse_selector("a==b,c!=d").unwrap();
        assert!(s.matches(&labels(&[("a", "b")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("c", "d")])));
        for bad in ["", "a=b,", "a in (b", "a in b", "a=b c", "a b c", "=x", "a)"] {
            assert!(parse_selector(bad).is_err(), "{bad:?}");
        }
    }

    /// Issue 29 item 11 (before: a labelled `kube-system` Service or
    /// `default/kubernetes` was exported like any other).
    #[test]
    fn system_services_are_never_auto_exported() {
        for (namespace, name) in [
            ("kube-system", "kube-dns"),
            ("kube-public", "x"),
            ("kube-node-lease", "x"),
            ("default", "kubernetes"),
        ] {
            assert!(excluded(namespace, name), "{namespace}/{name}");
        }
        for (namespace, name) in [("default", "web"), ("demo", "kubernetes"), ("kube-systems", "x")]
        {
            assert!(!excluded(namespace, name), "{namespace}/{name}");
        }
    }

    #[test]
    fn the_created_export_is_marked_and_owned_by_its_service() {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "llm", "uid": "u-1"}
        }))
        .unwrap();
        let se = service_export_for(&service).unwrap();
        assert!(created_by_controller(&se));
        assert_eq!(
            (se.metadata.name.as_deref(), se.metadata.namespace.as_deref()),
            (Some("web"), Some("llm"))
        );
        let owner = &se.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Service", "web", "u-1")
        );
        assert_eq!(owner.controller, Some(true));
        let mut user_made = se.clone();
        user_made.metadata.labels = None;
        assert!(!created_by_controller(&user_made));
    }
}
