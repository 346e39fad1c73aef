#!/usr/bin/env bash
# perf.sh: benchmark `rdmadiag bw` and `rdmadiag lat` against perftest on rxe0 in one lab guest.
#
# usage: bench/perf.sh     (BENCH_N=10 rounds; BENCH_BW_ITERS=500 at 64 KiB, BENCH_LAT_ITERS=1000
#                           at 2 B, BENCH_RATE_ITERS=10000 at 64 B; BENCH_TABLES="matched defaults";
#                           BENCH_ROWS="bw_write ... lat_cswap" to run some rows only;
#                           BENCH_PIN="0 1": every server on vCPU 0, every client on vCPU 1, both
#                           tools alike (taskset); "none" leaves placement to the scheduler)
#
# Builds the release binary here, then in ONE Soft-RoCE lab guest runs, BENCH_N times, every pair
# below, server + client each, rdmadiag and perftest alternately (which goes first alternates from
# round to round), with identical sizes and iteration counts. Two tables:
#
# (a) matched settings: rdmadiag's flags set to what perftest really runs with on rxe0:
#   bw   --op write|send|read -s 64K -l 1   vs  ib_*_bw -x 1 -s 65536 (post list 1, CQ moderation 1
#        above 8 KiB on both, tx depth 128, outstanding reads the device maximum, inline 0)
#   bw   --op write -s 64 -l 1 -Q 100       vs  ib_write_bw -x 1 -s 64 (message rate: post list 1,
#        CQ moderation 100)
#   lat  --op write|send|read -s 2 -I 0     vs  ib_*_lat -x 1 -s 2 (inline 0: perftest does not
#        know rxe and disables inline; every operation signalled and polled: --timing perftest;
#        RDMADIAG_CLOCK=tsc: one TSC read per sample, as perftest's, where the guest's kernel
#        does not list the TSC as invariant; the atomic latency rows too)
#   bw   --op atomic-fadd|atomic-cswap -l 1 -Q 100  vs  ib_atomic_bw -x 1 -s 8 -A FETCH_AND_ADD|
#        CMP_AND_SWAP (message rate, 8 B; in flight: the device's max_qp_rd_atom on both)
#   lat  --op atomic-fadd|atomic-cswap      vs  ib_atomic_lat -x 1 -s 8 -A ... (round trip)
# (b) defaults against defaults (labelled so): each tool as a user would start it.
#
# Figures: bandwidth is rdmadiag's bw_avg_gbps against perftest's "BW average[MB/sec]" (MB = 2^20
# bytes) in Gb/s; latency is the median in us (perftest's t_typical), half the round trip for send
# and write, the whole round trip for read; message rate is Mpps. Each figure is the client's.
# Prints both command lines, each side's min/median/max over the rounds and the ratio of medians
# (goals: bandwidth and message rate >= 1.00x, median latency <= 1.00x). Under TCG only ratios
# measured in the same guest mean anything.
# A benchmark, not a test: it fails only when a run fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

n=${BENCH_N:-10} bw_iters=${BENCH_BW_ITERS:-500} lat_iters=${BENCH_LAT_ITERS:-1000}
rate_iters=${BENCH_RATE_ITERS:-10000} tables=${BENCH_TABLES:-matched defaults}
all_rows="bw_write bw_send bw_read lat_write lat_send lat_read rate_write rate_fadd rate_cswap lat_fadd lat_cswap"
rows=${BENCH_ROWS:-$all_rows}
bench_pin
for r in $rows; do
    [[ " $all_rows " == *" $r "* ]] || die "BENCH_ROWS lists rows of: $all_rows (not '$r')"
done
for t in $tables; do
    [[ $t == matched || $t == defaults ]] || die "BENCH_TABLES lists matched and/or defaults, not '$t'"
done
for v in "$n" "$bw_iters" "$lat_iters" "$rate_iters"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_N and BENCH_*_ITERS must be positive whole numbers"
done
((bw_iters >= 5 && lat_iters >= 5 && rate_iters >= 5)) || die "perftest needs at least 5 iterations"

bench_prepare

cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/perf.sh: alternate rdmadiag and perftest pairs, print one sample per run.
n=$1 bw_iters=$2 lat_iters=$3 rate_iters=$4 bin=$5 work=$6 tables=$7 rows=$8 pin=$9
# Servers on one vCPU and clients on the other, both tools alike: two spinning processes on one
# vCPU hand over only at the scheduler's tick (a round trip of milliseconds), whichever tool.
spin=() cpin=()
[[ $pin == none ]] || { spin=(taskset -c "${pin% *}"); cpin=(taskset -c "${pin#* }"); }
port=19000
# Every command is bounded: nothing may hang the guest.
T=120
wait_port() { for _ in $(seq 400); do ss -ltn "sport = :$1" | grep -q LISTEN && return 0; sleep 0.05; done; return 1; }
fail() { echo "bench: $*"; exit 1; }

