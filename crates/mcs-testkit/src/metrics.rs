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

/// A series' metric name without the suffixes a histogram's parts add.
pub fn base_name(name: &str) -> &str {
    ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

/// The metric names a document's section lists: the first cell, in
/// backquotes, of each table row from the line `heading` to the next `## `
/// heading (docs/configuration.md's "## Metrics" and "## mcs-controller
/// metrics").
pub fn documented_names(doc: &str, heading: &str) -> std::collections::BTreeSet<String> {
    let start = doc.find(heading).unwrap_or_else(|| panic!("no {heading:?} section"));
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .map(str::to_owned)
        .collect()
}
