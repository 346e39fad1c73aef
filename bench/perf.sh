#!/usr/bin/env bash
# perf.sh: benchmark `rdmadiag bw` and `rdmadiag lat` against perftest on rxe0 in one lab guest.
#
# usage: bench/perf.sh     (BENCH_N=3 rounds; BENCH_BW_ITERS=1000 at 64 KiB, BENCH_LAT_ITERS=1000
#                           at 2 B, BENCH_RATE_ITERS=10000 at 64 B)
#
# Builds the release binary here, then in ONE Soft-RoCE lab guest runs, BENCH_N times, every pair
# below, server + client each, rdmadiag and perftest alternately (which goes first alternates from
# round to round), with identical sizes and iteration counts:
#
#   bw   --op write|send|read -s 64K -n I   vs  ib_write_bw|ib_send_bw|ib_read_bw -x 1 -s 65536 -n I
#        (average bandwidth: rdmadiag's bw_avg_gbps against perftest's "BW average[MB/sec]", whose
#        MB is 2^20 bytes, converted to Gb/s; its --report_gbits would round to 0.01 Gb/s)
#   lat  --op write|send|read -s 2 -n I     vs  ib_write_lat|ib_send_lat|ib_read_lat -x 1 -s 2 -n I
#        (median in us: rdmadiag's median_us, perftest's t_typical; both count half the round trip
#        for send and write and the whole round trip for read)
#   bw   --op write -s 64 -n I              vs  ib_write_bw -x 1 -s 64 -n I
#        (message rate in Mpps: msg_rate_mpps against perftest's MsgRate column)
#
# Each figure is the client's, the median over the rounds. Prints per pair: ours, perftest's, the
# ratio ours/perftest and whether the goal is met (bandwidth and message rate >= 1.00x, median
# latency <= 1.00x). Under TCG only ratios measured in the same guest mean anything.
# A benchmark, not a test: it fails only when a run fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

n=${BENCH_N:-3} bw_iters=${BENCH_BW_ITERS:-1000} lat_iters=${BENCH_LAT_ITERS:-1000}
rate_iters=${BENCH_RATE_ITERS:-10000}
for v in "$n" "$bw_iters" "$lat_iters" "$rate_iters"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_N and BENCH_*_ITERS must be positive whole numbers"
done
((bw_iters >= 5 && lat_iters >= 5 && rate_iters >= 5)) || die "perftest needs at least 5 iterations"

bench_prepare

cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/perf.sh: alternate rdmadiag and perftest pairs, print one sample per run.
n=$1 bw_iters=$2 lat_iters=$3 rate_iters=$4 bin=$5 work=$6
port=19000
# Every command is bounded: nothing may hang the guest.
T=120
wait_port() { for _ in $(seq 400); do ss -ltn "sport = :$1" | grep -q LISTEN && return 0; sleep 0.05; done; return 1; }
fail() { echo "bench: $*"; exit 1; }

# rdmadiag SUBCMD FIELD ARGS...: a server, then a client with ARGS; prints the client's FIELD.
rdmadiag_run() {
    local sub=$1 field=$2; shift 2
    port=$((port + 1))
    timeout $T "$bin" "$sub" -p $port --wait 60s >"$work/server.out" 2>&1 &
    local spid=$!
    wait_port $port || fail "rdmadiag $sub server did not start: $(cat "$work/server.out")"
    timeout $T "$bin" "$sub" 10.77.0.1 -p $port "$@" --json >"$work/client.json" 2>"$work/client.err" ||
        fail "rdmadiag $sub $* failed: $(cat "$work/client.err")"
    wait $spid || fail "rdmadiag $sub server failed: $(cat "$work/server.out")"
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
rows = r["bw"] if sys.argv[2] in ("bw_avg_gbps", "msg_rate_mpps") else r["lat"]
print(rows[0][sys.argv[2]])' "$work/client.json" "$field"
}

# perftest PROG COLUMN ARGS...: a server, then a client with ARGS; prints the client's COLUMN
# (0-based field of the result row, the line starting with the message size).
perftest_run() {
    local prog=$1 col=$2 size=$4; shift 2
    port=$((port + 1))
    timeout $T "$prog" -F -x 1 -p $port "$@" >"$work/server.out" 2>&1 &
    local spid=$!
    wait_port $port || fail "$prog server did not start: $(cat "$work/server.out")"
    timeout $T "$prog" -F -x 1 -p $port "$@" 10.77.0.1 >"$work/client.out" 2>&1 ||
        fail "$prog $* failed: $(cat "$work/client.out")"
    wait $spid || fail "$prog server failed: $(cat "$work/server.out")"
    local v
    v=$(awk -v s="$size" -v c="$col" '$1 == s && NF > c { print $(c + 1); exit }' "$work/client.out")
    [[ -n $v ]] || fail "no result row in $prog's output: $(cat "$work/client.out")"
    echo "$v"
}