# rdmadiag SUBCMD FIELD ARGS...: a server, then a client with ARGS; prints the client's FIELD.
rdmadiag_run() {
    local sub=$1 field=$2; shift 2
    port=$((port + 1))
    timeout $T "${spin[@]}" env "${rd_env[@]}" "$bin" "$sub" -p $port --wait 60s >"$work/server.out" 2>&1 &
    local spid=$!
    wait_port $port || fail "rdmadiag $sub server did not start: $(cat "$work/server.out")"
    timeout $T "${cpin[@]}" env "${rd_env[@]}" "$bin" "$sub" 10.77.0.1 -p $port "$@" --json >"$work/client.json" 2>"$work/client.err" ||
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
    timeout $T "${spin[@]}" "$prog" -F -x 1 -p $port "$@" >"$work/server.out" 2>&1 &
    local spid=$!
    wait_port $port || fail "$prog server did not start: $(cat "$work/server.out")"
    timeout $T "${cpin[@]}" "$prog" -F -x 1 -p $port "$@" 10.77.0.1 >"$work/client.out" 2>&1 ||
        fail "$prog $* failed: $(cat "$work/client.out")"
    wait $spid || fail "$prog server failed: $(cat "$work/server.out")"
    local v
    v=$(awk -v s="$size" -v c="$col" '$1 == s && NF > c { print $(c + 1); exit }' "$work/client.out")
    [[ -n $v ]] || fail "no result row in $prog's output: $(cat "$work/client.out")"
    echo "$v"
}

# pair TABLE NAME: one rdmadiag run and one perftest run of the pair NAME, in this round's order.
pair() {
    local table=$1 name=$2 ours theirs match=()
    local op=${name#*_}
    local atomic=""
    case $op in
        fadd) atomic=FETCH_AND_ADD ;;
        cswap) atomic=CMP_AND_SWAP ;;
    esac
    # Matched latency: the TSC, as perftest reads it (the lab guest's kernel does not list it
    # as invariant, so rdmadiag would take CLOCK_MONOTONIC, a system call on its HPET).
    rd_env=()
    case $table/$name in
        matched/lat_*) rd_env=(RDMADIAG_CLOCK=tsc) ;;
    esac
    case $table/$name in
        matched/bw_*) match=(-l 1) ;;
        matched/rate_*) match=(-l 1 -Q 100) ;;
        matched/lat_fadd | matched/lat_cswap) match=() ;;
        matched/lat_*) match=(-I 0 --timing perftest) ;;
    esac
    case $name in
        rate_fadd | rate_cswap)
            ours=(bw msg_rate_mpps --op "atomic-$op" -n "$rate_iters" "${match[@]}")
            theirs=(ib_atomic_bw 4 -s 8 -A "$atomic" -n "$rate_iters") ;;
        lat_fadd | lat_cswap)
            ours=(lat median_us --op "atomic-$op" -n "$lat_iters" "${match[@]}")
            theirs=(ib_atomic_lat 4 -s 8 -A "$atomic" -n "$lat_iters") ;;
        bw_*)
            ours=(bw bw_avg_gbps --op "$op" -s 64K -n "$bw_iters" "${match[@]}")
            theirs=("ib_${op}_bw" 3 -s 65536 -n "$bw_iters") ;;
        lat_*)
            ours=(lat median_us --op "$op" -s 2 -n "$lat_iters" "${match[@]}")
            theirs=("ib_${op}_lat" 4 -s 2 -n "$lat_iters") ;;
        rate_write)
            ours=(bw msg_rate_mpps --op write -s 64 -n "$rate_iters" "${match[@]}")
            theirs=(ib_write_bw 4 -s 64 -n "$rate_iters") ;;
    esac
    if ((round == 0)); then
        echo "cmd $table $name rdmadiag ${rd_env[*]}${rd_env[*]:+ }${ours[0]} 10.77.0.1 ${ours[*]:2}"
        echo "cmd $table $name perftest ${theirs[0]} -F -x 1 ${theirs[*]:2} 10.77.0.1"
    fi
    local a b
    if ((round % 2 == 0)); then
        a=$(rdmadiag_run "${ours[@]}") || { echo "$a"; exit 1; }
        b=$(perftest_run "${theirs[@]}") || { echo "$b"; exit 1; }
    else
        b=$(perftest_run "${theirs[@]}") || { echo "$b"; exit 1; }
        a=$(rdmadiag_run "${ours[@]}") || { echo "$a"; exit 1; }
    fi
    echo "sample $table $name rdmadiag $a"
    echo "sample $table $name perftest $b"
}

for ((round = 0; round < n; round++)); do
    for table in $tables; do
        for name in $rows; do
            pair "$table" "$name"
        done
    done
done
GUEST

