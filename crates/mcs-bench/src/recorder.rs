//! A `metrics` recorder that counts what mcs-store records, so the poll-cost
//! benchmark can show what the server itself reported as consumed capacity
//! (`mcs_store_read_capacity_milliunits_total`) and how many requests each read made
//! (`mcs_store_requests_total`), keyed `name{label=value,…}`.

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
}

impl CounterFn for Series {
    fn increment(&self, value: u64) {
        self.count.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.count.fetch_max(value, Ordering::Relaxed);
    }
}

impl HistogramFn for Series {
    fn record(&self, _value: f64) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// The process-wide recorder of this binary.
#[derive(Debug, Default)]
pub struct SumRecorder {
    series: Mutex<HashMap<String, Arc<Series>>>,
}

impl SumRecorder {
    /// Installs the recorder (once) and returns it.
    pub fn global() -> &'static SumRecorder {
        static RECORDER: OnceLock<&'static SumRecorder> = OnceLock::new();
        RECORDER.get_or_init(|| {
            let recorder: &'static SumRecorder = Box::leak(Box::default());
            // Nothing else in this binary installs a recorder.
            let _ = metrics::set_global_recorder(recorder);
            recorder
        })
    }

    fn series(&self, key: &Key) -> Arc<Series> {
        let labels: Vec<String> =
            key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
        let id = format!("{}{{{}}}", key.name(), labels.join(","));
        self.series.lock().unwrap_or_else(|p| p.into_inner()).entry(id).or_default().clone()
    }

    /// Counter value, or number of histogram samples, of `id`.
    pub fn count(&self, id: &str) -> u64 {
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .map_or(0, |s| s.count.load(Ordering::Relaxed))
    }
}

impl Recorder for SumRecorder {
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
