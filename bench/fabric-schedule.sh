#!/usr/bin/env bash
# fabric-schedule.sh: time the all-pairs schedule of `rdmadiag fabric` for a large fabric (no lab needed).
#
# usage: bench/fabric-schedule.sh [N]     (N hosts, 4096 by default; target: well under a second)
#
# Builds and runs examples/fabric-schedule.rs with optimisations: it builds all N-1 rounds of N/2 pairs,
# prints the time, and checks every pair once and no host twice in a round.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec cargo run --quiet --profile bench --example fabric-schedule -- "${1:-4096}"