note "alternating $n rounds of rdmadiag and perftest (bw 64K x $bw_iters, lat 2 B x $lat_iters, 64 B x $rate_iters; tables: $tables; vCPUs of server and client: $pin) in the lab"
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" --timeout 3600 -- \
    "$(printf '%q ' bash "$work/guest.sh" "$n" "$bw_iters" "$lat_iters" "$rate_iters" "$bin" "$work" "$tables" "$rows" "$pin")" \
    >"$work/lab.out" 2>&1 || lab_rc=$?
grep -v -e '^sample ' -e '^cmd ' "$work/lab.out" >&2 || true
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"

PYTHONPATH="$RDMADIAG_ROOT/bench/lib" python3 - "$work/lab.out" "$n" "$bw_iters" "$lat_iters" "$rate_iters" "$pin" <<'PY'
import statistics, sys
from states import state_split, state_line
samples, cmds = {}, {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 5 and p[0] == "sample":
        x = float(p[4])
        if p[2].startswith("bw_") and p[3] == "perftest":
            x = x * 2**20 * 8 / 1e9  # perftest's MB/sec (MB = 2^20 bytes) to Gb/s
        samples.setdefault((p[1], p[2], p[3]), []).append(x)
    elif len(p) > 4 and p[0] == "cmd":
        cmds[(p[1], p[2], p[3])] = " ".join(p[4:])
n, bw_iters, lat_iters, rate_iters, pin = sys.argv[2:7]
rows = [
    # name, label, unit, higher is better
    ("bw_write", "bw write 64 KiB", "Gb/s", True),
    ("bw_send", "bw send 64 KiB", "Gb/s", True),
    ("bw_read", "bw read 64 KiB", "Gb/s", True),
    ("lat_write", "lat write 2 B median", "us", False),
    ("lat_send", "lat send 2 B median", "us", False),
    ("lat_read", "lat read 2 B median", "us", False),
    ("rate_write", "msg rate write 64 B", "Mpps", True),
    ("rate_fadd", "rate fetch-add 8 B", "Mpps", True),
    ("rate_cswap", "rate cmp-swap 8 B", "Mpps", True),
    ("lat_fadd", "lat fetch-add median", "us", False),
    ("lat_cswap", "lat cmp-swap median", "us", False),
]
titles = {
    "matched": "(a) MATCHED SETTINGS: rdmadiag set to what perftest runs with",
    "defaults": "(b) DEFAULTS AGAINST DEFAULTS (not matched: post list 16 vs 1, inline 236 vs 0)",
}
print(f"\n{n} alternating rounds on rxe0 (TCG: compare ratios, not figures); "
      f"bw {bw_iters} x 64 KiB, lat {lat_iters} x 2 B, msg rate {rate_iters} x 64 B")
print("placement, both tools alike: " + ("the scheduler's (BENCH_PIN=none)" if pin == "none" else
      "servers on vCPU {}, clients on vCPU {} (taskset), vCPU n's thread on host core n (BENCH_PIN)".format(*pin.split())))
for table in ("matched", "defaults"):
    if not any(k[0] == table for k in samples):
        continue
    print(f"\n{titles[table]}\n")
    print(f"{'test':<22}{'unit':>5}  {'rdmadiag min/median/max':>27}  {'perftest min/median/max':>27}{'ratio':>7}  goal")
    missed = 0
    ran = [r for r in rows if (table, r[0], "rdmadiag") in samples]
    for name, label, unit, higher in ran:
        ours, theirs = samples.get((table, name, "rdmadiag")), samples.get((table, name, "perftest"))
        if not ours or not theirs:
            sys.exit(f"no samples for {table} {label}")
        fmt = ".2f" if unit == "us" else ".4f"
        span = lambda v: "/".join(f"{x:{fmt}}" for x in (min(v), statistics.median(v), max(v)))
        o, t = statistics.median(ours), statistics.median(theirs)
        r = o / t if t else float("inf")
        met = r >= 1.0 if higher else r <= 1.0
        missed += not met
        goal = (">= 1.00" if higher else "<= 1.00") + (" met" if met else " NOT met")
        print(f"{label:<22}{unit:>5}  {span(ours):>27}  {span(theirs):>27}{r:>6.2f}x  {goal}")
    print(f"{len(ran) - missed} of {len(ran)} goals met")
    states = [(label, state_split(samples[(table, name, "rdmadiag")], samples[(table, name, "perftest")]))
              for name, label, unit, _ in ran if unit == "us"]
    if any(split for _, split in states):
        print("the guest's two states (latency rows whose rounds fall into two groups, split at the threshold\n"
              "that best separates both tools' round medians together; a median of rounds measures the mix):")
    for label, split in states:
        if split:
            print(f"  {label:<22}{state_line(split, 'us', '.2f')}")
    print("command lines (client side; the server runs the same without the address):")
    for name, label, *_ in ran:
        print(f"  {label:<22}{cmds.get((table, name, 'rdmadiag'), '?')}")
        print(f"  {'':<22}{cmds.get((table, name, 'perftest'), '?')}")
PY
