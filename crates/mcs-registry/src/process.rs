//! Process metrics in the Prometheus client libraries' names, read from
//! `/proc/self` on Linux at each scrape (elsewhere: none). Written here
//! rather than taken from `metrics-process`, which brings `procfs` and its
//! dependencies for five numbers; without `unsafe`, the clock tick is taken
//! as Linux's fixed user-space `USER_HZ` of 100.

use metrics::{Unit, describe_gauge, gauge};

/// CPU time (user and system) the process used, in seconds.
pub const CPU_SECONDS: &str = "process_cpu_seconds_total";
/// Resident memory, in bytes.
pub const RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
/// Open file descriptors.
pub const OPEN_FDS: &str = "process_open_fds";
/// The file descriptor limit (soft).
pub const MAX_FDS: &str = "process_max_fds";
/// When the process started, in Unix seconds.
pub const START_TIME: &str = "process_start_time_seconds";

/// Every process series, for the documentation test.
pub const ALL: [&str; 5] = [CPU_SECONDS, RESIDENT_MEMORY, OPEN_FDS, MAX_FDS, START_TIME];

/// Clock ticks per second of `/proc/*/stat` (`USER_HZ`).
const TICKS_PER_SEC: f64 = 100.0;

/// Describes the process series.
pub fn describe() {
    describe_gauge!(CPU_SECONDS, Unit::Seconds, "user and system CPU time used (a counter)");
    describe_gauge!(RESIDENT_MEMORY, Unit::Bytes, "resident memory size");
    describe_gauge!(OPEN_FDS, "open file descriptors");
    describe_gauge!(MAX_FDS, "maximum number of open file descriptors (soft limit)");
    describe_gauge!(START_TIME, Unit::Seconds, "start time of the process since the Unix epoch");
}

/// Reads the process's numbers and sets the gauges; what cannot be read is
/// left as it was.
pub fn sample() {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return };
    if let Some(stat) = Stat::parse(&stat) {
        gauge!(CPU_SECONDS).set((stat.utime + stat.stime) as f64 / TICKS_PER_SEC);
        if let Some(boot) = std::fs::read_to_string("/proc/stat").ok().as_deref().and_then(btime) {
            gauge!(START_TIME).set(boot as f64 + stat.starttime as f64 / TICKS_PER_SEC);
        }
    }
    if let Some(rss) = std::fs::read_to_string("/proc/self/status").ok().as_deref().and_then(vm_rss)
    {
        gauge!(RESIDENT_MEMORY).set(rss as f64);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        gauge!(OPEN_FDS).set(fds.count() as f64);
    }
    if let Some(max) =
        std::fs::read_to_string("/proc/self/limits").ok().as_deref().and_then(max_open_files)
    {
        gauge!(MAX_FDS).set(max as f64);
    }
}

/// The fields of `/proc/self/stat` used here.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
}

impl Stat {
    /// Parses `/proc/self/stat`: the command name (field 2) is in
    /// parentheses and may hold spaces, so fields are counted after its `)`.
    fn parse(text: &str) -> Option<Stat> {
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After ")": field 3 (state) is index 0, so field n is index n - 3.
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Stat { utime: field(14)?, stime: field(15)?, starttime: field(22)? })
    }
}

/// Boot time in Unix seconds, from `/proc/stat`.
fn btime(text: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// Resident set size in bytes, from `/proc/self/status` (`VmRSS: N kB`).
fn vm_rss(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// The soft limit of open files, from `/proc/self/limits`.
fn max_open_files(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let stat = "4242 (mcs registry) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 \
                    9 0 123456 1000000 2000 18446744073709551615";
        assert_eq!(Stat::parse(stat), Some(Stat { utime: 250, stime: 75, starttime: 123456 }));
        assert_eq!(Stat::parse("garbage"), None);
        assert_eq!(btime("cpu 1 2 3\nbtime 1700000000\nprocesses 9\n"), Some(1_700_000_000));
        assert_eq!(vm_rss("Name:\tx\nVmRSS:\t   2048 kB\n"), Some(2048 * 1024));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }
}
