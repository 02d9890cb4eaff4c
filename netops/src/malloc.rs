//! Keeping a process's resident memory near what it uses, not what its biggest pass once used.
//!
//! glibc keeps freed memory in its arenas and gives a thread that allocates while another holds
//! an arena an arena of its own (up to 8 per core). knid's rare big passes (start-up recovery,
//! the orphan sweeps, a GC round over thousands of sandboxes) would otherwise leave the RSS at
//! their peak for good. Elsewhere than glibc both calls do nothing.

/// How many malloc arenas knid's threads share: one. Its busy threads are few (shard workers,
/// the reaper, a connection or two) and each keeps a cache of small blocks of its own (glibc's
/// tcache), while every extra arena holds on to its own free memory: with 5,000 sandboxes, a
/// second arena left knid 0.65 MiB more resident once settled (docs/performance.md).
const ARENA_MAX: libc::c_int = 1;

/// Allocations from this size up get pages of their own, returned to the kernel when freed.
/// glibc's default starts here too but rises (to 32 MiB) each time such a block is freed, after
/// which the big transient buffers of a pass over 5,000 pods (record reads, link dumps) land in
/// an arena and leave it fragmented.
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

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
