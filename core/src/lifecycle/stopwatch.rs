//! Where an operation's time went: wall time per phase, logged as one debug line per operation
//! (`attach pod-1: 1.21ms = lookup 21.3µs, plan 18.0µs, ...`), which the benches read back.

use std::fmt;
use std::time::{Duration, Instant};

/// The phases of one operation, each ended by [`Stopwatch::end`].
#[derive(Debug)]
pub(crate) struct Stopwatch {
    started: Instant,
    last: Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Stopwatch {
    pub(crate) fn start() -> Self {
        let now = Instant::now();
        Stopwatch {
            started: now,
            last: now,
            done: Vec::with_capacity(8),
        }
    }

    /// Ends phase `name` now: it took the time since the previous phase ended.
    pub(crate) fn end(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done.push((name, now - self.last));
        self.last = now;
    }

    /// Moves `took` out of the phase that ends next into its own phase `name`: for a wait
    /// measured inside another phase.
    pub(crate) fn split(&mut self, name: &'static str, took: Duration) {
        self.done.push((name, took));
        self.last += took;
    }
}

impl fmt::Display for Stopwatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2?} =", self.last - self.started)?;
        for (k, (name, took)) in self.done.iter().enumerate() {
            let sep = if k == 0 { "" } else { "," };
            // In µs with a decimal: `Duration`'s own `{:.0?}` prints 1.4 ms as `1ms`, and the
            // bench reads these back.
            write!(f, "{sep} {name} {:.1}µs", took.as_secs_f64() * 1e6)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
