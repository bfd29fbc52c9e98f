//! Watches that one object cannot stop, and that tell readiness.
//!
//! ```text
//!  LIST/WATCH ─▶ Lenient<K>: every item decodes (its metadata at least)
//!     ├─ K decodes ─────────────▶ Event<K> ─▶ reflector / controller
//!     └─ K does not ─▶ WARN namespace/name + reason, counted in
//!                      mcs_controller_undecodable_objects_total{kind}; skipped
//!                      (a deletion still leaves the store)
//!  any watch ─ error ─▶ health: not ready, naming the watch, until it lists again
//! ```
//!
//! kube decodes a LIST into `ObjectList<K>` whole: one object `K` cannot
//! decode (a ServiceExport written under another CRD's schema) would fail
//! the list, and with it every other object of the kind, retried forever.
//! [`Lenient`] decodes each item on its own. See docs/design.md §13.

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;
use std::fmt::Debug;

/// An object of kind `K` as the API server sent it: decoded, or its
/// metadata and why it did not decode.
#[derive(Debug, Clone)]
pub struct Lenient<K>(Result<K, (ObjectMeta, String)>);

impl<K> Lenient<K> {
    /// The object, or why it did not decode.
    pub fn decoded(&self) -> Result<&K, &str> {
        self.0.as_ref().map_err(|(_, reason)| reason.as_str())
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        // The metadata is decoded apart only when `K` does not decode (once
        // per event: it is most of a ServiceExport, its managedFields).
        match K::deserialize(&value) {
            Ok(k) => Ok(Self(Ok(k))),
            Err(error) => {
                // Only an object without readable metadata fails the list:
                // the API server never sends one.
                let meta = ObjectMeta::deserialize(
                    value.get("metadata").unwrap_or(&serde_json::Value::Null),
                )
                .map_err(serde::de::Error::custom)?;
                Ok(Self(Err((meta, error.to_string()))))
            }
        }
    }
}

impl<K: Resource> Resource for Lenient<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match &self.0 {
            Ok(k) => k.meta(),
            Err((meta, _)) => meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match &mut self.0 {
            Ok(k) => k.meta_mut(),
            Err((meta, _)) => meta,
        }
    }
}

/// The objects of kind `K` in every namespace matching `config`, as
/// [`watcher()`] yields them, but decoded one by one: an object that does not
/// decode is logged (WARN, with its namespace, name and the reason),
/// counted and skipped, and the others go on. Their `managedFields` are
/// dropped: no reader of these watches needs them. Readiness follows the watch
/// ([`tracked`], as `name`).
pub fn lenient<K>(
    client: kube::Client,
    config: watcher::Config,
    name: &'static str,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let api: Api<Lenient<K>> = Api::all(client);
    tracked(name, watcher(api, config))
        .try_filter_map(|event| std::future::ready(Ok(decoded(event))))
        .modify(forget_managed_fields)
}

/// Drops an object's `managedFields`, often larger than the rest of it, for
/// a store whose reader never reads them (it would copy them with every
/// event). The importer's stores keep them: `import/diff.rs` reads them.
pub fn forget_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// The event of `K` that `event` carries: `None` for an object that does not
/// decode (logged and counted), but a deletion of one still removes it from
/// a store, as an object of its metadata alone where `K` decodes from that.
pub fn decoded<K>(event: Event<Lenient<K>>) -> Option<Event<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    match event {
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
        Event::InitApply(o) => usable(o).map(Event::InitApply),
        Event::Apply(o) => usable(o).map(Event::Apply),
        Event::Delete(o) => match o.0 {
            Ok(k) => Some(Event::Delete(k)),
            Err((meta, _)) => serde_json::from_value(serde_json::json!({"metadata": meta}))
                .ok()
                .map(Event::Delete),
        },
    }
}

fn usable<K: Resource<DynamicType = ()>>(object: Lenient<K>) -> Option<K> {
    match object.0 {
        Ok(k) => Some(k),
        Err((meta, reason)) => {
            let kind = K::kind(&());
            let namespace = meta.namespace.as_deref().unwrap_or_default();
            let name = meta.name.as_deref().unwrap_or_default();
            tracing::warn!(%kind, %namespace, %name, %reason, "object does not decode: skipped");
            ::metrics::counter!(crate::metrics::UNDECODABLE_OBJECTS, "kind" => kind.into_owned())
                .increment(1);
            None
        }
    }
}

/// `stream` (a watch named `name`), reporting to readiness: not ready from
/// an error until it yields an object again ([`crate::health::watch_failed`],
/// told as `shared_kube::watch_failure` says).
pub fn tracked<K, S>(name: &'static str, stream: S) -> impl Stream<Item = S::Item> + Send + 'static
where
    K: Resource<DynamicType = ()>,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    stream.inspect(move |item| match item {
        Err(error) => {
            crate::health::watch_failed(name, &crate::shared_kube::watch_failure::<K>(error))
        }
        Ok(Event::Init) => {}
        Ok(_) => crate::health::watch_listed(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ServiceExport;
    use serde_json::json;

    fn lenient(value: serde_json::Value) -> Lenient<ServiceExport> {
        serde_json::from_value(value).expect("every object with metadata decodes")
    }

    /// Issue 27 item 6 (before: one such object failed the whole LIST).
    #[test]
    fn an_object_that_does_not_decode_is_skipped_and_the_list_goes_on() {
        let list: kube::core::ObjectList<Lenient<ServiceExport>> = serde_json::from_value(json!({
            "metadata": {"resourceVersion": "7"},
            "items": [
                {"metadata": {"name": "bad", "namespace": "demo"}, "spec": {"exportedLabels": "x"}},
                {"metadata": {"name": "bare", "namespace": "demo"}},
                {"metadata": {"name": "full", "namespace": "demo"}, "spec": {"exportedLabels": {"a": "b"}}},
            ],
        }))
        .expect("the list decodes");
        let kept: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|o| decoded(Event::InitApply(o)))
            .map(|e| match e {
                Event::InitApply(se) => se.metadata.name.unwrap_or_default(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(kept, ["bare", "full"]);
        let bad = lenient(json!({"metadata": {"name": "bad"}, "spec": {"exportedLabels": 3}}));
        let reason = bad.decoded().unwrap_err();
        assert!(reason.contains("invalid type"), "{reason}");
        assert!(decoded(Event::Apply(bad.clone())).is_none());
        // Its deletion still reaches a store, by its metadata.
        match decoded(Event::Delete(bad)) {
            Some(Event::Delete(se)) => assert_eq!(se.metadata.name.as_deref(), Some("bad")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(decoded::<ServiceExport>(Event::InitDone), Some(Event::InitDone)));
    }

    #[test]
    fn an_object_without_metadata_fails_as_before() {
        assert!(serde_json::from_value::<Lenient<ServiceExport>>(json!({"metadata": 3})).is_err());
    }
}
