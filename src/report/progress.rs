//! The live progress line of a client: on a terminal only, never with --json or on a pipe. It
//! watches the counters the engines update and draws from its own thread.

use crate::perf::{Observer, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A run shorter than this never shows a line (no flash for a quick test).
const SHOW_AFTER: Duration = Duration::from_secs(1);
/// The rates on the line are over this much of the run (the counters move in bursts).
const RATE_WINDOW: Duration = Duration::from_secs(2);

/// What the line watches: the engines' counters and the round under way.
#[derive(Default)]
pub struct Watched {
    progress: Progress,
    size: AtomicU32,
    started: AtomicUsize,
}

impl Observer for Watched {
    fn progress(&self) -> Option<&Progress> {
        Some(&self.progress)
    }
    fn round_started(&self, size: u32) {
        self.size.store(size, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::Relaxed);
    }
}

/// How much a run has to do, which decides what the line counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Sizes, one round each (bw/lat sweeps and --sizes).
    Rounds(usize),
    /// Rounds that each run for a time (-D).
    Timed { per_round: Duration, rounds: usize },
    /// Messages or round trips (pingpong -n).
    Messages(u64),
}

impl Span {
    /// Whether a run this long gets a line at all.
    fn worth_a_line(self) -> bool {
        match self {
            Span::Rounds(n) => n >= 2,
            Span::Timed { .. } => true,
            // Around a second on real hardware; the line still waits for SHOW_AFTER.
            Span::Messages(n) => n >= 10_000,
        }
    }
}

/// Seconds with one decimal below a minute, else minutes and seconds: "4.2 s", "2 m 05 s".
fn clock(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{} m {:02} s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// The line's words for one moment of the run: `elapsed` is the test's time (for -D, from its
/// first round), `done` the rounds or messages finished.
fn message(span: Span, elapsed: Duration, done: u64, size: u32, gbps: f64, per_sec: f64) -> String {
    match span {
        Span::Timed { .. } | Span::Rounds(_) if size == 0 => "setting up".to_string(),
        Span::Timed { per_round, rounds } => format!(
            "{} / {}  {size} B  {gbps:.2} Gb/s",
            clock(elapsed),
            clock(per_round * rounds as u32)
        ),
        Span::Rounds(n) => format!("size {}/{n}  {size} B  {gbps:.2} Gb/s", done.min(n as u64)),
        Span::Messages(n) => format!(
            "{done}/{n} round trips  {}  {per_sec:.0} round trips/s",
            clock(elapsed)
        ),
    }
}

/// A live line on stderr; drawing stops when it is dropped.
pub struct ProgressLine {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressLine {
    /// Start drawing `watched` when stderr is a terminal, output is not JSON, and the run is long
    /// enough to need it; the line appears once the run has lasted a second.
    pub fn start(json: bool, watched: Arc<Watched>, span: Span) -> Option<ProgressLine> {
        if json || !std::io::stderr().is_terminal() || !span.worth_a_line() {
            return None;
        }
        let len = match span {
            Span::Timed { per_round, rounds } => (per_round * rounds as u32).as_millis() as u64,
            Span::Rounds(n) => n as u64,
            Span::Messages(n) => n,
        };
        let bar = ProgressBar::with_draw_target(Some(len.max(1)), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{bar:30}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            // (when, bytes, messages) over the last RATE_WINDOW.
            let mut window: VecDeque<(Instant, u64, u64)> = VecDeque::new();
            let mut shown = false;
            // When the round under way started, as seen from here (to within a tick).
            let (mut round, mut round_at) = (0usize, Instant::now());
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if !shown && start.elapsed() >= SHOW_AFTER {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    shown = true;
                }
                let p = &watched.progress;
                let (bytes, msgs) = (
                    p.bytes.load(Ordering::Relaxed),
                    p.messages.load(Ordering::Relaxed),
                );
                let now = Instant::now();
                // A new round starts its counters from zero: so does the window.
                if window
                    .back()
                    .is_some_and(|&(_, b, m)| bytes < b || msgs < m)
                {
                    window.clear();
                }
                window.push_back((now, bytes, msgs));
                while window.len() > 2
                    && window
                        .front()
                        .is_some_and(|&(t, _, _)| now - t > RATE_WINDOW)
                {
                    window.pop_front();
                }
                let (t0, b0, m0) = window[0];
                let dt = now.duration_since(t0).as_secs_f64().max(1e-3);
                let gbps = (bytes - b0) as f64 * 8.0 / dt / 1e9;
                let per_sec = (msgs - m0) as f64 / dt;
                let size = watched.size.load(Ordering::Relaxed);
                let started = watched.started.load(Ordering::Relaxed);
                if started != round {
                    (round, round_at) = (started, now);
                }
                // Rounds finished: the one under way has started but not ended.
                let rounds_done = started.saturating_sub(1) as u64;
                let elapsed = match span {
                    // The test's time: the rounds done, and this one's so far (a round may take
                    // a moment past its time to finish: the clock does not run on).
                    Span::Timed { per_round, .. } if started > 0 => {
                        per_round * rounds_done as u32 + now.duration_since(round_at).min(per_round)
                    }
                    Span::Timed { .. } => Duration::ZERO,
                    _ => start.elapsed(),
                };
                let (position, done) = match span {
                    Span::Timed { .. } => (elapsed.as_millis() as u64, rounds_done),
                    Span::Rounds(_) => (rounds_done, rounds_done),
                    Span::Messages(_) => (msgs, msgs),
                };
                bar.set_message(message(span, elapsed, done, size, gbps, per_sec));
                bar.set_position(position.min(len));
            }
            bar.finish_and_clear();
        });
        Some(ProgressLine {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_run_shows_elapsed_and_total_time_not_milliseconds() {
        let span = Span::Timed {
            per_round: Duration::from_secs(10),
            rounds: 1,
        };
        assert_eq!(message(span, Duration::ZERO, 0, 0, 0.0, 0.0), "setting up");
        let m = message(span, Duration::from_millis(4200), 0, 65536, 12.345, 0.0);
        assert_eq!(m, "4.2 s / 10.0 s  65536 B  12.35 Gb/s");
        let two = Span::Timed {
            per_round: Duration::from_secs(60),
            rounds: 2,
        };
        let m = message(two, Duration::from_secs(65), 1, 4096, 1.0, 0.0);
        assert!(m.starts_with("1 m 05 s / 2 m 00 s"), "{m}");
        let m = message(
            Span::Messages(100_000),
            Duration::from_secs(2),
            41_200,
            4096,
            0.0,
            20_600.0,
        );
        assert_eq!(m, "41200/100000 round trips  2.0 s  20600 round trips/s");
        assert!(!Span::Messages(1000).worth_a_line() && Span::Messages(100_000).worth_a_line());
        assert!(!Span::Rounds(1).worth_a_line() && Span::Rounds(23).worth_a_line());
    }
}
