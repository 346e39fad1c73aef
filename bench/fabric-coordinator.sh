#!/usr/bin/env bash
# fabric-coordinator.sh: the fabric coordinator at scale, by simulation (no lab, no RDMA device needed).
#
# usage: bench/fabric-coordinator.sh [N]     (N simulated ranks, 512 by default)
#
# Runs tests/fabric.rs's scale case with N ranks as threads on loopback TCP behind a stub pair runner:
# rendezvous, N-1 rounds of barriers and the gather. Prints the time and the peak RSS
# (/proc/self/status VmHWM) and fails past its generous bounds. Needs about 5 file descriptors a rank.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RDMADIAG_FABRIC_SIM_RANKS=${1:-512} exec cargo test --quiet --test fabric scale -- --nocapture
