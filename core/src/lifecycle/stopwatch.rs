//! Where an operation's time went: wall time per phase, logged as one debug line per operation
//! (`attach pod-1: 1.21ms = lookup 21µs, plan 18µs, ...`), which the benches read back.

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
            write!(f, "{sep} {name} {took:.0?}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_to_the_total_and_print_in_order() {
        let mut p = Stopwatch::start();
        std::thread::sleep(Duration::from_millis(2));
        p.end("first");
        p.split("waited", Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(2));
        p.end("second");
        let sum: Duration = p.done.iter().map(|(_, d)| *d).sum();
        assert_eq!(sum, p.last - p.started);
        assert_eq!(p.done[1], ("waited", Duration::from_millis(1)));
        assert!(p.done[2].1 >= Duration::from_millis(1), "{p}");
        let text = p.to_string();
        let names: Vec<&str> = text
            .split(['=', ','])
            .skip(1)
            .map(|part| part.split_whitespace().next().unwrap_or_default())
            .collect();
        assert_eq!(names, ["first", "waited", "second"], "{text}");
    }
}
