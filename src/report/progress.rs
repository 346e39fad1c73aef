//! The live progress line of a bw/lat/write/read client: on a terminal only, never with --json
//! or on a pipe. It watches the counters the engines update and draws from its own thread.

use crate::perf::{Observer, Progress};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

/// A live line on stderr for duration runs and sweeps; drawing stops when it is dropped.
pub struct ProgressLine {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressLine {
    /// Start drawing `watched` when stderr is a terminal, output is not JSON, and the run is
    /// long enough to need it (several rounds, or a duration).
    pub fn start(
        json: bool,
        watched: Arc<Watched>,
        rounds: usize,
        duration: Option<Duration>,
    ) -> Option<ProgressLine> {
        if json || !std::io::stderr().is_terminal() || (rounds < 2 && duration.is_none()) {
            return None;
        }
        let bar = match duration {
            Some(d) => ProgressBar::new((d.as_millis() as u64 * rounds as u64).max(1)),
            None => ProgressBar::new(rounds as u64),
        };
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let (mut last_bytes, mut last_t) = (0u64, Instant::now());
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let bytes = watched.progress.bytes.load(Ordering::Relaxed);
                let now = Instant::now();
                let dt = now.duration_since(last_t).as_secs_f64().max(1e-3);
                let rate = bytes.saturating_sub(last_bytes) as f64 * 8.0 / dt / 1e9;
                (last_bytes, last_t) = (bytes, now);
                let size = watched.size.load(Ordering::Relaxed);
                bar.set_message(format!("{size} B, {rate:.2} Gb/s"));
                match duration {
                    Some(_) => bar.set_position(start.elapsed().as_millis() as u64),
                    // Rounds finished: the one under way has started but not ended.
                    None => {
                        let done = watched.started.load(Ordering::Relaxed).saturating_sub(1);
                        bar.set_position(done.min(rounds) as u64)
                    }
                }
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
