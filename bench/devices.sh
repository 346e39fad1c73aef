#!/usr/bin/env bash
# devices.sh: benchmark `rdmadiag devices`, `ports` and `ports -v` against ibv_devinfo / ibv_devinfo -v on rxe0 in one lab guest.
#
# usage: bench/devices.sh            (BENCH_N=30 pairs of each comparison by default)
#
# Builds the release binary here, then in ONE Soft-RoCE lab guest runs one untimed warm-up of every
# command (caches, dynamic loader, and a sanity check), then N rounds of three pairs:
#     rdmadiag devices     and  ibv_devinfo
#     rdmadiag ports       and  ibv_devinfo
#     rdmadiag ports -v    and  ibv_devinfo -v
# each pair back to back, which of the two goes first alternating from round to round, plus
# `rdmadiag --version` (rdmadiag's start-up alone) and /bin/true (the cost of merely starting a
# process). Each invocation's wall time is taken inside the guest with bash's $EPOCHREALTIME (no extra
# process per sample). Prints min / median / max per command and, as the headline, the ratio of the
# medians rdmadiag / ibv_devinfo for each pair (goal for devices: <= 1.00).
# Under TCG emulation absolute times mean little; only ratios measured in the same guest do.
# This is a benchmark, not a test: it fails only when a command fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

n=${BENCH_N:-30}
[[ $n =~ ^[1-9][0-9]*$ ]] || die "BENCH_N must be a positive whole number, not '$n'"

bench_prepare

# The guest part. It prints "sample KEY MICROSECONDS EXIT_STATUS" lines; its own output is discarded
# except for the warm-up run of a command that fails, which is shown.
cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/devices.sh: time N rounds of the paired commands.
n=$1 bin=$2 out=$3
run() {
    case $1 in
        rdmadiag_devices) "$bin" devices ;;
        rdmadiag_ports) "$bin" ports ;;
        rdmadiag_ports_v) "$bin" ports -v ;;
        ibv_devinfo | ibv_devinfo_2) ibv_devinfo ;;
        ibv_devinfo_v) ibv_devinfo -v ;;
        rdmadiag_version) "$bin" --version ;;
        true) /bin/true ;;
    esac
}
timed() {
    local rc=0 t0 t1
    t0=${EPOCHREALTIME/[.,]/}
    run "$1" >/dev/null 2>&1 || rc=$?
    t1=${EPOCHREALTIME/[.,]/}
    echo "sample $1 $((10#$t1 - 10#$t0)) $rc"
}
pairs=(rdmadiag_devices:ibv_devinfo rdmadiag_ports:ibv_devinfo_2 rdmadiag_ports_v:ibv_devinfo_v)
for key in rdmadiag_devices ibv_devinfo rdmadiag_ports rdmadiag_ports_v ibv_devinfo_v \
    rdmadiag_version true; do
    run "$key" >"$out" 2>&1 || { echo "bench: $key failed in the warm-up run:"; cat "$out"; }
done
for ((i = 0; i < n; i++)); do
    for pair in "${pairs[@]}"; do
        ours=${pair%%:*} theirs=${pair##*:}
        if ((i % 2)); then
            timed "$theirs"; timed "$ours"
        else
            timed "$ours"; timed "$theirs"
        fi
    done
    timed rdmadiag_version
    timed true
done
GUEST

note "running $n rounds of each pair in the Soft-RoCE lab"
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
function stats(key,   i, j, m, v, sorted) {
    m = count[key]
    for (i = 1; i <= m; i++) sorted[i] = us[key, i]
    for (i = 2; i <= m; i++) {           # insertion sort: m is small
        v = sorted[i]
        for (j = i - 1; j >= 1 && sorted[j] > v; j--) sorted[j + 1] = sorted[j]
        sorted[j + 1] = v
    }
    median[key] = (m % 2 ? sorted[(m + 1) / 2] : (sorted[m / 2] + sorted[m / 2 + 1]) / 2) / 1000
    min[key] = sorted[1] / 1000
    max[key] = sorted[m] / 1000
}
function row(key, label) {
    if (!(key in count)) { printf "%-32s %5s\n", label, "no samples"; bad = 1; return }
    stats(key)
    printf "%-32s %5d %9.1f %10.1f %9.1f%s\n", label, count[key], min[key], median[key], max[key],
        (failed[key] ? sprintf("   FAILED %d times", failed[key]) : "")
    if (failed[key]) bad = 1
}
function ratio(a, b, label, goal,   r) {
    if (!(a in median) || !(b in median) || median[b] == 0) return
    r = median[a] / median[b]
    printf "%-44s %5.2fx%s\n", label, r,
        (goal ? (r <= 1.0 ? "   goal <= 1.00: met" : "   goal <= 1.00: NOT met") : "")
}
END {
    printf "\n%d rounds of each pair, alternating, in one Soft-RoCE guest (TCG: compare ratios, not times)\n\n", n
    printf "%-32s %5s %9s %10s %9s\n", "command", "runs", "min ms", "median ms", "max ms"
    row("rdmadiag_devices", "rdmadiag devices")
    row("ibv_devinfo", "ibv_devinfo")
    row("rdmadiag_ports", "rdmadiag ports")
    row("ibv_devinfo_2", "ibv_devinfo (paired with ports)")
    row("rdmadiag_ports_v", "rdmadiag ports -v")
    row("ibv_devinfo_v", "ibv_devinfo -v")
    row("rdmadiag_version", "rdmadiag --version (start-up)")
    row("true", "/bin/true (process floor)")
    print "\nratio of medians, rdmadiag / ibv_devinfo:"
    ratio("rdmadiag_devices", "ibv_devinfo", "  rdmadiag devices  / ibv_devinfo", 1)
    ratio("rdmadiag_ports", "ibv_devinfo_2", "  rdmadiag ports    / ibv_devinfo", 0)
    ratio("rdmadiag_ports_v", "ibv_devinfo_v", "  rdmadiag ports -v / ibv_devinfo -v", 0)
    exit bad
}' "$work/lab.out" || die "some benchmarked command failed (see above)"
