//! CPU time of the calling thread, for the RDMA-versus-TCP comparison (read from /proc).

use std::time::Duration;

/// CPU time this thread has used so far: nanoseconds from /proc/thread-self/schedstat, or
/// clock ticks from /proc/thread-self/stat where schedstat is missing.
pub fn thread_cpu_time() -> Option<Duration> {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
    if let Some(ns) = ns {
        return Some(Duration::from_nanos(ns));
    }
    let s = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may contain spaces, so split after the last ')').
    let rest = s.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5): indexes 11 and 12 here.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
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

    #[test]
    fn busy_work_costs_cpu_and_sleep_does_not() {
        // Spin until the thread has really had 50 ms of CPU (a loaded machine may give it
        // less per wall second), bounded by 10 s of wall time.
        let ((), busy) = measure(|| {
            let (t, c0) = (std::time::Instant::now(), thread_cpu_time().unwrap());
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
}
