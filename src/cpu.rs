//! CPU time of the calling thread, for the RDMA-versus-TCP comparison (clock_gettime).

use nix::time::{ClockId, clock_gettime};
use std::time::Duration;

/// CPU time this thread has used so far, from `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: the
/// kernel's own accounting in nanoseconds, not 100 Hz ticks.
pub fn thread_cpu_time() -> Option<Duration> {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(Duration::from)
}

/// Measure the CPU time `f` spends on this thread, in seconds.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Option<f64>) {
    let before = thread_cpu_time();
    let out = f();
    let spent = thread_cpu_time()
        .zip(before)
        .map(|(a, b)| a.saturating_sub(b).as_secs_f64());
    (out, spent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn busy_work_costs_cpu_and_sleep_does_not() {
        // Spin until the thread has really had 50 ms of CPU (a loaded machine may give it
        // less per wall second), bounded by 10 s of wall time.
        let ((), busy) = measure(|| {
            let (t, c0) = (Instant::now(), thread_cpu_time().unwrap());
            while thread_cpu_time().unwrap() - c0 < Duration::from_millis(50)
                && t.elapsed() < Duration::from_secs(10)
            {
                std::hint::spin_loop();
            }
        });
        let busy = busy.expect("thread CPU time is readable");
        assert!(busy >= 0.045, "busy loop used {busy} s");
        let ((), idle) = measure(|| std::thread::sleep(Duration::from_millis(60)));
        assert!(idle.unwrap() < 0.02, "sleeping used {idle:?} s of CPU");
    }

    #[test]
    fn the_clock_is_finer_than_a_scheduler_tick() {
        // Spin until the thread's CPU clock moves: with tick accounting (/proc's utime and
        // stime, 100 Hz) the first step is 10 ms; the kernel's own clock steps far less. The
        // smallest of several first steps is taken, in case the thread is preempted mid-spin.
        let smallest = (0..5)
            .map(|_| {
                let (t, c0) = (Instant::now(), thread_cpu_time().unwrap());
                loop {
                    let c = thread_cpu_time().unwrap();
                    if c != c0 || t.elapsed() > Duration::from_secs(2) {
                        return c.saturating_sub(c0);
                    }
                    std::hint::spin_loop();
                }
            })
            .min()
            .unwrap();
        assert!(
            smallest > Duration::ZERO && smallest < Duration::from_millis(1),
            "the thread CPU clock stepped by {smallest:?}"
        );
    }
}
