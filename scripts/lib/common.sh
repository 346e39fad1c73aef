# shellcheck shell=bash
# common.sh: helpers shared by the scripts in scripts/ and bench/ (sourced, never executed).

# shellcheck disable=SC2034  # (the globals below are used by the scripts that source this file)

# Repository root (this file lives in scripts/lib/).
RDMADIAG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Where the lab keeps its kernel, modules, initramfs and lock file.
LAB_CACHE=${RDMADIAG_LAB_CACHE:-/var/cache/rdmadiag-lab}

# Prefix of messages: the script's path from the repository root, e.g. scripts/test (a script may
# set another after sourcing this file).
PROG=$(basename "$(dirname "$0")")/${0##*/}

# die MESSAGE...: print "PROG: MESSAGE" on stderr and exit 1.
die() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    exit 1
}

# note MESSAGE...: progress message on stderr, prefixed with PROG.
note() {
    printf '%s: %s\n' "$PROG" "$*" >&2
}

# The directories a Rust toolchain is usually installed in (rustup's default, the
# rust Docker image's, and $CARGO_HOME when set).
cargo_bin_dirs() {
    local dirs=()
    [[ -n ${CARGO_HOME:-} ]] && dirs+=("$CARGO_HOME/bin")
    dirs+=("${HOME:-/root}/.cargo/bin" /root/.cargo/bin /usr/local/cargo/bin)
    printf '%s\n' "${dirs[@]}"
}

# use_cargo: put the cargo bin directories on PATH and fail clearly if there is no cargo.
use_cargo() {
    local d
    while read -r d; do
        if [[ -d $d && :$PATH: != *:"$d":* ]]; then
            PATH=$PATH:$d
        fi
    done < <(cargo_bin_dirs)
    export PATH
    command -v cargo >/dev/null ||
        die "no Rust toolchain: cargo is not on PATH nor in $(cargo_bin_dirs | paste -sd' ') (install one with rustup)"
}

# bench_pin: BENCH_PIN as the latency benches take it, checked, into $pin: "SERVER_CPU CLIENT_CPU"
# (default "0 1": every server on vCPU 0, every client on vCPU 1, each tool alike, and each vCPU's
# thread on its own core of this machine: RDMADIAG_LAB_PIN_VCPUS) or "none" (both schedulers').
bench_pin() {
    pin=${BENCH_PIN:-0 1}
    [[ $pin == none || $pin =~ ^[0-9]+\ [0-9]+$ ]] ||
        die "BENCH_PIN is \"SERVER_CPU CLIENT_CPU\" or none, not '$pin'"
    if [[ $pin != none ]]; then
        export RDMADIAG_LAB_PIN_VCPUS=1
    fi
}

# bench_prepare: what every bench/ script does before its lab run: set up (scripts/setup), build
# the release binary, and make a work directory that is removed on exit. Sets $bin and $work.
bench_prepare() {
    cd "$RDMADIAG_ROOT" || die "cannot enter $RDMADIAG_ROOT"
    "$RDMADIAG_ROOT/scripts/setup"
    use_cargo
    cargo build --release
    bin=${CARGO_TARGET_DIR:-$RDMADIAG_ROOT/target}/release/rdmadiag
    work=$(mktemp -d /tmp/rdmadiag-bench.XXXXXX)
    trap 'rm -rf "$work"' EXIT
}
