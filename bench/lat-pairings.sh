#!/usr/bin/env bash
# lat-pairings.sh: where WRITE latency's gap to perftest lies: which side, and whether rdmadiag's own
# wire does it. Four pairings of ib_write_lat and `rdmadiag lat --op write` in one lab guest.
#
# usage: bench/lat-pairings.sh     (BENCH_N=8 rounds, BENCH_ITERS=1000 at 2 B; BENCH_PIN="0 1":
#                                   every server on vCPU 0, every client on vCPU 1 (taskset), or
#                                   "none" to leave placement to the scheduler)
#
# Builds the release binary here, then in ONE Soft-RoCE lab guest runs, BENCH_N times and in an
# order that alternates from round to round:
#   pp  ib_write_lat client -> ib_write_lat server
#   rr  rdmadiag lat client -> rdmadiag lat server (rdmadiag's wire)
#   rp  rdmadiag lat --compat perftest client -> ib_write_lat server
#   pr  ib_write_lat client -> a one-shot rdmadiag lat server (it serves perftest's clients)
# all at -s 2 -n N, inline off (-I 0 on rdmadiag; perftest disables inline on rxe), every write
# signalled and its completion awaited (--timing perftest, as perftest), rdmadiag reading the TSC
# once per sample (RDMADIAG_CLOCK=tsc, as perftest). The figure is the client's median half round
# trip (perftest's t_typical; rdmadiag's median_us). Prints each pairing's min/median/max over the
# rounds and its median's ratio to pp's: rp and pr against pp say which side costs more (the
# client or the server), rr against rp what rdmadiag's own wire and buffer layout add. Under TCG
# only ratios measured in the same guest mean anything.
# A benchmark, not a test: it fails only when a run fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

n=${BENCH_N:-8} iters=${BENCH_ITERS:-1000}
bench_pin
for v in "$n" "$iters"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_N and BENCH_ITERS must be positive whole numbers"
done

bench_prepare

cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/lat-pairings.sh: one line per run, "sample PAIRING MEDIAN_US".
n=$1 iters=$2 bin=$3 work=$4 pin=$5
# Servers on one vCPU and clients on the other, every pairing alike: two spinning processes on
# one vCPU hand over only at the scheduler's tick (a round trip of milliseconds).
spin=() cpin=()
[[ $pin == none ]] || { spin=(taskset -c "${pin% *}"); cpin=(taskset -c "${pin#* }"); }
host=10.77.0.1 port=19700
export RDMADIAG_CLOCK=tsc
wait_port() { for _ in $(seq 400); do ss -ltn "sport = :$1" | grep -q LISTEN && return 0; sleep 0.05; done; return 1; }
fail() { echo "bench: $*"; tail -8 "$work/client.out" "$work/server.out"; exit 1; }
typical() { awk -v n="$iters" '$1 == 2 && $2 == n { print $5 }' "$work/client.out"; }
median() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lat"][0]["median_us"])' "$work/client.out"; }
perftest=(ib_write_lat -x 1 -s 2 -n "$iters" -F)
ours=(--timeout 120s --op write -s 2 -n "$iters" -I 0 --timing perftest)

one() {
    local pairing=$1 server client figure spid v
    port=$((port + 1))
    case $pairing in
        pp) server=("${perftest[@]}" -p $port); client=("${perftest[@]}" -p $port $host); figure=typical ;;
        rr) server=("$bin" lat -p $port --timeout 120s); client=("$bin" lat $host -p $port "${ours[@]}" --json); figure=median ;;
        rp) server=("${perftest[@]}" -p $port); client=("$bin" lat $host -p $port --compat perftest "${ours[@]}" --json); figure=median ;;
        pr) server=("$bin" lat -p $port "${ours[@]}"); client=("${perftest[@]}" -p $port $host); figure=typical ;;
    esac
    timeout 180 "${spin[@]}" "${server[@]}" >"$work/server.out" 2>&1 &
    spid=$!
    wait_port $port || fail "${server[*]} did not start"
    timeout 180 "${cpin[@]}" "${client[@]}" >"$work/client.out" 2>&1 || fail "${client[*]} failed"
    wait $spid || fail "${server[*]} failed"
    v=$($figure)
    [[ -n $v ]] || fail "no figure from ${client[*]}"
    echo "sample $pairing $v"
}

for ((r = 0; r < n; r++)); do
    if ((r % 2)); then order="rr pr rp pp"; else order="pp rp pr rr"; fi
    for p in $order; do one "$p"; done
done
GUEST

note "alternating $n rounds of four WRITE latency pairings ($iters x 2 B; vCPUs of server and client: $pin) in the lab"
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" -- "$(printf '%q ' bash "$work/guest.sh" "$n" "$iters" "$bin" "$work" "$pin")" \
    >"$work/lab.out" 2>&1 || lab_rc=$?
grep -v '^sample ' "$work/lab.out" >&2 || true
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"

python3 - "$work/lab.out" "$n" "$iters" "$pin" <<'PY'
import statistics, sys
figures = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3 and p[0] == "sample":
        figures.setdefault(p[1], []).append(float(p[2]))
n, iters, pin = sys.argv[2:5]
names = {
    "pp": "ib_write_lat -> ib_write_lat",
    "rp": "rdmadiag --compat perftest -> ib_write_lat",
    "pr": "ib_write_lat -> rdmadiag server",
    "rr": "rdmadiag -> rdmadiag",
}
print(f"\n{n} alternating rounds of {iters} WRITEs of 2 B on rxe0 (TCG: compare ratios, not times);")
print("the client's median half round trip in us; rdmadiag with RDMADIAG_CLOCK=tsc, -I 0, --timing perftest")
print("placement, every pairing alike: " + ("the scheduler's (BENCH_PIN=none)\n" if pin == "none" else
      "servers on vCPU {}, clients on vCPU {} (taskset), vCPU n's thread on host core n (BENCH_PIN)\n".format(*pin.split())))
print(f"{'pairing (client -> server)':<44}{'min':>9}{'median':>9}{'max':>9}{'vs pp':>8}")
if "pp" not in figures:
    sys.exit("no ib_write_lat -> ib_write_lat figures")
base = statistics.median(figures["pp"])
for k in ("pp", "rp", "pr", "rr"):
    v = figures.get(k)
    if not v:
        sys.exit(f"no figures for {names[k]}")
    m = statistics.median(v)
    print(f"{names[k]:<44}{min(v):>9.2f}{m:>9.2f}{max(v):>9.2f}{m / base:>7.2f}x")
print("\neach round's figure, in the order run (the guest's states show as two levels):")
for k in ("pp", "rp", "pr", "rr"):
    print(f"  {k}  " + " ".join(f"{x:.2f}" for x in figures[k]))
PY
