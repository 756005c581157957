//! The progress bar of long produce / consume / perf runs: an `indicatif` bar on stderr, drawn
//! only when stdout and stderr are both terminals.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Progress of a long produce / consume / perf run.
pub struct Progress {
    bar: ProgressBar,
    /// Bytes counted so far, read by the bar's `{mbps}` field.
    bytes: Arc<AtomicU64>,
}

impl Progress {
    /// A bar for `total` items (or a counter when the total is unknown).
    pub fn new(label: &'static str, total: Option<u64>) -> Self {
        let shown = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        Self::with_target(label, total, shown)
    }

    fn with_target(label: &'static str, total: Option<u64>, shown: bool) -> Self {
        let target = if shown {
            // indicatif also stays silent by itself when stderr is not a terminal.
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bytes = Arc::new(AtomicU64::new(0));
        let template = match total {
            Some(t) if t > 0 => "{prefix} [{bar:30}] {percent:>3}% {pos}/{len} {per_sec} {mbps}",
            _ => "{prefix} {pos} {per_sec} {mbps}",
        };
        let counted = Arc::clone(&bytes);
        let style = ProgressStyle::with_template(template)
            .expect("a valid progress template")
            .progress_chars("#>.")
            .with_key(
                "mbps",
                move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let secs = state.elapsed().as_secs_f64().max(1e-9);
                    let mb = counted.load(Ordering::Relaxed) as f64 / 1e6;
                    let _ = write!(w, "{:.1} MB/s", mb / secs);
                },
            );
        let bar = ProgressBar::with_draw_target(total.filter(|&t| t > 0), target)
            .with_style(style)
            .with_prefix(label);
        Progress { bar, bytes }
    }

    /// Never draws (e.g. while records are printed to the same terminal).
    pub fn hidden(self, hide: bool) -> Self {
        if hide {
            self.bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        self
    }

    /// Counts `n` more items of `bytes` bytes in all.
    pub fn add(&mut self, n: u64, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.bar.inc(n);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Progress;

    #[test]
    fn counts_items_and_bytes_while_hidden() {
        let mut p = Progress::with_target("test", Some(10), false);
        p.add(3, 300);
        p.add(2, 200);
        assert_eq!(p.bar.position(), 5);
        assert_eq!(p.bar.length(), Some(10));
        assert_eq!(p.bytes.load(std::sync::atomic::Ordering::Relaxed), 500);
        assert!(p.bar.is_hidden());
        p.finish();
    }

    #[test]
    fn an_unknown_total_is_a_counter() {
        let p = Progress::with_target("test", None, false).hidden(true);
        assert_eq!(p.bar.length(), None);
        assert!(p.bar.is_hidden());
    }
}
