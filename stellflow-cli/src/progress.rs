//! A small progress bar on stderr, shown only when stdout and stderr are terminals.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Progress of a long produce / consume / perf run.
pub struct Progress {
    label: &'static str,
    total: Option<u64>,
    done: u64,
    bytes: u64,
    start: Instant,
    last: Instant,
    enabled: bool,
}

impl Progress {
    /// A bar for `total` items (or a counter when the total is unknown).
    pub fn new(label: &'static str, total: Option<u64>) -> Self {
        let now = Instant::now();
        Progress {
            label,
            total,
            done: 0,
            bytes: 0,
            start: now,
            last: now,
            enabled: std::io::stdout().is_terminal() && std::io::stderr().is_terminal(),
        }
    }

    /// Never draws (e.g. while records are printed to the same terminal).
    pub fn hidden(mut self, hide: bool) -> Self {
        self.enabled &= !hide;
        self
    }

    /// Counts `n` more items of `bytes` bytes in all.
    pub fn add(&mut self, n: u64, bytes: u64) {
        self.done += n;
        self.bytes += bytes;
        if self.enabled && self.last.elapsed() >= Duration::from_millis(100) {
            self.last = Instant::now();
            self.draw();
        }
    }

    fn draw(&self) {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = format!(
            "{:.0} rec/s {:.1} MB/s",
            self.done as f64 / secs,
            self.bytes as f64 / secs / 1e6
        );
        let line = match self.total {
            Some(t) if t > 0 => {
                let frac = (self.done as f64 / t as f64).min(1.0);
                let filled = (frac * 30.0) as usize;
                format!(
                    "{} [{}{}] {:>3.0}% {}/{} {rate}",
                    self.label,
                    "#".repeat(filled),
                    ".".repeat(30 - filled),
                    frac * 100.0,
                    self.done,
                    t
                )
            }
            _ => format!("{} {} {rate}", self.label, self.done),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if self.enabled {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
