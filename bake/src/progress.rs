//! A progress spinner on stderr that appears only for work over a second,
//! only on a terminal, and never with `--quiet`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Reports stages of long work. Cheap to clone; hidden until a second has passed.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Every stage named, for tests ([`Progress::recording`]).
    log: Option<Arc<Mutex<Vec<String>>>>,
}

impl Progress {
    /// A spinner that shows itself after one second if stderr is a terminal.
    pub fn new(enabled: bool) -> Self {
        if !enabled {
            return Self::hidden();
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>3} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let delayed = bar.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            if !delayed.is_finished() {
                // `stderr()` draws nothing when stderr is not a terminal.
                delayed.set_draw_target(ProgressDrawTarget::stderr());
                delayed.enable_steady_tick(Duration::from_millis(100));
            }
        });
        Self {
            bar: Some(bar),
            log: None,
        }
    }

    /// No output at all.
    pub fn hidden() -> Self {
        Self {
            bar: None,
            log: None,
        }
    }

    /// No output; remembers every stage for [`Progress::stages`] (tests).
    pub fn recording() -> Self {
        Self {
            bar: None,
            log: Some(Arc::default()),
        }
    }

    /// The stages named so far, when [`Progress::recording`].
    pub fn stages(&self) -> Vec<String> {
        self.log
            .as_ref()
            .and_then(|l| l.lock().ok().map(|l| l.clone()))
            .unwrap_or_default()
    }

    /// Names the current stage.
    pub fn stage(&self, message: impl Into<String>) {
        let message = message.into();
        tracing::debug!("{message}");
        if let Some(log) = &self.log
            && let Ok(mut log) = log.lock()
        {
            log.push(message.clone());
        }
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// Removes the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
