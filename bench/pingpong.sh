#!/usr/bin/env bash
# pingpong.sh: benchmark `rdmadiag pingpong` against rdma-core's ibv_rc_pingpong on rxe0 in one lab guest.
#
# usage: bench/pingpong.sh        (BENCH_N=10 rounds, BENCH_ITERS=1000 round trips, BENCH_SIZE=4096,
#                                  BENCH_CLOCK=tsc: rdmadiag's sample clock, RDMADIAG_CLOCK=tsc, one
#                                  TSC read per round trip where the guest's kernel does not list the
#                                  TSC as invariant; monotonic, or default for rdmadiag's own choice;
#                                  BENCH_PIN="0 1": every server on vCPU 0, every client on vCPU 1,
#                                  all tools alike (taskset); "none" leaves it to the scheduler)
#
# Builds the release binary here, then in ONE Soft-RoCE lab guest alternates, BENCH_N times, a
# server+client pair of ibv_rc_pingpong (-g 1) and of rdmadiag pingpong with the same size and
# iteration count, and compares time per round trip: ibv_rc_pingpong's "usec/iter" against
# rdmadiag's usec_per_iter (the same definition: elapsed over round trips). The settings are
# matched, and are both tools' defaults: RC, rx depth 500, path MTU 1024, every send signalled
# and waited for every round trip. Prints each side's min/mean/median/max, the ratios of
# medians and of means (goal: <= 1.0), rdmadiag's p99.9/median per round (goal: <= 5 in at least 8 of 10 rounds), and rxe0's
# retransmit counter (hw_counters/completer_retry_err) across each run, so rounds with
# retransmits can be told from clean ones. Each round also runs perftest's ib_send_lat at the same
# size (a SEND/RECV ping-pong timed per iteration) and prints its 99.9%/typical: the tail the
# guest itself makes, as a yardstick for rdmadiag's. Under TCG only ratios measured in the same
# guest mean anything.
# A benchmark, not a test: it fails only when a run fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

n=${BENCH_N:-10} iters=${BENCH_ITERS:-1000} size=${BENCH_SIZE:-4096} clock=${BENCH_CLOCK:-tsc}
bench_pin
[[ $clock == tsc || $clock == monotonic || $clock == default ]] ||
    die "BENCH_CLOCK is tsc (the default), monotonic or default"
[[ $clock == default ]] && clock=
for v in "$n" "$iters" "$size"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_N, BENCH_ITERS and BENCH_SIZE must be positive whole numbers"
done

bench_prepare

cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/pingpong.sh: alternate ibv_rc_pingpong and rdmadiag pingpong pairs.
n=$1 iters=$2 size=$3 bin=$4 work=$5 clock=$6 pin=$7
# Servers on one vCPU and clients on the other, every tool alike: two spinning processes on one
# vCPU hand over only at the scheduler's tick (a round trip of milliseconds), whichever tool.
spin=() cpin=()
[[ $pin == none ]] || { spin=(taskset -c "${pin% *}"); cpin=(taskset -c "${pin#* }"); }
port=18800
wait_port() { for _ in $(seq 200); do ss -ltn "sport = :$1" | grep -q LISTEN && return 0; sleep 0.05; done; return 1; }
retries() { cat /sys/class/infiniband/rxe0/ports/1/hw_counters/completer_retry_err 2>/dev/null || echo 0; }
for ((i = 0; i < n; i++)); do
    port=$((port + 1))
    r0=$(retries)
    "${spin[@]}" ibv_rc_pingpong -g 1 -s "$size" -n "$iters" -p $port >/dev/null 2>&1 &
    wait_port $port || { echo "bench: ibv_rc_pingpong server did not start"; exit 1; }
    out=$(timeout 120 "${cpin[@]}" ibv_rc_pingpong -g 1 -s "$size" -n "$iters" -p $port 10.77.0.1) || { echo "bench: ibv_rc_pingpong failed: $out"; exit 1; }
    wait
    echo "sample ibv $(sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p' <<<"$out") 0 $(($(retries) - r0))"
    port=$((port + 1))
    r0=$(retries)
    RDMADIAG_CLOCK=$clock "${spin[@]}" "$bin" pingpong -s "$size" -n "$iters" -p $port >/dev/null 2>&1 &
    wait_port $port || { echo "bench: rdmadiag server did not start"; exit 1; }
    RDMADIAG_CLOCK=$clock timeout 120 "${cpin[@]}" "$bin" pingpong 10.77.0.1 -s "$size" -n "$iters" -p $port --json >"$work/r.json" || { echo "bench: rdmadiag pingpong failed"; exit 1; }
    wait
    echo "sample rdmadiag $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["usec_per_iter"], r["p999_us"] / r["median_us"])' "$work/r.json") $(($(retries) - r0))"
    # The environment's own tail: perftest's send latency test (a SEND/RECV ping-pong timed per
    # iteration with the TSC) at the same size, in the same guest: its 99.9% over its typical.
    port=$((port + 1))
    r0=$(retries)
    timeout 120 "${spin[@]}" ib_send_lat -F -x 1 -s "$size" -n "$iters" -p $port >/dev/null 2>&1 &
    wait_port $port || { echo "bench: ib_send_lat server did not start"; exit 1; }
    out=$(timeout 120 "${cpin[@]}" ib_send_lat -F -x 1 -s "$size" -n "$iters" -p $port 10.77.0.1) || { echo "bench: ib_send_lat failed: $out"; exit 1; }
    wait
    echo "sample perftest $(awk -v s="$size" '$1 == s && NF >= 9 {print $5, $9 / $5}' <<<"$out") $(($(retries) - r0))"
