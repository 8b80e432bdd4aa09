//! Resident-memory readings from /proc, used to prove memory budgets.

fn status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Peak resident set size of this process in bytes (VmHWM).
pub fn peak_rss_bytes() -> u64 {
    status_kib("VmHWM:").unwrap_or(0) * 1024
}

/// Current resident set size in bytes (VmRSS).
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:").unwrap_or(0) * 1024
}
