//! Whether a server-side apply of a desired object would change what is in
//! the cluster, so that a reconcile with nothing changed writes nothing.
//!
//! Two checks, both on JSON:
//! - every field the desired object sets has that value in the current
//!   object ([`contains`]: objects by key, arrays by length and position,
//!   so server defaults such as a port's `targetPort` do not count as a
//!   difference, while an extra or missing list item does);
//! - no field this controller owns (its `Apply` entry in `managedFields`)
//!   is absent from the desired object ([`owns_more`]): such a field would
//!   be removed by the apply, e.g. an exported label that was withdrawn.

use crate::FIELD_MANAGER;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::Value;

/// Whether `current` already holds every value that `desired` sets. An empty
/// array, object or null in `desired` matches an absent field.
pub fn contains(current: Option<&Value>, desired: &Value) -> bool {
    match (desired, current) {
        (Value::Null, None) => true,
        (Value::Array(d), None) => d.is_empty(),
        (Value::Object(d), None) => d.values().all(|v| contains(None, v)),
        (_, None) => false,
        (Value::Object(d), Some(Value::Object(c))) => d.iter().all(|(k, v)| contains(c.get(k), v)),
        (Value::Array(d), Some(Value::Array(c))) => {
            d.len() == c.len() && d.iter().zip(c).all(|(d, c)| contains(Some(c), d))
        }
        (d, Some(c)) => d == c,
    }
}

/// Whether the owned field set `fields` (a `fieldsV1` tree) names a field
/// that `desired` does not set. List items (`k:`, `v:`, `i:`) are not
/// followed: lists are compared whole by [`contains`].
pub fn owns_more(fields: &Value, desired: &Value) -> bool {
    let Some(fields) = fields.as_object() else { return false };
    fields.iter().any(|(key, sub)| {
        let Some(name) = key.strip_prefix("f:") else { return false };
        match desired.get(name) {
            None | Some(Value::Null) => true,
            Some(d @ Value::Object(_)) => owns_more(sub, d),
            Some(_) => false,
        }
    })
}

/// This controller's applied field set of an object (`subresource` `None`
/// for the main resource, `Some("status")` for the status).
pub fn owned_fields<'a>(
    managed: Option<&'a [ManagedFieldsEntry]>,
    subresource: Option<&str>,
) -> Option<&'a Value> {
    managed?
        .iter()
        .find(|e| {
            e.manager.as_deref() == Some(FIELD_MANAGER)
                && e.operation.as_deref() == Some("Apply")
                && e.subresource.as_deref().filter(|s| !s.is_empty()) == subresource
        })
        .and_then(|e| e.fields_v1.as_ref())
        .map(|f| &f.0)
}

/// Whether applying `desired` (restricted to `part`, e.g. `["spec"]`-less
/// whole object or `["status"]`) over `current` would change anything.
pub fn differs(
    desired: &Value,
    current: &Value,
    managed: Option<&[ManagedFieldsEntry]>,
    subresource: Option<&str>,
) -> bool {
    if !contains(Some(current), desired) {
        return true;
    }
    owned_fields(managed, subresource).is_some_and(|owned| owns_more(owned, desired))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    #[test]
    fn server_defaults_are_not_differences_but_list_changes_are() {
        let desired =
            json!({"spec": {"ports": [{"name": "http", "port": 80}], "type": "ClusterIP"}});
        let current = json!({"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 80}],
            "type": "ClusterIP", "clusterIP": "10.0.0.1"}, "metadata": {"uid": "u"}});
        assert!(contains(Some(&current), &desired));
        let fewer = json!({"spec": {"ports": [], "type": "ClusterIP"}});
        assert!(!contains(Some(&current), &fewer));
        let changed = json!({"spec": {"ports": [{"name": "http", "port": 81}]}});
        assert!(!contains(Some(&current), &changed));
        let more =
            json!({"spec": {"ports": [{"name": "http", "port": 80}, {"name": "b", "port": 9}]}});
        assert!(!contains(Some(&current), &more));
        assert!(contains(Some(&json!({})), &json!({"a": [], "b": {}, "c": null})));
        assert!(!contains(Some(&json!({})), &json!({"a": {"b": 1}})));
    }

    #[test]
    fn a_field_we_own_but_no_longer_set_is_a_difference() {
        let owned = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}, "f:gone": {}}},
            "f:spec": {"f:ports": {"k:{\"port\":80}": {"f:name": {}}}}});
        let desired =
            json!({"metadata": {"labels": {"a": "1"}}, "spec": {"ports": [{"port": 80}]}});
        assert!(owns_more(&owned, &desired));
        let with_gone =
            json!({"metadata": {"labels": {"a": "1", "gone": "x"}}, "spec": {"ports": []}});
        assert!(!owns_more(&owned, &with_gone));

        let entry = |manager: &str, sub: Option<&str>, fields: Value| ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            subresource: sub.map(Into::into),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        };
        let current = json!({"metadata": {"labels": {"a": "1", "gone": "x"}}, "spec": {"ports": [{"port": 80}]}});
        // Someone else's label is not ours to remove: no difference.
        let theirs = [entry("kubectl", None, owned.clone())];
        assert!(!differs(&desired, &current, Some(&theirs), None));
        let ours =
            [entry(FIELD_MANAGER, Some("status"), json!({})), entry(FIELD_MANAGER, None, owned)];
        assert!(differs(&desired, &current, Some(&ours), None));
        assert!(!differs(&desired, &current, Some(&ours), Some("status")));
        assert!(differs(&json!({"spec": {"ports": [{"port": 81}]}}), &current, None, None));
    }
}