# pair NAME: one rdmadiag run and one perftest run of the pair NAME, in the order of this round.
pair() {
    local name=$1 ours theirs
    local op=${name#*_}
    case $name in
        bw_*)
            ours=(bw bw_avg_gbps --op "$op" -s 64K -n "$bw_iters")
            theirs=("ib_${op}_bw" 3 -s 65536 -n "$bw_iters") ;;
        lat_*)
            ours=(lat median_us --op "$op" -s 2 -n "$lat_iters")
            theirs=("ib_${op}_lat" 4 -s 2 -n "$lat_iters") ;;
        rate_write)
            ours=(bw msg_rate_mpps --op write -s 64 -n "$rate_iters")
            theirs=(ib_write_bw 4 -s 64 -n "$rate_iters") ;;
    esac
    local a b
    if ((round % 2 == 0)); then
        a=$(rdmadiag_run "${ours[@]}") || { echo "$a"; exit 1; }
        b=$(perftest_run "${theirs[@]}") || { echo "$b"; exit 1; }
    else
        b=$(perftest_run "${theirs[@]}") || { echo "$b"; exit 1; }
        a=$(rdmadiag_run "${ours[@]}") || { echo "$a"; exit 1; }
    fi
    echo "sample $name rdmadiag $a"
    echo "sample $name perftest $b"
}

for ((round = 0; round < n; round++)); do
    for name in bw_write bw_send bw_read lat_write lat_send lat_read rate_write; do
        pair "$name"
    done
done
GUEST

note "alternating $n rounds of rdmadiag and perftest (bw 64K x $bw_iters, lat 2 B x $lat_iters, 64 B x $rate_iters) in the lab"
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" --timeout 1800 -- \
    "$(printf '%q ' bash "$work/guest.sh" "$n" "$bw_iters" "$lat_iters" "$rate_iters" "$bin" "$work")" \
    >"$work/lab.out" 2>&1 || lab_rc=$?
grep -v '^sample ' "$work/lab.out" >&2 || true
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"

python3 - "$work/lab.out" "$n" "$bw_iters" "$lat_iters" "$rate_iters" <<'PY'
import statistics, sys
samples = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 4 and p[0] == "sample":
        x = float(p[3])
        if p[1].startswith("bw_") and p[2] == "perftest":
            x = x * 2**20 * 8 / 1e9  # perftest's MB/sec (MB = 2^20 bytes) to Gb/s
        samples.setdefault((p[1], p[2]), []).append(x)
n, bw_iters, lat_iters, rate_iters = sys.argv[2:6]
rows = [
    # name, label, perftest tool, unit, higher is better
    ("bw_write", "bw write 64 KiB", "ib_write_bw", "Gb/s", True),
    ("bw_send", "bw send 64 KiB", "ib_send_bw", "Gb/s", True),
    ("bw_read", "bw read 64 KiB", "ib_read_bw", "Gb/s", True),
    ("lat_write", "lat write 2 B (median)", "ib_write_lat", "us", False),
    ("lat_send", "lat send 2 B (median)", "ib_send_lat", "us", False),
    ("lat_read", "lat read 2 B (median)", "ib_read_lat", "us", False),
    ("rate_write", "msg rate write 64 B", "ib_write_bw", "Mpps", True),
]
print(f"\n{n} alternating rounds on rxe0, medians over the rounds (TCG: compare ratios, not figures);"
      f"\nbw {bw_iters} x 64 KiB, lat {lat_iters} x 2 B, msg rate {rate_iters} x 64 B\n")
print(f"{'test':<24}{'perftest tool':<14}{'unit':>5}{'rdmadiag':>11}{'perftest':>11}{'ours/pt':>9}  goal")
missed = 0
for name, label, tool, unit, higher in rows:
    ours, theirs = samples.get((name, "rdmadiag")), samples.get((name, "perftest"))
    if not ours or not theirs:
        sys.exit(f"no samples for {label}")
    o, t = statistics.median(ours), statistics.median(theirs)
    r = o / t if t else float("inf")
    met = r >= 1.0 if higher else r <= 1.0
    missed += not met
    goal = (">= 1.00x " if higher else "<= 1.00x ") + ("met" if met else "NOT met")
    fmt = ".3f" if unit != "us" else ".2f"
    print(f"{label:<24}{tool:<14}{unit:>5}{o:>11{fmt}}{t:>11{fmt}}{r:>8.2f}x  {goal}")
print(f"\n{len(rows) - missed} of {len(rows)} goals met")
print("per-round samples (rdmadiag | perftest):")
for name, label, *_ in rows:
    ours = " ".join(f"{x:.4g}" for x in samples[(name, "rdmadiag")])
    theirs = " ".join(f"{x:.4g}" for x in samples[(name, "perftest")])
    print(f"  {label:<24}{ours} | {theirs}")
PY
