//! CPU placement and accounting on a small machine: pin processes with
//! `taskset` (util-linux), and read a process's CPU time from `/proc`.
//!
//! On two cores a fair comparison keeps the server under test on one core
//! and the load generator (and this process) on the other, for both servers
//! alike.

use anyhow::{Context, bail};
use std::time::Duration;

/// Pins every thread of this process to `cpus` (a `taskset -c` list).
/// Threads created later inherit it from their creator.
pub fn pin_self(cpus: &str) -> anyhow::Result<()> {
    let pid = std::process::id().to_string();
    let status = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running taskset (util-linux)")?;
    if !status.success() {
        bail!("taskset -a -p -c {cpus} {pid} failed: {status}");
    }
    Ok(())
}

/// Lets this process run on every CPU again.
pub fn unpin_self() -> anyhow::Result<()> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    // available_parallelism follows the affinity mask; read the online set.
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| format!("0-{}", all.saturating_sub(1)));
    pin_self(&online)
}

/// User plus system CPU time `pid` has used so far.
pub fn process_cpu(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces: split after its ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3; utime and stime are fields 14, 15.
    let ticks = |i: usize| -> anyhow::Result<u64> {
        fields.get(i - 3).context("short /proc stat")?.parse().context("a tick count")
    };
    let total = ticks(14)? + ticks(15)?;
    Ok(Duration::from_secs_f64(total as f64 / clock_ticks_per_second()))
}

/// The kernel's USER_HZ, from `getconf CLK_TCK` (100 on Linux almost
/// everywhere).
fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}
