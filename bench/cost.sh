#!/usr/bin/env bash
# cost.sh: what one operation costs the tool itself: instructions (valgrind's cachegrind, no cache
# simulation) and system calls (strace -f -c), rdmadiag against perftest and ibv_rc_pingpong, on
# rxe0 in one lab guest.
#
# usage: bench/cost.sh     (BENCH_REPEAT=2 runs of each; BENCH_ROWS="lat_write ..." for some
#                           rows only; BENCH_SCALE=1 multiplies every iteration count)
#
# Rows: bw write/send/read at 64 B and 64 KiB (rdmadiag with -l 1, perftest's post list), lat
# write/send/read at 2 B (rdmadiag with -I 0 --timing perftest, as perftest runs on rxe), and
# pingpong at 4 KiB (ibv_rc_pingpong -g 1). Only the client is measured; its server runs plain.
# Each client runs at two iteration counts, N and 3N, and a figure per operation is the
# difference over 2N: start-up and teardown cancel. Every figure is printed for each repeat, so
# the spread shows; the ratio is of the repeats' medians. The latency rows' instructions include
# the wait loop's empty polls, which vary with the guest's timing; so for the latency and
# pingpong rows each client also runs under callgrind (a count per instruction executed) at N
# and 3N, and the instructions the 2N more operations added are split: "wait" is every
# instruction whose executions grew by more than SPIN_PER_OP (4) per operation (the spin on a
# completion or on the last byte and its empty polls; also post-processing that grows faster
# than the count, such as perftest's sort of its samples), "work" the rest (posting, handling the
# completion, taking the sample). Work is what the tool costs; wait only says how long it spun.
# An instruction that ran more than SPIN_PER_OP fewer times per operation in the longer run is
# the spin's too (a wait that happened to be shorter), not negative work.
# The work of each latency and pingpong row's first repeat is also listed by function (object
# and function name: build with CARGO_PROFILE_RELEASE_STRIP=false in another CARGO_TARGET_DIR
# for rdmadiag's names; a stripped binary shows addresses).
# Under TCG only counts (never times) mean anything.
# A benchmark, not a test: it fails only when a run fails, never because of a ratio.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

repeat=${BENCH_REPEAT:-2} scale=${BENCH_SCALE:-1}
all_rows="bw_write_64 bw_send_64 bw_read_64 bw_write_64k bw_send_64k bw_read_64k lat_write lat_send lat_read pingpong"
rows=${BENCH_ROWS:-$all_rows}
for r in $rows; do
    [[ " $all_rows " == *" $r "* ]] || die "BENCH_ROWS lists rows of: $all_rows (not '$r')"
done
for v in "$repeat" "$scale"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT and BENCH_SCALE must be positive whole numbers"
done
if ! command -v valgrind >/dev/null || ! command -v strace >/dev/null; then
    die "bench/cost.sh needs valgrind and strace (apt-get install valgrind strace)"
fi

bench_prepare

cat >"$work/guest.sh" <<'GUEST'
#!/bin/bash
# Guest part of bench/cost.sh: one line per measurement, "sample ROW TOOL MEASURE N VALUE".
repeat=$1 scale=$2 bin=$3 work=$4 rows=$5
port=19500
T=600
# One TSC read per latency sample, as perftest's (the guest's kernel does not list the TSC as
# invariant, and its CLOCK_MONOTONIC is a system call): set here, not with env(1), which
# valgrind would measure instead of the program it execs.
export RDMADIAG_CLOCK=tsc
wait_port() { for _ in $(seq 600); do ss -ltn "sport = :$1" | grep -q LISTEN && return 0; sleep 0.05; done; return 1; }
fail() { echo "bench: $*"; exit 1; }

# measure MEASURE CLIENT...: run CLIENT under the measuring tool; print the total it counted.
measure() {
    local how=$1; shift
    case $how in
        syscalls)
            timeout $T strace -f -c -o "$work/strace.out" "$@" >"$work/client.out" 2>&1 ||
                fail "$* failed under strace: $(tail -5 "$work/client.out")"
            awk '$NF == "total" { print ($4 ~ /^[0-9]+$/) ? $4 : $3 }' "$work/strace.out" ;;
        instructions)
            timeout $T valgrind --tool=cachegrind --cache-sim=no --vgdb=no --cachegrind-out-file=/dev/null \
                "$@" >"$work/client.out" 2>"$work/valgrind.err" ||
                fail "$* failed under valgrind: $(tail -5 "$work/valgrind.err")"
            sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$work/valgrind.err" | tr -d , | tail -1 ;;
        split)
            # Every instruction's count, kept for the host to split into work and wait.
            local out="$work/callgrind.$row.$tool.$n.$k"
            timeout $T valgrind --tool=callgrind --vgdb=no --dump-instr=yes --compress-pos=no \
                --compress-strings=no --callgrind-out-file="$out" \
                "$@" >"$work/client.out" 2>"$work/valgrind.err" ||
                fail "$* failed under callgrind: $(tail -5 "$work/valgrind.err")"
            echo "$out" ;;
    esac
}

