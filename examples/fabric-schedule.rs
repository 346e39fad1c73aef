//! Time the all-pairs schedule for a large fabric (default 4096 hosts): build every round and
//! check each pair once, no host twice a round. `cargo run --release --example fabric-schedule [N]`.

use rdmadiag::fabric::schedule::{Pattern, Schedule};
use std::time::Instant;

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N is a number of hosts"))
        .unwrap_or(4096);
    let start = Instant::now();
    let s = Schedule::new(Pattern::AllPairs, n, 0);
    let mut pairs = 0usize;
    for r in 0..s.rounds() {
        pairs += s.round(r).len();
    }
    let built = start.elapsed();
    let n = n as usize;
    let mut seen = vec![false; n * n];
    for r in 0..s.rounds() {
        let mut busy = vec![false; n];
        for (a, b) in s.round(r) {
            let (a, b) = (a as usize, b as usize);
            assert!(
                !busy[a] && !busy[b] && !seen[a * n + b],
                "round {r}: ({a}, {b})"
            );
            busy[a] = true;
            busy[b] = true;
            seen[a * n + b] = true;
        }
    }
    assert_eq!(pairs, n * (n - 1) / 2);
    println!(
        "all-pairs schedule for {n} hosts: {pairs} pairs in {} rounds, built in {:.1} ms (checked in {:.1} ms more)",
        s.rounds(),
        built.as_secs_f64() * 1e3,
        (start.elapsed() - built).as_secs_f64() * 1e3
    );
}
