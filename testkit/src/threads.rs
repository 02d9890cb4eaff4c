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

/// Cluster mode's threads at idle, as the kernel names them (cut to 15 bytes:
/// `knid-kube-netpol` reads `knid-kube-netpo`): the Node watch, the NetworkPolicy watch and the
/// cluster thread (the controller, the Node publisher and the policy engine).
pub const CLUSTER_IDLE: [&str; 3] = ["knid-kube-watch", "knid-kube-netpo", "knid-cluster"];

/// knid's own threads at idle: its main thread (`knid`, in the API server's epoll wait, running
/// the periodic jobs and the signals) and one of each of `more` (a mode's threads, such as
/// [`CLUSTER_IDLE`]).
pub fn idle_own(more: &[&str]) -> Threads {
    std::iter::once("knid")
        .chain(more.iter().copied())
        .map(|name| (name.to_owned(), 1))
        .collect()
}

/// Whether `threads` are an idle knid's: [`idle_own`] with `more`, and sled's [`SLEDS`],
/// nothing else.
pub fn are_idle_with(threads: &Threads, more: &[&str]) -> bool {
    own(threads) == idle_own(more) && sleds(threads) == SLEDS
}

/// Whether `threads` are an idle knid's, outside cluster mode ([`are_idle_with`] nothing more).
pub fn are_idle(threads: &Threads) -> bool {
    are_idle_with(threads, &[])
}

/// How long knid's threads that run only while there is work may take to end: the warm API
/// handler's 30 s without a call, the reaper's 30 s after its last round (which may come seconds
/// after the last call, draining thousands of detaches), and a margin.
pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits until process `pid`'s threads are an idle knid's with `more` ([`are_idle_with`]), or
/// [`SETTLE_LIMIT`] has passed; how long it waited, and whether they settled.
pub fn settle(pid: i32, more: &[&str]) -> (std::time::Duration, bool) {
    let started = std::time::Instant::now();
    loop {
        if are_idle_with(&of(pid), more) {
            return (started.elapsed(), true);
        }
        if started.elapsed() >= SETTLE_LIMIT {
            return (started.elapsed(), false);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The name one of a numbered family of threads goes by: a number after a dash at the end of
/// `name` becomes `*` (`sled-io-3` → `sled-io-*`); any other name is itself.
pub fn pattern(name: &str) -> String {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() < name.len() && stem.ends_with('-') {
        format!("{stem}*")
    } else {
        name.to_owned()
    }
}

/// `threads` on one line, most numerous first: `sled-io-* ×7, knid, log flusher`. Numbered names
/// (`sled-io-3`) count under one pattern.
pub fn summary(threads: &Threads) -> String {
    let mut patterns = Threads::new();
    for (name, count) in threads {
        *patterns.entry(pattern(name)).or_default() += count;
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