# run ROW TOOL MEASURE N: a plain server and a measured client of ROW's TOOL at N iterations.
run() {
    local row=$1 tool=$2 how=$3 n=$4 op size server client
    port=$((port + 1))
    case $row in
        bw_*) op=${row#bw_}; size=${op#*_}; op=${op%_*}; [[ $size == 64k ]] && size=65536 ;;
        lat_*) op=${row#lat_}; size=2 ;;
        pingpong) size=4096 ;;
    esac
    case $row/$tool in
        bw_*/rdmadiag)
            server=("$bin" bw -p $port --timeout 120s)
            client=("$bin" bw 10.77.0.1 -p $port --timeout 120s --op "$op" -s "$size" -n "$n" -l 1) ;;
        bw_*/peer)
            server=("ib_${op}_bw" -x 1 -p $port -s "$size" -n "$n")
            client=("ib_${op}_bw" -x 1 -p $port -s "$size" -n "$n" 10.77.0.1) ;;
        lat_*/rdmadiag)
            server=("$bin" lat -p $port --timeout 120s)
            client=("$bin" lat 10.77.0.1 -p $port --timeout 120s --op "$op" -s 2 -n "$n" -I 0 --timing perftest) ;;
        lat_*/peer)
            server=("ib_${op}_lat" -x 1 -p $port -s 2 -n "$n")
            client=("ib_${op}_lat" -x 1 -p $port -s 2 -n "$n" 10.77.0.1) ;;
        pingpong/rdmadiag)
            server=("$bin" pingpong -p $port -s "$size" -n "$n" --timeout 120s)
            client=("$bin" pingpong 10.77.0.1 -p $port -s "$size" -n "$n" --timeout 120s) ;;
        pingpong/peer)
            server=(ibv_rc_pingpong -g 1 -p $port -s "$size" -n "$n")
            client=(ibv_rc_pingpong -g 1 -p $port -s "$size" -n "$n" 10.77.0.1) ;;
    esac
    timeout $T "${server[@]}" >"$work/server.out" 2>&1 &
    local spid=$!
    wait_port $port || fail "${server[*]} did not start: $(cat "$work/server.out")"
    local v
    v=$(measure "$how" "${client[@]}") || { echo "$v"; exit 1; }
    wait $spid || fail "${server[*]} failed: $(tail -5 "$work/server.out")"
    [[ -n $v ]] || fail "no $how count for ${client[*]}"
    if [[ $how == split ]]; then echo "split $row $tool $n $v"; else echo "sample $row $tool $how $n $v"; fi
    if [[ $n == "$5" ]]; then echo "cmd $row $tool ${client[*]}"; fi
}

base() {
    case $1 in
        bw_*_64) echo 2000 ;;
        bw_*_64k) echo 100 ;;
        lat_*) echo 500 ;;
        pingpong) echo 200 ;;
    esac
}

for ((k = 0; k < repeat; k++)); do
    for row in $rows; do
        n1=$(($(base "$row") * scale))
        n3=$((3 * n1))
        hows="syscalls instructions"
        [[ $row == bw_* ]] || hows+=" split"
        for how in $hows; do
            for tool in rdmadiag peer; do
                run "$row" "$tool" "$how" "$n1" "$n1"
                run "$row" "$tool" "$how" "$n3" "$n1"
            done
        done
        echo "round $k $row done" >&2
    done
done
GUEST

note "instructions and system calls per operation ($repeat repeats; rows: $rows) in the lab"
lab_rc=0
"$RDMADIAG_ROOT/scripts/lab" --timeout 5400 -- \
    "$(printf '%q ' bash "$work/guest.sh" "$repeat" "$scale" "$bin" "$work" "$rows")" \
    >"$work/lab.out" 2>&1 || lab_rc=$?
grep -v -e '^sample ' -e '^cmd ' "$work/lab.out" >&2 || true
((lab_rc == 0)) || die "the lab run failed (exit $lab_rc)"

python3 - "$work/lab.out" "$rows" <<'PY'
import statistics, sys
# (row, tool, measure) -> {n: [values, one per repeat]}
SPIN_PER_OP = 4

