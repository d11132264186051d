//! Measured frame and step rates for the panel.

use super::*;

/// Frame and step rates measured over the last [`RateMeter::WINDOW_S`]
/// seconds of wall-clock time (at least the last two frames), so a slow
/// frame shows at once rather than being smoothed away.
#[derive(Debug, Default)]
pub(super) struct RateMeter {
    /// (when a frame started, steps taken by then).
    samples: VecDeque<(Instant, u64)>,
}

impl RateMeter {
    pub(super) const WINDOW_S: f64 = 2.0;

    pub(super) fn record(&mut self, at: Instant, steps: u64) {
        self.samples.push_back((at, steps));
        while self.samples.len() > 2
            && self
                .samples
                .front()
                .is_some_and(|(t, _)| at.duration_since(*t).as_secs_f64() > Self::WINDOW_S)
        {
            self.samples.pop_front();
        }
    }

    pub(super) fn span_s(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(a), Some(b)) => b.0.duration_since(a.0).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Frames per second and steps per second.
    pub(super) fn rates(&self) -> (f64, f64) {
        let span = self.span_s();
        match (self.samples.front(), self.samples.back()) {
            (Some(a), Some(b)) if span > 0.0 => (
                (self.samples.len() - 1) as f64 / span,
                b.1.saturating_sub(a.1) as f64 / span,
            ),
            _ => (0.0, 0.0),
        }
    }
}

/// A rate with the digits it deserves: `0.31`, `8.5`, `85`.
pub(super) fn rate_text(r: f64) -> String {
    if r < 1.0 {
        format!("{r:.2}")
    } else if r < 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.0}")
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rates_are_measured_over_wall_clock_time() {
        // 15 frames that took 48 s in all show as 0.3 fps, not as the
        // rate of the first fast frames.
        let start = Instant::now();
        let mut meter = RateMeter::default();
        let mut at = start;
        for k in 0..15u64 {
            meter.record(at, k * 10);
            at += if k < 3 {
                Duration::from_millis(10)
            } else {
                Duration::from_secs(4)
            };
        }
        let (fps, steps) = meter.rates();
        // Slow frames: the window keeps the last two (4 s apart).
        assert!((fps - 0.25).abs() < 1e-6, "{fps}");
        assert!((steps - 2.5).abs() < 1e-6, "{steps}");
        // Steady 60 fps over more than the window: about 60.
        let mut meter = RateMeter::default();
        for k in 0..300u64 {
            meter.record(start + Duration::from_micros(16_667 * k), k);
        }
        let (fps, steps) = meter.rates();
        assert!((fps - 60.0).abs() < 0.5, "{fps}");
        assert!((steps - 60.0).abs() < 0.5, "{steps}");
        assert!(meter.span_s() <= RateMeter::WINDOW_S + 0.02);
    }
}
