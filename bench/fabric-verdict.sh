#!/usr/bin/env bash
# fabric-verdict.sh: the fabric verdict's simulation table at fleet scale (no lab needed).
#
# usage: bench/fabric-verdict.sh [N[,N...]] [all-pairs|quick]   (4096 hosts, all-pairs by default)
#
# Runs tests/fabric_verdict.rs (the same cases and goals as `cargo test`: a healthy fabric, 1 host
# at 50 % and 80 %, 2 % of hosts at 70 %, 1 link at 50 %, a switch of 8, 1 host sending at 50 %,
# at +-5 % and +-20 % noise, retests included) with optimisations, for N hosts and one seed, and
# prints each case's suspects found, missed and named falsely. 4096 hosts all-pairs are 8.4 million
# pairs: about 3 GB of memory. Exits non-zero when a case misses its goal.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS
RDMADIAG_VERDICT_SIM_N=${1:-4096} RDMADIAG_VERDICT_SIM_PATTERN=${2:-all-pairs} RDMADIAG_VERDICT_SIM_SEEDS=${RDMADIAG_VERDICT_SIM_SEEDS:-1} \
    cargo test --quiet --profile bench --test fabric_verdict -- --nocapture --exact \
    the_verdict_finds_every_planted_fault_and_no_false_suspect_up_to_512_hosts
echo "fabric-verdict.sh: ${1:-4096} hosts (${2:-all-pairs}) judged in $((SECONDS - start)) s, build included"
