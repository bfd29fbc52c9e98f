//! Kubernetes' rules for label and annotation keys and values (the API
//! server's `ValidateLabels` and `ValidateAnnotations`), checked where a
//! ServiceExport's `exportedLabels` and `exportedAnnotations` are exported
//! and again where an import's are put on a ServiceImport: one bad key must
//! not make the API server refuse the whole object.
//!
//! - A key is a qualified name: an optional prefix, a DNS subdomain of at
//!   most 253 characters, and `/`; then a name of 1 to 63 characters,
//!   alphanumeric at both ends, with `-`, `_` and `.` between.
//! - A label value is empty or a name as above (at most 63 characters).
//! - Annotation values are free, but keys and values together are at most
//!   256 KiB.

use std::collections::BTreeMap;

/// Longest name part of a key, and longest label value.
pub const MAX_NAME_LEN: usize = 63;
/// Longest prefix of a key (a DNS subdomain).
pub const MAX_PREFIX_LEN: usize = 253;
/// Largest total of annotation keys and values, in bytes.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Why `key` is not a qualified name, if it is not.
pub fn key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(problem) = prefix.and_then(subdomain_problem) {
        return Some(format!("its prefix {problem}"));
    }
    name_problem(name).map(|problem| format!("its name {problem}"))
}

/// Why `value` is not a label value, if it is not.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    name_problem(value)
}

/// The first label (by key) that Kubernetes would refuse, with why.
pub fn labels_problem(labels: &BTreeMap<String, String>) -> Option<String> {
    labels.iter().find_map(|(key, value)| {
        if let Some(problem) = key_problem(key) {
            return Some(format!("label key {key:?} is not a qualified name: {problem}"));
        }
        label_value_problem(value)
            .map(|problem| format!("label {key:?} has an invalid value {value:?}: {problem}"))
    })
}

/// The first annotation (by key) that Kubernetes would refuse, or the
/// total size when it is over [`MAX_ANNOTATIONS_BYTES`], with why.
pub fn annotations_problem(annotations: &BTreeMap<String, String>) -> Option<String> {
    if let Some(problem) = annotations.keys().find_map(|key| {
        key_problem(key)
            .map(|problem| format!("annotation key {key:?} is not a qualified name: {problem}"))
    }) {
        return Some(problem);
    }
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    (total > MAX_ANNOTATIONS_BYTES).then(|| {
        format!("annotations total {total} bytes, over the limit of {MAX_ANNOTATIONS_BYTES}")
    })
}

/// `labels` without those Kubernetes would refuse, and the refused keys.
pub fn valid_labels(labels: &BTreeMap<String, String>) -> (BTreeMap<String, String>, Vec<String>) {
    let (kept, refused): (BTreeMap<_, _>, BTreeMap<_, _>) = labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(k, v)| key_problem(k).is_none() && label_value_problem(v).is_none());
    (kept, refused.into_keys().collect())
}

/// `annotations` without those whose key Kubernetes would refuse, and
/// the refused keys; all of them refused when their total is too large.
pub fn valid_annotations(
    annotations: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let (kept, refused): (BTreeMap<_, _>, BTreeMap<_, _>) = annotations
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(k, _)| key_problem(k).is_none());
    let mut refused: Vec<String> = refused.into_keys().collect();
    if annotations_problem(&kept).is_some() {
        refused.extend(kept.into_keys());
        refused.sort();
        return (BTreeMap::new(), refused);
    }
    (kept, refused)
}

/// The name part of a key, or a label value: 1 to 63 characters,
/// alphanumeric at both ends, `-`, `_` and `.` between.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Some(format!("is {} characters, over {MAX_NAME_LEN}", name.len()));
    }
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if let Some(c) = name.chars().find(|c| !inner(*c)) {
        return Some(format!("has {c:?}; only letters, digits, '-', '_' and '.' are allowed"));
    }
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !ends(name.chars().next()) || !ends(name.chars().last()) {
        return Some("must begin and end with a letter or digit".into());
    }
    None
}

/// A DNS subdomain (RFC 1123): at most 253 characters, dot-separated
/// labels of lowercase letters, digits and `-`, alphanumeric at both ends.
fn subdomain_problem(prefix: &str) -> Option<String> {
    if prefix.is_empty() {
        return Some("is empty".into());
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Some(format!("is {} characters, over {MAX_PREFIX_LEN}", prefix.len()));
    }
    let ok = prefix.split('.').all(|label| {
        let ends =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        ends(label.chars().next())
            && ends(label.chars().last())
            && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    });
    (!ok).then(|| "is not a DNS subdomain (lowercase letters, digits, '-' and '.')".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn keys_are_qualified_names() {
        for good in ["app", "a", "app.kubernetes.io/name", "x/y", "A_b-c.D", &"k".repeat(63)] {
            assert_eq!(key_problem(good), None, "{good}");
        }
        let long_prefix = format!("{}/name", "a".repeat(254));
        for bad in [
            "front end",
            "",
            "-app",
            "app-",
            "/name",
            "Example.com/name",
            "ex_ample.com/name",
            "a..b/name",
            "a/b/c",
            "prefix/",
            &"k".repeat(64),
            &long_prefix,
        ] {
            assert!(key_problem(bad).is_some(), "{bad:?} accepted");
        }
    }

    #[test]
    fn label_values_are_empty_or_names_of_at_most_63() {
        for good in ["", "v1", "front-end", "a.b_c", &"v".repeat(63)] {
            assert_eq!(label_value_problem(good), None, "{good}");
        }
        for bad in ["front end", "-x", "x.", "a/b", "é", &"v".repeat(64)] {
            assert!(label_value_problem(bad).is_some(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_problem_names_the_first_bad_label() {
        assert_eq!(labels_problem(&map(&[("app", "web"), ("tier", "")])), None);
        let problem = labels_problem(&map(&[("app", "web"), ("tier", "front end")])).unwrap();
        assert!(problem.contains("\"tier\"") && problem.contains("front end"), "{problem}");
        let problem = labels_problem(&map(&[("bad key", "x")])).unwrap();
        assert!(problem.contains("\"bad key\""), "{problem}");
    }

    #[test]
    fn annotations_have_qualified_keys_any_values_and_a_total_size() {
        assert_eq!(annotations_problem(&map(&[("note", "any value at all / with spaces")])), None);
        let problem = annotations_problem(&map(&[("a note", "x")])).unwrap();
        assert!(problem.contains("\"a note\""), "{problem}");
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES);
        assert_eq!(annotations_problem(&BTreeMap::new()), None);
        let problem = annotations_problem(&map(&[("k", &big)])).unwrap();
        assert!(problem.contains(&MAX_ANNOTATIONS_BYTES.to_string()), "{problem}");
        let fits = "x".repeat(MAX_ANNOTATIONS_BYTES - 1);
        assert_eq!(annotations_problem(&map(&[("k", &fits)])), None, "exactly at the limit");
    }

    #[test]
    fn only_the_refused_entries_are_left_out() {
        let (kept, refused) = valid_labels(&map(&[("app", "web"), ("tier", "front end")]));
        assert_eq!(kept, map(&[("app", "web")]));
        assert_eq!(refused, ["tier"]);
        let (kept, refused) = valid_annotations(&map(&[("ok", "a b"), ("not ok", "x")]));
        assert_eq!(kept, map(&[("ok", "a b")]));
        assert_eq!(refused, ["not ok"]);
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES);
        let (kept, refused) = valid_annotations(&map(&[("a", "1"), ("b", &big)]));
        assert!(kept.is_empty());
        assert_eq!(refused, ["a", "b"]);
    }
}
