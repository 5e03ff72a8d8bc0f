//! Process figures from /proc: resident set (now, peak, per mapping) and CPU time, read by each scenario
//! process about itself so the API server's own memory and CPU are never counted.

/// A value in kB from /proc/self/status (`VmRSS`, `VmHWM`), as bytes; 0 if unreadable.
fn status_kb(field: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resident set size now.
pub fn rss() -> u64 {
    status_kb("VmRSS")
}

/// Peak resident set size of the process so far (the kernel's high-water mark).
pub fn rss_peak() -> u64 {
    status_kb("VmHWM")
}

/// User + system CPU seconds of the whole process so far (fields 14 and 15 of /proc/self/stat,
/// in USER_HZ = 100 ticks per second, fixed by the Linux ABI).
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The command name (field 2) may contain spaces; fields after its closing parenthesis are fixed.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Resident kB per mapping of this process (the file's name, `[heap]`, `[anon]`...), largest
/// first, and the thread count: where the RSS beyond the heap lives.
pub fn resident_by_mapping() -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut by_name: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut name = "[anon]";
    for line in smaps.lines() {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["Rss:", kb, ..] => *by_name.entry(name).or_default() += kb.parse::<u64>().unwrap_or(0),
            // A mapping's header: `start-end perms offset dev inode [path]`.
            [range, _, _, _, _, path @ ..] if !range.ends_with(':') => {
                name = path
                    .first()
                    .map_or("[anon]", |p| p.rsplit('/').next().unwrap_or(p));
            }
            _ => {}
        }
    }
    let mut resident: Vec<(&str, u64)> = by_name.into_iter().filter(|(_, kb)| *kb > 0).collect();
    resident.sort_by_key(|&(_, kb)| std::cmp::Reverse(kb));
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count);
    format!("threads {threads}, resident kB {resident:?}")
}