done
GUEST

note "alternating $n rounds of ibv_rc_pingpong and rdmadiag pingpong ($iters x $size B; vCPUs of server and client: $pin) in the lab"
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" -- "$(printf '%q ' bash "$work/guest.sh" "$n" "$iters" "$size" "$bin" "$work" "$clock" "$pin")" \
    >"$work/lab.out" 2>&1 || lab_rc=$?
grep -v '^sample ' "$work/lab.out" >&2 || true
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"

PYTHONPATH="$RDMADIAG_ROOT/bench/lib" python3 - "$work/lab.out" "$n" "$iters" "$size" "$clock" "$pin" <<'PY'
import statistics, sys
from states import state_split, state_line
samples = {"ibv": [], "rdmadiag": [], "perftest": []}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 5 and p[0] == "sample":
        samples[p[1]].append((float(p[2]), float(p[3]), int(p[4])))
n, iters, size = sys.argv[2:5]
clock, pin = sys.argv[5], sys.argv[6]
print(f"\n{n} alternating rounds of {iters} round trips of {size} B on rxe0 (TCG: compare ratios, not times)")
print("(a) matched settings: RC, rx depth 500, path MTU 1024, every send signalled and waited for")
print("every round trip; figure: usec/iter = elapsed / round trips (ibv_rc_pingpong's definition)")
print(f"    server: ibv_rc_pingpong -g 1 -s {size} -n {iters}    rdmadiag pingpong -s {size} -n {iters}")
print(f"    rdmadiag's sample clock: RDMADIAG_CLOCK={clock or '(unset: its own choice)'} (ibv_rc_pingpong reads "
      "the time only at the start and the end)")
print(f"    client: ibv_rc_pingpong -g 1 -s {size} -n {iters} 10.77.0.1    rdmadiag pingpong 10.77.0.1 -s {size} -n {iters}")
print("    placement, every tool alike: " + ("the scheduler's (BENCH_PIN=none)" if pin == "none" else
      "servers on vCPU {}, clients on vCPU {} (taskset), vCPU n's thread on host core n (BENCH_PIN)".format(*pin.split())))
print("(b) defaults against defaults: the same runs. Both tools' defaults are these settings (ibv_rc_pingpong")
print("    needs -g 1 on RoCE to run at all; rdmadiag picks that GID itself), so one table serves both.\n")
print("usec/iter over the rounds (each round's figure is itself a mean over its round trips):")
print(f"{'tool':<20}{'rounds':>7}{'min':>9}{'mean':>9}{'median':>9}{'max':>9}   retransmits per round")
for k, label in (("ibv", "ibv_rc_pingpong"), ("rdmadiag", "rdmadiag pingpong")):
    v = [s[0] for s in samples[k]]
    if not v:
        sys.exit(f"no samples for {label}")
    rt = " ".join(str(s[2]) for s in samples[k])
    print(f"{label:<20}{len(v):>7}{min(v):>9.1f}{statistics.mean(v):>9.1f}{statistics.median(v):>9.1f}"
          f"{max(v):>9.1f}   {rt}")
ours = [s[0] for s in samples["rdmadiag"]]
theirs = [s[0] for s in samples["ibv"]]
print("each round's usec/iter, in the order run:")
print("  ibv_rc_pingpong    " + " ".join(f"{x:.1f}" for x in theirs))
print("  rdmadiag pingpong  " + " ".join(f"{x:.1f}" for x in ours))
split = state_split(ours, theirs)
print("the guest's two states (split as bench/perf.sh does): " + (state_line(split, "us", ".1f") if split
      else "one state (no two groups stand apart)"))
rm = statistics.median(ours) / statistics.median(theirs)
print(f"\nrdmadiag / ibv_rc_pingpong, ratio of medians: {rm:.2f}  "
      + ("goal <= 1.00: met" if rm <= 1.0 else "goal <= 1.00: NOT met"))
rmean = statistics.mean(ours) / statistics.mean(theirs)
print(f"rdmadiag / ibv_rc_pingpong, ratio of means: {rmean:.2f}  "
      + ("goal <= 1.00: met" if rmean <= 1.0 else "goal <= 1.00: NOT met"))
tails = [s[1] for s in samples["rdmadiag"]]
good = sum(t <= 5.0 for t in tails)
print("rdmadiag p99.9 / median per round: " + " ".join(f"{t:.1f}" for t in tails))
need = -(-8 * len(tails) // 10)
print(f"rounds with p99.9 <= 5x median: {good} of {len(tails)}  "
      + (f"goal >= {need}: met" if good >= need else f"goal >= {need}: NOT met"))
theirs_tails = [s[1] for s in samples["perftest"]]
if theirs_tails:
    print("the lab's own tail, ib_send_lat -s " + size + " 99.9% / typical per round: "
          + " ".join(f"{t:.1f}" for t in theirs_tails))
    print(f"  rounds with 99.9% <= 5x typical: {sum(t <= 5.0 for t in theirs_tails)} of {len(theirs_tails)}"
          f" (perftest's ping-pong in the same guest; its retransmits per round: "
          + " ".join(str(s[2]) for s in samples["perftest"]) + ")")
clean = [s for s in samples["rdmadiag"] if s[2] == 0]
if clean and len(clean) < len(tails):
    print(f"  of which in rounds without retransmits: {sum(s[1] <= 5.0 for s in clean)} of {len(clean)}")
PY