def profile(path):
    """Each instruction's execution count in a callgrind profile (its Ir: one per execution)."""
    counts, names, ob, fn, skip = {}, {}, None, None, False
    for line in open(path):
        if skip:
            skip = False
        elif line.startswith("ob="):
            ob = line[3:].strip()
        elif line.startswith("fn="):
            fn = line[3:].strip()
        elif line.startswith("calls="):
            skip = True  # the next line is the call's inclusive cost, counted in the callee
        elif line.startswith("0x"):
            addr, _line, ir = line.split()[:3]
            counts[(ob, addr)] = counts.get((ob, addr), 0) + int(ir)
            names[(ob, addr)] = (ob.rsplit("/", 1)[-1], fn)
    return counts, names

def split(short, long, ops):
    """(work, wait) instructions per operation between two profiles `ops` operations apart: an
    instruction whose executions grew by more than SPIN_PER_OP per operation is a spin's (or
    post-processing that grows faster than the count, like a sort of the samples)."""
    (a, _), (b, names) = profile(short), profile(long)
    work = wait = 0
    by_fn = {}
    for key in set(a) | set(b):
        grown = b.get(key, 0) - a.get(key, 0)
        if abs(grown) > SPIN_PER_OP * ops:
            wait += grown
        else:
            work += grown
            name = names.get(key, ("?", "?"))
            by_fn[name] = by_fn.get(name, 0) + grown
    return work / ops, wait / ops, {k: v / ops for k, v in by_fn.items()}

runs, cmds, profiles = {}, {}, {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 6 and p[0] == "sample":
        runs.setdefault((p[1], p[2], p[3]), {}).setdefault(int(p[4]), []).append(int(p[5]))
    elif len(p) == 5 and p[0] == "split":
        profiles.setdefault((p[1], p[2]), {}).setdefault(int(p[3]), []).append(p[4])
    elif len(p) > 3 and p[0] == "cmd":
        cmds.setdefault((p[1], p[2]), " ".join(p[3:]))
# Work and wait per operation, each repeat, from the two profiles of that repeat (N and 3N).
split_per, work_fns = {}, {}
for (row, tool), by_n in profiles.items():
    n1, n3 = sorted(by_n)
    for short, long in zip(by_n[n1], by_n[n3]):
        work, wait, by_fn = split(short, long, n3 - n1)
        work_fns.setdefault((row, tool), by_fn)
        split_per.setdefault((row, tool, "work"), []).append(work)
        split_per.setdefault((row, tool, "wait"), []).append(wait)
peer = lambda row: "ibv_rc_pingpong" if row == "pingpong" else "perftest"
print("\nper operation: (count at 3N - count at N) / 2N, each repeat; ratio of the medians "
      "(goal <= 1.00)\n")
print(f"{'row':<14}{'measure':<14}{'rdmadiag per op':>28}{'peer per op':>28}{'ratio':>8}")
for row in sys.argv[2].split():
    hows = ("instructions", "syscalls") if row.startswith("bw_") else ("instructions", "work", "wait", "syscalls")
    for how in hows:
        per = {}
        for tool in ("rdmadiag", "peer"):
            if how in ("work", "wait"):
                per[tool] = split_per.get((row, tool, how)) or sys.exit(f"no {how} for {row} {tool}")
                continue
            by_n = runs.get((row, tool, how))
            if not by_n or len(by_n) != 2:
                sys.exit(f"no {how} samples for {row} {tool}")
            n1, n3 = sorted(by_n)
            per[tool] = [(b - a) / (n3 - n1) for a, b in zip(by_n[n1], by_n[n3])]
        fmt = lambda v: "/".join(f"{x:.2f}" if how == "syscalls" else f"{x:.0f}" for x in v)
        o, t = statistics.median(per["rdmadiag"]), statistics.median(per["peer"])
        ratio = f"{o / t:.2f}" if t > 0 else ("=" if o == t else "inf")
        print(f"{row:<14}{how:<14}{fmt(per['rdmadiag']):>28}{fmt(per['peer']):>28}{ratio:>8}")
print("\nwork per operation by function (first repeat; the 12 largest, object and function):")
for row in sys.argv[2].split():
    for tool in ("rdmadiag", "peer"):
        fns = work_fns.get((row, tool))
        if not fns:
            continue
        top = sorted(fns.items(), key=lambda kv: -kv[1])[:12]
        print(f"  {row} {tool}: " + "; ".join(f"{fn} ({ob}) {v:.0f}" for (ob, fn), v in top if v >= 1))
print("\npeer tools: perftest (ib_*_bw, ib_*_lat) and ibv_rc_pingpong; rdmadiag ran with "
      "RDMADIAG_CLOCK=tsc (one TSC read per latency sample, as perftest); client command lines at N:")
for row in sys.argv[2].split():
    for tool in ("rdmadiag", "peer"):
        print(f"  {row:<14}{cmds.get((row, tool), '?')}")
PY
