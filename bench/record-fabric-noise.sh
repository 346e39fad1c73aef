#!/usr/bin/env bash
# record-fabric-noise.sh: record the fabric lab's own noise, as ratios the verdict's simulation can replay.
#
# usage: bench/record-fabric-noise.sh [K [OUT]]   (K healthy runs, 4 by default;
#                                                  OUT: tests/data/fabric-lab-noise.json by default)
#
# Builds the debug binary (the one the fabric lab tests run) and copies it aside, then in ONE
# `scripts/lab --hosts 4` clears every impairment (scripts/lib/lab-impair clear) and runs
# `srun -N4 -n4 --ntasks-per-node=1 rdmadiag fabric --json` at its defaults K times, each rank
# through a wrapper that keeps its stdout, stderr and exit status in a directory all guests see
# (rank 0's stdout is the report). From each report's scheduled pairs (`pairs`, the entries not
# `retested`) it takes every bandwidth figure (`bw_gbps` and `bw_gbps_reverse`: both directions)
# over that run's median bandwidth figure, and every `lat_us` over that run's median `lat_us`, and
# writes OUT: {"source": how, when and under what host load it was recorded, "bw_ratio": [...],
# "lat_ratio": [...]} (plain ratios, 4 decimals, in run and pair order). A healthy run may still
# exit 3 (a verdict fooled by the noise): its figures are kept, and the exits are printed and
# named in "source". While the lab runs, this machine is sampled every 5 s for a running rustc
# (a build competing for the cores the guests run on); "source" says how often one was seen.
# Prints each run's pairs and the spread (min, median, max) of both ratio lists.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

k=${1:-4}
out=${2:-tests/data/fabric-lab-noise.json}
[[ $k =~ ^[1-9][0-9]*$ ]] || die "K must be a positive whole number, not '$k'"

