//! knid's threads as the kernel names them (`/proc/<pid>/task/*/comm`), read from the kernel and
//! not from knid: what the tests and benches hold it to when it is idle.

use std::collections::BTreeMap;

/// Threads by name: how many of each.
pub type Threads = BTreeMap<String, usize>;

/// The threads sled 0.34 keeps for good: its I/O pool (7; more only while its queue is deep) and
/// its `log flusher`. knid cannot end them.
pub const SLEDS: usize = 8;

/// Whether `name` is one of sled's threads.
pub fn is_sleds(name: &str) -> bool {
    name.starts_with("sled-io-") || name == "log flusher"
}

/// The threads of process `pid`, by name.
pub fn of(pid: i32) -> Threads {
    let tasks = format!("/proc/{pid}/task");
    let mut threads = Threads::new();
    std::fs::read_dir(&tasks)
        .unwrap_or_else(|e| panic!("read {tasks}: {e}"))
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|comm| comm.trim_end().to_owned())
        .for_each(|name| *threads.entry(name).or_default() += 1);
    threads
}

/// `threads` without sled's: knid's own.
pub fn own(threads: &Threads) -> Threads {
    threads
        .iter()
        .filter(|(name, _)| !is_sleds(name))
        .map(|(name, count)| (name.clone(), *count))
        .collect()
}

/// How many of `threads` are sled's.
pub fn sleds(threads: &Threads) -> usize {
    threads
        .iter()
        .filter(|(name, _)| is_sleds(name))
        .map(|(_, count)| count)
        .sum()
}

/// Whether `threads` are an idle knid's: its main thread (`knid`, in the API server's epoll wait,
/// running the periodic jobs and the signals) and sled's [`SLEDS`], nothing else.
pub fn are_idle(threads: &Threads) -> bool {
    own(threads) == Threads::from([("knid".to_owned(), 1)]) && sleds(threads) == SLEDS
}

/// `threads` on one line, most numerous first: `sled-io-* ×7, knid, log flusher`. Numbered names
/// (`sled-io-3`) count under one pattern.
pub fn summary(threads: &Threads) -> String {
    let mut patterns = Threads::new();
    for (name, count) in threads {
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let key = if stem.len() < name.len() && stem.ends_with('-') {
            format!("{stem}*")
        } else {
            name.clone()
        };
        *patterns.entry(key).or_default() += count;
    }
    let mut named: Vec<(String, usize)> = patterns.into_iter().collect();
    named.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    named
        .into_iter()
        .map(|(name, n)| if n > 1 { format!("{name} ×{n}") } else { name })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
