//! Progress of long scans and writes, on stderr, only when stderr is a
//! terminal: piped or redirected, nothing is drawn.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// A progress indicator that may be switched off; cheap to clone.
#[derive(Debug, Clone)]
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// Nothing drawn.
    pub fn hidden() -> Self {
        Self(None)
    }

    /// A spinner labelled `message`, for one long call.
    pub fn spinner(message: &str) -> Self {
        Self::on_terminal(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(message.to_owned());
            bar
        })
    }

    /// A spinner counting items, labelled `message`, with the rate in whole
    /// items a second (indicatif's default shows four decimals).
    pub fn counter(message: &str) -> Self {
        Self::on_terminal(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}: {human_pos} items ({per_sec:0})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(message.to_owned());
            bar
        })
    }

    /// A bar towards `total` items, labelled `message`.
    pub fn bar(message: &str, total: u64) -> Self {
        Self::on_terminal(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {human_pos}/{human_len} ({eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_message(message.to_owned());
            bar
        })
    }

    fn on_terminal(make: impl FnOnce() -> ProgressBar) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self::hidden();
        }
        let bar = make();
        bar.enable_steady_tick(Duration::from_millis(120));
        Self(Some(bar))
    }

    /// Counts `n` more items.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    /// Removes the indicator from the terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