cd "$RDMADIAG_ROOT" || die "cannot enter $RDMADIAG_ROOT"
"$RDMADIAG_ROOT/scripts/setup"
use_cargo
cargo build
work=$(mktemp -d /tmp/rdmadiag-noise.XXXXXX)
sampler=""
cleanup() {
    [[ -z $sampler ]] || kill "$sampler" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
# A copy: a build here during the lab run must not swap the binary between runs.
cp "${CARGO_TARGET_DIR:-$RDMADIAG_ROOT/target}/debug/rdmadiag" "$work/rdmadiag"
chmod 755 "$work"

cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/record-fabric-noise.sh (runs on fab1): K healthy fabric runs.
set -u
k=$1 work=$2 root=$3
"$root/scripts/lib/lab-impair" clear || { echo "noise: lab-impair clear failed"; exit 1; }
for ((i = 1; i <= k; i++)); do
    d=$work/run.$i
    mkdir -p "$d"
    start=$SECONDS
    NOISE_BIN=$work/rdmadiag NOISE_DIR=$d timeout 400 srun -N4 -n4 --ntasks-per-node=1 --kill-on-bad-exit=0 \
        bash -c 'r=$SLURM_PROCID; "$NOISE_BIN" fabric --json >"$NOISE_DIR/out.$r" 2>"$NOISE_DIR/err.$r"; echo $? >"$NOISE_DIR/rc.$r"' ||
        echo "noise: run $i: srun exited $?"
    echo "noise: run $i: $((SECONDS - start)) s, exits $(cat "$d"/rc.* 2>/dev/null | tr '\n' ' ')"
done
GUEST

# Sample this machine for a running compiler while the lab runs.
(
    while :; do
        if pgrep -x rustc >/dev/null; then echo busy; else echo idle; fi
        sleep 5
    done
) >"$work/load.samples" 2>/dev/null &
sampler=$!
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
note "$k healthy runs of rdmadiag fabric --json on 4 lab guests (one lab boot)"
started=$(date -u +%Y-%m-%dT%H:%MZ)
t0=$SECONDS
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" --hosts 4 --timeout $((300 + 420 * k)) -- \
    "$(printf '%q ' bash "$work/guest.sh" "$k" "$work" "$RDMADIAG_ROOT")" || lab_rc=$?
lab_s=$((SECONDS - t0))
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=""
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"
note "the lab run took $lab_s s"

mkdir -p "$(dirname "$out")"
python3 - "$work" "$k" "$out" "$started" "$lab_s" "$load_before" "$load_after" "$(nproc)" <<'PY'
import json, os, statistics, sys
work, k, out, started, lab_s, load_before, load_after, cores = sys.argv[1:9]
k = int(k)
bw_ratio, lat_ratio, exits, kept = [], [], [], 0
for i in range(1, k + 1):
    d = os.path.join(work, f"run.{i}")
    rc = open(os.path.join(d, "rc.0")).read().strip() if os.path.exists(os.path.join(d, "rc.0")) else "none"
    exits.append(rc)
    try:
        report = json.load(open(os.path.join(d, "out.0")))
    except (OSError, ValueError) as e:
        err = open(os.path.join(d, "err.0")).read() if os.path.exists(os.path.join(d, "err.0")) else ""
        print(f"run {i}: rank 0 (exit {rc}) printed no report ({e}); its stderr:\n{err}", file=sys.stderr)
        continue
    pairs = [p for p in report["pairs"] if not p.get("retested")]
    bw = [x for p in pairs for x in (p.get("bw_gbps"), p.get("bw_gbps_reverse")) if x is not None]
    lat = [p["lat_us"] for p in pairs if p.get("lat_us") is not None]
    if not bw or not lat:
        print(f"run {i}: no bandwidth or latency figures: {report['pairs']}", file=sys.stderr)
        continue
    kept += 1
    mb, ml = statistics.median(bw), statistics.median(lat)
    print(f"run {i}: rank 0 exit {rc}, {len(pairs)} scheduled pairs, median {mb:.4f} Gb/s, {ml:.0f} us; "
          f"suspects {report['suspects']}")
    for p in pairs:
        print(f"  {p['a']}->{p['b']} {p.get('bw_gbps')}  {p['b']}->{p['a']} {p.get('bw_gbps_reverse')} Gb/s"
              f"  lat {p.get('lat_us')} us")
    bw_ratio += [round(x / mb, 4) for x in bw]
    lat_ratio += [round(x / ml, 4) for x in lat]
if not kept:
    sys.exit("no run gave a report")
samples = open(os.path.join(work, "load.samples")).read().split()
busy = samples.count("busy")
host = (f"this machine ({cores} cores) compiled (rustc running) in {busy} of {len(samples)} samples taken every 5 s"
        if busy else f"this machine ({cores} cores) ran no rustc in any of {len(samples)} samples taken every 5 s")
source = (
    f"bench/record-fabric-noise.sh, {started}: {k} healthy runs (no impairment) of `rdmadiag fabric --json` "
    f"at its defaults (debug build) under `srun -N4 -n4 --ntasks-per-node=1` in one `scripts/lab --hosts 4` "
    f"(4 QEMU TCG guests, Soft-RoCE rxe0, {lab_s} s for the lab run), {kept} reports used (rank 0 exits: "
    f"{', '.join(exits)}); the scheduled pairs only (retests skipped); bw_ratio: every direction's Gb/s over "
    f"its run's median Gb/s figure, lat_ratio: lat_us over its run's median lat_us. Host load: {host}; "
    f"load average {load_before} before, {load_after} after."
)
with open(out, "w") as f:
    # One key a line (the arrays on one line each): short, and diffs stay readable.
    f.write("{\n" + ",\n".join(f" {json.dumps(key)}: {json.dumps(val)}" for key, val in
                                (("source", source), ("bw_ratio", bw_ratio), ("lat_ratio", lat_ratio))) + "\n}\n")
for name, v in (("bw_ratio", bw_ratio), ("lat_ratio", lat_ratio)):
    print(f"{name}: {len(v)} figures, min {min(v):.4f}, median {statistics.median(v):.4f}, max {max(v):.4f}")
print(f"wrote {out}")
PY
