//! A hand-written `metrics` recorder that keeps every counter and histogram
//! sample in memory, keyed `name{label=value,…}`: for the assertions of
//! tests, and for what `mcs-bench poll-cost` shows the store reported.

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Default)]
struct Series {
    count: AtomicU64,
    samples: Mutex<Vec<f64>>,
}

impl CounterFn for Series {
    fn increment(&self, value: u64) {
        self.count.fetch_add(value, Ordering::SeqCst);
    }
    fn absolute(&self, value: u64) {
        self.count.fetch_max(value, Ordering::SeqCst);
    }
}

impl HistogramFn for Series {
    fn record(&self, value: f64) {
        self.count.fetch_add(1, Ordering::SeqCst);
        lock(&self.samples).push(value);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The process-wide recorder of a test binary (or of `mcs-bench`).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    series: Mutex<HashMap<String, Arc<Series>>>,
}

impl MemoryRecorder {
    /// Installs the recorder once per process and returns it; panics when
    /// another recorder is installed.
    pub fn global() -> &'static MemoryRecorder {
        static RECORDER: OnceLock<&'static MemoryRecorder> = OnceLock::new();
        RECORDER.get_or_init(|| {
            let recorder: &'static MemoryRecorder = Box::leak(Box::default());
            metrics::set_global_recorder(recorder).expect("no other recorder");
            recorder
        })
    }

    fn series(&self, key: &Key) -> Arc<Series> {
        let labels: Vec<String> =
            key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
        let id = format!("{}{{{}}}", key.name(), labels.join(","));
        lock(&self.series).entry(id).or_default().clone()
    }

    /// The counter `id` (`name{label=value,…}`), or the number of samples
    /// of histogram `id`; 0 if never recorded.
    pub fn counter(&self, id: &str) -> u64 {
        lock(&self.series).get(id).map_or(0, |s| s.count.load(Ordering::SeqCst))
    }

    /// The samples of histogram `id`.
    pub fn samples(&self, id: &str) -> Vec<f64> {
        lock(&self.series).get(id).map_or_else(Vec::new, |s| lock(&s.samples).clone())
    }
}

impl Recorder for MemoryRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.series(key))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.series(key))
    }
}

/// The metric names in a Prometheus text exposition, a histogram's
/// `_bucket`, `_sum` and `_count` series under their metric's name.
pub fn exported_names(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(|name| base_name(name).to_owned())
        .collect()
}

/// Each metric's type from the `# TYPE name type` lines of a Prometheus
/// text exposition.
pub fn exported_types(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_owned(), kind.trim().to_owned()))
        .collect()
}

/// What in `types` breaks the Prometheus naming conventions, one line
/// each: a counter whose name does not end in `_total`, anything else
/// whose name does, a histogram or gauge named for a histogram's parts.
pub fn convention_breaches(types: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    let mut breaches = Vec::new();
    for (name, kind) in types {
        let total = name.ends_with("_total");
        match kind.as_str() {
            "counter" if !total => breaches.push(format!("counter {name} does not end in _total")),
            "counter" => {}
            other if total => {
                breaches.push(format!("{other} {name} ends in _total: a counter's suffix"))
            }
            _ if base_name(name) != name => {
                breaches.push(format!("{kind} {name} ends as a histogram's part"))
            }
            _ => {}
        }
    }
    breaches
}

/// Each metric's documented type: the second cell of each table row of
/// the section `heading` (as [`documented_names`] reads the first).
pub fn documented_types(doc: &str, heading: &str) -> std::collections::BTreeMap<String, String> {
    let start = doc.find(heading).unwrap_or_else(|| panic!("no {heading:?} section"));
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section
        .lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix("| `")?.split('|');
            let name = cells.next()?.split('`').next()?;
            let kind = cells.next()?.split_whitespace().next()?;
            Some((name.to_owned(), kind.to_owned()))
        })
        .collect()
}

/// The exported types that differ from the documented ones, and the
/// convention breaches: empty when `/metrics` and the page agree.
pub fn type_mismatches(text: &str, doc: &str, heading: &str) -> Vec<String> {
    let exported = exported_types(text);
    let documented = documented_types(doc, heading);
    let mut problems = convention_breaches(&exported);
    for (name, kind) in &exported {
        match documented.get(name) {
            Some(doc_kind) if doc_kind != kind => {
                problems.push(format!("{name} is a {kind}, documented as a {doc_kind}"))
            }
            _ => {}
        }
    }
    problems
}

/// The metric names a file refers to (an alert rule, a dashboard): every
/// word starting with one of `prefixes`, histogram parts taken to their
/// metric.
pub fn referenced_names(text: &str, prefixes: &[&str]) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| prefixes.iter().any(|p| word.starts_with(p)))
        .map(|word| base_name(word).to_owned())
        .collect()
}

/// A series' metric name without the suffixes a histogram's parts add.
pub fn base_name(name: &str) -> &str {
    ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

/// The metric names a document's section lists: the first cell, in
/// backquotes, of each table row from the line `heading` to the next `## `
/// heading (docs/configuration.md's "## Metrics" and "## mcs-controller
/// metrics").
pub fn documented_names(doc: &str, heading: &str) -> std::collections::BTreeSet<String> {
    documented_types(doc, heading).into_keys().collect()
}

#[cfg(test)]
mod convention_tests {
    use super::*;

    #[test]
    fn referenced_names_are_the_words_with_a_prefix_as_metrics() {
        let text = r#"rate(mcs_a_total{x="mcs_b"}[5m]) / process_cpu + x_mcs_c + mcs_d_bucket"#;
        let names: Vec<String> =
            referenced_names(text, &["mcs_", "process_"]).into_iter().collect();
        assert_eq!(names, ["mcs_a_total", "mcs_b", "mcs_d", "process_cpu"]);
    }

    #[test]
    fn breaches_and_mismatches_are_named() {
        let text = "# TYPE a_total gauge\na_total 1\n# TYPE b counter\nb 1\n\
                    # TYPE c_total counter\nc_total 1\n# TYPE d_seconds histogram\n\
                    # TYPE e_count gauge\n# TYPE f gauge\n";
        let doc =
            "## M\n| `c_total` | counter | |\n| `d_seconds` | gauge (x) | |\n| `f` | gauge | |\n";
        let problems = type_mismatches(text, doc, "## M");
        assert_eq!(
            problems,
            [
                "gauge a_total ends in _total: a counter's suffix",
                "counter b does not end in _total",
                "gauge e_count ends as a histogram's part",
                "d_seconds is a histogram, documented as a gauge",
            ]
        );
        assert_eq!(documented_names(doc, "## M").len(), 3);
    }
}
