//! Keeping a process's resident memory near what it uses, not what its biggest pass once used.
//!
//! glibc keeps freed memory in its arenas and gives a thread that allocates while another holds
//! an arena an arena of its own (up to 8 per core). knid's rare big passes (start-up recovery,
//! the orphan sweeps, a GC round over thousands of sandboxes) would otherwise leave the RSS at
//! their peak for good. And each thread keeps freed small blocks in a cache of its own (glibc's
//! tcache), out of the arena's reach. Elsewhere than glibc these calls do nothing.

/// How many malloc arenas knid's threads share: one. Its busy threads are few (shard workers,
/// the reaper, a connection or two) and each keeps a cache of small blocks of its own (glibc's
/// tcache), while every extra arena holds on to its own free memory: with 5,000 sandboxes, a
/// second arena left knid 0.65 MiB more resident once settled (docs/performance-history.md).
const ARENA_MAX: libc::c_int = 1;

/// Allocations from this size up get pages of their own, returned to the kernel when freed.
/// glibc's default starts here too but rises (to 32 MiB) each time such a block is freed, after
/// which the big transient buffers of a pass over 5,000 pods (record reads, link dumps) land in
/// an arena and leave it fragmented.
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

/// glibc's tunable for the biggest block a thread keeps for itself when freed (its tcache:
/// up to 7 of each size, up to 1,032 bytes by default), and knid's value: 128 bytes. With many
/// operations at once (16 shards, their callers' threads), the bigger blocks each thread held
/// kept the arena from merging their neighbours, new blocks came from fresh heap instead, and
/// the long-lived ones ended up spread over it: 5,000 sandboxes filled at concurrency 8 by 16
/// shards left knid at 18.9 MiB settled with glibc's default, 13.8 MiB with this (14.4 with no
/// thread cache at all), its churn unchanged beyond the noise (docs/performance-history.md). The
/// small blocks that most allocations are still come from the thread's cache.
#[cfg(target_env = "gnu")]
const TCACHE_MAX: &str = "glibc.malloc.tcache_max";
#[cfg(target_env = "gnu")]
const TCACHE_MAX_VALUE: &str = "128";
/// Any tunable of the thread caches: an operator who set one chose them.
#[cfg(target_env = "gnu")]
const TCACHE_TUNABLES: &str = "glibc.malloc.tcache_";
/// glibc's tunable for the stacks of ended threads it keeps mapped for the next ones (40 MiB
/// by default), and knid's value: none. knid's API threads start for a burst of calls and end
/// once idle; the touched pages of their cached stacks stayed resident after every burst
/// (0.4 MiB after the abuse bench's,
/// docs/performance.md#what-knid-gives-back-after-the-burst). A thread knid starts maps a fresh
/// stack instead, a few microseconds.
#[cfg(target_env = "gnu")]
const STACK_CACHE: &str = "glibc.pthread.stack_cache_size";
#[cfg(target_env = "gnu")]
const STACK_CACHE_VALUE: &str = "0";
/// Set across [`tune_thread_caches`]'s exec, so that knid execs itself at most once, even when
/// glibc ignores `GLIBC_TUNABLES` (as it does for a set-user-ID program).
#[cfg(target_env = "gnu")]
const RETUNED_MARK: &str = "KNID_MALLOC_RETUNED";
#[cfg(target_env = "gnu")]
const GOING_ON: &str = "going on with glibc's per-thread caches";

/// Runs knid with [`TCACHE_MAX`] at [`TCACHE_MAX_VALUE`] and [`STACK_CACHE`] at
/// [`STACK_CACHE_VALUE`]. glibc reads its tunables from the environment when a program starts
/// and offers no call to change them later: so unless `GLIBC_TUNABLES` sets them already (an
/// operator's own choice wins: any thread-cache tunable, or the stack cache), this adds them
/// there and execs knid's own binary again, with the same pid, arguments and otherwise the same
/// environment (its children inherit the settings). Call first thing in `main`, before
/// any thread or file is opened. If the exec fails, knid goes on with glibc's default and says
/// so.
pub fn tune_thread_caches() {
    #[cfg(target_env = "gnu")]
    {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;

        if std::env::var_os(RETUNED_MARK).is_some() {
            std::env::remove_var(RETUNED_MARK);
            return;
        }
        let mut tunables = std::env::var_os("GLIBC_TUNABLES").unwrap_or_default();
        let chosen = |prefix: &str| {
            tunables
                .as_bytes()
                .split(|&b| b == b':')
                .any(|t| t.starts_with(prefix.as_bytes()))
        };
        let mut added = Vec::new();
        if !chosen(TCACHE_TUNABLES) {
            added.push(format!("{TCACHE_MAX}={TCACHE_MAX_VALUE}"));
        }
        if !chosen(STACK_CACHE) {
            added.push(format!("{STACK_CACHE}={STACK_CACHE_VALUE}"));
        }
        if added.is_empty() {
            return;
        }
        for tunable in added {
            if !tunables.is_empty() {
                tunables.push(":");
            }
            tunables.push(tunable);
        }
        // Its path, not /proc/self/exe: the kernel names a process after the file it execs.
        let exe = match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => {
                eprintln!("knid: cannot find its own binary ({e}); {GOING_ON}");
                return;
            }
        };
        let mut args = std::env::args_os();
        let arg0 = args.next().unwrap_or_default();
        let failed = std::process::Command::new(exe)
            .arg0(arg0)
            .args(args)
            .env("GLIBC_TUNABLES", tunables)
            .env(RETUNED_MARK, "1")
            .exec();
        eprintln!("knid: cannot exec itself with its glibc tunables ({failed}); {GOING_ON}");
    }
}

/// Caps glibc's malloc arenas at [`ARENA_MAX`] and fixes its mmap threshold at
/// [`MMAP_THRESHOLD`]. Call first thing in `main`, before any thread.
pub fn limit_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets glibc tunables; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Returns freed heap memory to the kernel, after a big pass.
pub fn give_back() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks glibc's own arenas, under their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
