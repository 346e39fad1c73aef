#!/usr/bin/env bash
# devices.sh: benchmark `rdmadiag devices` / `rdmadiag ports -v` against ibv_devinfo / ibv_devinfo -v on rxe0 in one lab guest.
#
# usage: bench/devices.sh            (BENCH_N=20 runs of each command by default)
#
# Builds the release binary here, then in ONE Soft-RoCE lab guest runs, N times and alternating,
# `rdmadiag devices`, `ibv_devinfo`, `rdmadiag ports -v` and `ibv_devinfo -v` (plus /bin/true as the
# cost of merely starting a process), timing each invocation's wall time inside the guest with bash's
# $EPOCHREALTIME (no extra process per sample). One untimed warm-up run of each comes first.
# Prints mean / median / min per command and the ratios rdmadiag / ibv_devinfo (goal: <= 1.0).
# Under TCG emulation absolute times mean little; only ratios measured in the same guest do.
# This is a benchmark, not a test: it fails only when a command fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

n=${BENCH_N:-20}
[[ $n =~ ^[1-9][0-9]*$ ]] || die "BENCH_N must be a positive whole number, not '$n'"

bench_prepare

# The guest part. It prints "sample KEY MICROSECONDS EXIT_STATUS" lines; its own output is discarded
# except for the warm-up run of a command that fails, which is shown.
cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/devices.sh: time N alternating runs of each benchmarked command.
n=$1 bin=$2 out=$3
keys=(rdmadiag_devices ibv_devinfo rdmadiag_ports_v ibv_devinfo_v true)
run() {
    case $1 in
        rdmadiag_devices) "$bin" devices ;;
        ibv_devinfo) ibv_devinfo ;;
        rdmadiag_ports_v) "$bin" ports -v ;;
        ibv_devinfo_v) ibv_devinfo -v ;;
        true) /bin/true ;;
    esac
}
for key in "${keys[@]}"; do   # warm-up: caches, dynamic loader, and a sanity check
    run "$key" >"$out" 2>&1 || { echo "bench: $key failed in the warm-up run:"; cat "$out"; }
done
for ((i = 0; i < n; i++)); do
    for key in "${keys[@]}"; do
        rc=0
        t0=${EPOCHREALTIME/[.,]/}
        run "$key" >/dev/null 2>&1 || rc=$?
        t1=${EPOCHREALTIME/[.,]/}
        echo "sample $key $((10#$t1 - 10#$t0)) $rc"
    done
done
GUEST

note "running each command $n times in the Soft-RoCE lab"
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" -- "$(printf '%q ' bash "$work/guest.sh" "$n" "$bin" "$work/warmup.out")" \
    >"$work/lab.out" 2>&1 || lab_rc=$?
grep -v '^sample ' "$work/lab.out" >&2 || true
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"

awk -v n="$n" '
$1 == "sample" {
    key = $2; us[key, ++count[key]] = $3
    if ($4 != 0) failed[key]++
}
function stats(key,   i, j, k, m, v, sorted, sum) {
    m = count[key]; sum = 0
    for (i = 1; i <= m; i++) { sorted[i] = us[key, i]; sum += sorted[i] }
    for (i = 2; i <= m; i++) {           # insertion sort: m is small
        v = sorted[i]
        for (j = i - 1; j >= 1 && sorted[j] > v; j--) sorted[j + 1] = sorted[j]
        sorted[j + 1] = v
    }
    mean[key] = sum / m / 1000
    median[key] = (m % 2 ? sorted[(m + 1) / 2] : (sorted[m / 2] + sorted[m / 2 + 1]) / 2) / 1000
    min[key] = sorted[1] / 1000
}
function row(key, label) {
    if (!(key in count)) { printf "%-26s %5s\n", label, "no samples"; bad = 1; return }
    stats(key)
    printf "%-26s %5d %9.2f %10.2f %9.2f%s\n", label, count[key], mean[key], median[key], min[key],
        (failed[key] ? sprintf("   FAILED %d times", failed[key]) : "")
    if (failed[key]) bad = 1
}
function ratio(a, b, label,   r) {
    if (!(a in mean) || !(b in mean) || mean[b] == 0) return
    r = mean[a] / mean[b]
    printf "%-40s %5.2f  (median %.2f)  %s\n", label, r, median[a] / median[b],
        (r <= 1.0 ? "goal <= 1.0: met" : "goal <= 1.0: NOT met")
}
END {
    printf "\n%d runs of each command, alternating, in one Soft-RoCE guest (TCG: compare ratios, not times)\n\n", n
    printf "%-26s %5s %9s %10s %9s\n", "command", "runs", "mean ms", "median ms", "min ms"
    row("rdmadiag_devices", "rdmadiag devices")
    row("ibv_devinfo", "ibv_devinfo")
    row("rdmadiag_ports_v", "rdmadiag ports -v")
    row("ibv_devinfo_v", "ibv_devinfo -v")
    row("true", "/bin/true (process floor)")
    print ""
    ratio("rdmadiag_devices", "ibv_devinfo", "rdmadiag devices / ibv_devinfo")
    ratio("rdmadiag_ports_v", "ibv_devinfo_v", "rdmadiag ports -v / ibv_devinfo -v")
    exit bad
}' "$work/lab.out" || die "some benchmarked command failed (see above)"
