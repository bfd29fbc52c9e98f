//! What every benchmark prints: the machine and its load, tables in
//! Markdown (so they paste into `docs/benchmarks.md` as they are), and
//! order statistics of samples.

use std::fmt::Write as _;
use std::time::Duration;

/// The CPU model of the first processor in `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` writes them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Prints the machine: processors, CPU model, load now.
pub fn print_machine() {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("machine: nproc {nproc}, cpu {:?}, load average {}", cpu_model(), load_average());
}

/// Prints the start of a benchmark with the load average.
pub fn begin(name: &str, what: &str) {
    println!();
    println!("## {name}: {what}");
    println!("load average at start: {}", load_average());
}

/// Prints the load average at the end of a benchmark.
pub fn end(name: &str) {
    println!("{name}: load average at end: {}", load_average());
}

/// A table printed as Markdown with aligned columns.
#[derive(Debug)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Self { headers: headers.iter().map(|h| (*h).to_owned()).collect(), rows: Vec::new() }
    }

    /// Appends a row; missing cells are blank.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as Markdown.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::from("|");
            for (i, w) in widths.iter().enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = w.saturating_sub(cell.chars().count());
                let _ = write!(out, " {cell}{} |", " ".repeat(pad));
            }
            out
        };
        let mut out = line(&self.headers);
        out.push('\n');
        out.push('|');
        for w in widths.iter().take(columns) {
            out.push_str(&format!(" {} |", "-".repeat(*w)));
        }
        for row in &self.rows {
            out.push('\n');
            out.push_str(&line(row));
        }
        out
    }

    /// Prints the table.
    pub fn print(&self) {
        println!("{}", self.render());
    }
}

/// Order statistics of a set of samples (milliseconds, say).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// How many samples.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Stats {
    /// The statistics of `samples`; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            // Nearest rank: the smallest sample at or above p of them.
            let r = (p * sorted.len() as f64).ceil() as usize;
            sorted[r.clamp(1, sorted.len()) - 1]
        };
        Some(Self {
            n: sorted.len(),
            min: sorted[0],
            p50: rank(0.50),
            p99: rank(0.99),
            max: sorted[sorted.len() - 1],
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
        })
    }
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A duration in microseconds.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A number with `digits` decimals.
pub fn f(value: f64, digits: usize) -> String {
    format!("{value:.digits$}")
}

/// A ratio as `0.0123x`, with enough digits for small ones.
pub fn ratio(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".to_owned();
    }
    if value >= 10.0 {
        format!("{value:.0}x")
    } else if value >= 0.1 {
        format!("{value:.2}x")
    } else if value >= 0.001 || value == 0.0 {
        format!("{value:.4}x")
    } else {
        format!("{value:.1e}x")
    }
}

/// `met` or `MISSED`.
pub fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Stats::of(&samples).unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.max), (1.0, 50.0, 99.0, 100.0));
        let one = Stats::of(&[7.0]).unwrap();
        assert_eq!((one.p50, one.p99), (7.0, 7.0));
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn tables_align() {
        let mut t = Table::new(&["a", "long header"]);
        t.row(vec!["wide cell".into(), "1".into()]);
        assert_eq!(
            t.render(),
            "| a         | long header |\n| --------- | ----------- |\n| wide cell | 1           |"
        );
    }
}
