#!/usr/bin/env bash
# pingpong.sh: benchmark `rdmadiag pingpong` against rdma-core's ibv_rc_pingpong on rxe0 in one lab guest.
#
# usage: bench/pingpong.sh        (BENCH_N=5 rounds, BENCH_ITERS=1000 round trips, BENCH_SIZE=4096)
#
# Builds the release binary here, then in ONE Soft-RoCE lab guest alternates, BENCH_N times, a
# server+client pair of ibv_rc_pingpong (-g 1) and of rdmadiag pingpong with the same size and
# iteration count, and compares time per round trip: ibv_rc_pingpong's "usec/iter" against
# rdmadiag's elapsed_s / iterations (the same definition). Prints the ratio rdmadiag / ibv
# (goal: <= 1.0). Under TCG only ratios measured in the same guest mean anything.
# A benchmark, not a test: it fails only when a run fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

n=${BENCH_N:-5} iters=${BENCH_ITERS:-1000} size=${BENCH_SIZE:-4096}
for v in "$n" "$iters" "$size"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_N, BENCH_ITERS and BENCH_SIZE must be positive whole numbers"
done

bench_prepare

cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/pingpong.sh: alternate ibv_rc_pingpong and rdmadiag pingpong pairs.
n=$1 iters=$2 size=$3 bin=$4 work=$5
port=18800
wait_port() { for _ in $(seq 200); do ss -ltn "sport = :$1" | grep -q LISTEN && return 0; sleep 0.05; done; return 1; }
for ((i = 0; i < n; i++)); do
    port=$((port + 1))
    ibv_rc_pingpong -g 1 -s "$size" -n "$iters" -p $port >/dev/null 2>&1 &
    wait_port $port || { echo "bench: ibv_rc_pingpong server did not start"; exit 1; }
    out=$(timeout 120 ibv_rc_pingpong -g 1 -s "$size" -n "$iters" -p $port 10.77.0.1) || { echo "bench: ibv_rc_pingpong failed: $out"; exit 1; }
    wait
    echo "sample ibv $(sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p' <<<"$out")"
    port=$((port + 1))
    "$bin" pingpong -s "$size" -n "$iters" -p $port >/dev/null 2>&1 &
    wait_port $port || { echo "bench: rdmadiag server did not start"; exit 1; }
    timeout 120 "$bin" pingpong 10.77.0.1 -s "$size" -n "$iters" -p $port --json >"$work/r.json" || { echo "bench: rdmadiag pingpong failed"; exit 1; }
    wait
    echo "sample rdmadiag $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["elapsed_s"]/r["iterations"]*1e6)' "$work/r.json")"
done
GUEST

note "alternating $n rounds of ibv_rc_pingpong and rdmadiag pingpong ($iters x $size B) in the lab"
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" -- "$(printf '%q ' bash "$work/guest.sh" "$n" "$iters" "$size" "$bin" "$work")" \
    >"$work/lab.out" 2>&1 || lab_rc=$?
grep -v '^sample ' "$work/lab.out" >&2 || true
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"

python3 - "$work/lab.out" "$n" "$iters" "$size" <<'PY'
import statistics, sys
samples = {"ibv": [], "rdmadiag": []}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3 and p[0] == "sample":
        samples[p[1]].append(float(p[2]))
n, iters, size = sys.argv[2:5]
print(f"\n{n} alternating rounds of {iters} round trips of {size} B on rxe0 (TCG: compare ratios, not times)\n")
print(f"{'tool':<24}{'rounds':>7}{'mean us/iter':>14}{'median':>10}{'min':>10}")
for k, label in (("ibv", "ibv_rc_pingpong"), ("rdmadiag", "rdmadiag pingpong")):
    v = samples[k]
    if not v:
        sys.exit(f"no samples for {label}")
    print(f"{label:<24}{len(v):>7}{statistics.mean(v):>14.1f}{statistics.median(v):>10.1f}{min(v):>10.1f}")
r = statistics.mean(samples["rdmadiag"]) / statistics.mean(samples["ibv"])
rm = statistics.median(samples["rdmadiag"]) / statistics.median(samples["ibv"])
print(f"\nrdmadiag / ibv_rc_pingpong time per round trip: {r:.2f} (median {rm:.2f})  "
      + ("goal <= 1.0: met" if r <= 1.0 else "goal <= 1.0: NOT met"))
PY
