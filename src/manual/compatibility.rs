//! The COMPATIBILITY sections: which other tools a subcommand speaks to on their own wire, which
//! of their versions were run against, and how the two kinds of peer are told apart.

/// (heading, text) items of a subcommand's COMPATIBILITY section.
type Items = &'static [(&'static str, &'static str)];

const PINGPONG: Items = &[(
    "--compat ibv",
    "speaks rdma-core's ibv_rc_pingpong and ibv_ud_pingpong exchange (a 52-byte address \
     message each way, then \"done\"), as client or one-shot server; the peer needs -g with a \
     GID index on RoCE. Run against rdma-core 44 (Debian 12) in the lab.",
)];

const BW: Items = &[
    (
        "--compat perftest",
        "the client speaks perftest's out-of-band exchange to an unmodified ib_write_bw, \
         ib_read_bw, ib_send_bw or ib_atomic_bw server (RC or UC WRITE, RC READ, RC SEND, RC \
         atomics: --op atomic-fadd for -A FETCH_AND_ADD, atomic-cswap for CMP_AND_SWAP; one \
         direction, any -q): the 16-byte \
         version, the system data and MTU (both sides use the smaller), one key message per QP \
         at each of perftest's handshakes (with the GID on RoCE, without on InfiniBand, where \
         the server must not be given -x), the bw report and the close. ib_write_bw's and \
         ib_read_bw's server prints this side's figures, in MB/s; ib_send_bw's measures what it \
         receives (no report is swapped) and counts its own -n messages per QP, so give both \
         sides the same -n. Start the server with -s at least this side's largest size (or \
         -a): its buffer is registered for its own -s, and a larger transfer fails with a line \
         naming -s. Like perftest's client, for sizes up to half the cycle buffer (the larger \
         page size of the two hosts) the local bytes and remote address step through that \
         buffer by the size rounded up to a cache line: per operation with -l 1, and with a \
         post list request i always at position i, as perftest lays out its lists (the \
         settings line and JSON's address_steps say so). ib_atomic_bw's server leaves random bytes in its targets: this side reads \
         every word its operations step through before the run and checks after it that \
         their sum grew by the fetch-and-adds completed (compare-and-swap 0 for 0: \
         unchanged), exit 4 otherwise.",
    ),
    (
        "Serving perftest clients",
        "a one-shot bw server (no HOST, no --persist) also serves one ib_write_bw, ib_read_bw, \
         ib_send_bw or ib_atomic_bw client, with no extra flag. The two are told apart by the first 8 bytes the client \
         sends: rdmadiag's greeting starts with its magic, perftest's with its version as text \
         (\"6.06\" and NULs). perftest's client never says which test it runs, so the server \
         runs the test of its own flags: start it with the --op, -c and -q the ib_*_bw server it \
         replaces was given (-s is the least buffer; a larger -s on the client fails there). For \
         WRITE and READ it prints the client's figures (text or --json, with compat), as \
         perftest's server does, taking them as MB/s (perftest's default; a client run with --report_gbits sends Gb/s); for \
         SEND what it received, counting -n messages per QP (as perftest's server). After an \
         ib_atomic_bw client's run (-n, not -D: perftest's -D adds a warm-up it does not count) \
         the sum of its buffers' 8-byte words must be the count the client reported (its \
         adds, stepped through the buffer) or 0 (its compare-and-swaps, 0 for 0): exit 4 \
         otherwise. \
         A client of another test, or with more QPs than -q, ends the server with one line \
         naming the flag. A server with a key (--key-file, RDMADIAG_KEY) serves no perftest \
         client, which cannot prove it: it logs the refusal and waits on for a client that can.",
    ),
    (
        "Versions",
        "run against perftest 6.06 (Debian 12's perftest 4.5-0.17) in the lab, both roles. The \
         exchange is the same in every perftest from 5.70 to 6.27 and with 6.29 and later, \
         which do not negotiate with a peer that claims 6.06 (this side does); those are proven \
         only by unit tests of the bytes. perftest 6.28 as released always starts a binary \
         parameter negotiation and is refused by name. Peers before 5.70 are refused, as \
         perftest refuses them.",
    ),
    (
        "Timeouts",
        "perftest's peers wait forever; this side bounds every wait by --timeout, except the \
         server's wait for a perftest client's run to end, which perftest makes in silence: at \
         most one hour.",
    ),
    (
        "Not yet",
        "UC and UD SEND, -b, -D with SEND and rdma_cm (-R) against perftest, and perftest \
         clients of a --persist server (which names them on one line and goes on). Serving \
         a perftest client, this side's receives land at one address (perftest's server steps \
         them too).",
    ),
];

const LAT: Items = &[
    (
        "--compat perftest",
        "the client speaks perftest's exchange to an unmodified ib_write_lat, ib_read_lat, \
         ib_atomic_lat or ib_send_lat server (RC or UC WRITE, RC READ, atomics and SEND), in \
         the order of those tests (one more handshake before the per-QP keys but for \
         ib_send_lat; ib_write_lat has no close). SEND is a ping-pong of -s byte messages, the \
         client first, -n each way with no last-message mark. WRITE is perftest's ping-pong: \
         each side writes -s bytes into the other's landing zone and waits for the last byte to \
         become the iteration number's low byte, the server first. Both sides must be given \
         the same -s and -n: perftest's peers then wait forever, this side for --timeout, \
         then names both settings. One size a run (not -a, --sizes or -D). Atomics start from \
         what ib_atomic_lat's random target holds (read first): every returned value is \
         checked against that chain, and the target after the run.",
    ),
    (
        "Serving perftest clients",
        "a one-shot lat server (no HOST, no --persist) also serves one ib_write_lat, \
         ib_read_lat, ib_atomic_lat or ib_send_lat client, told apart from rdmadiag's by its \
         first bytes (its version as text), with this server's own --op, -s and -n. Against \
         ib_write_lat and ib_send_lat it prints its own samples (the time between its \
         messages, half of it as perftest's server does); against \
         ib_read_lat and ib_atomic_lat nothing (the operations need nothing of it), as \
         perftest's server; after ib_atomic_lat's -n operations its target must hold -n \
         (fetch-and-add) or 0 (compare-and-swap 0 for 0), exit 4 otherwise.",
    ),
    (
        "Versions",
        "run against perftest 6.06 (Debian 12's) in the lab, both roles; see rdmadiag-bw(1) for \
         the others. Not yet: UC and UD SEND (ib_send_lat -c UC|UD).",
    ),
];

/// The COMPATIBILITY items of a subcommand's page (none for those that speak only rdmadiag).
pub fn compatibility(subcommand: &str) -> Items {
    match subcommand {
        "pingpong" => PINGPONG,
        "bw" => BW,
        "lat" => LAT,
        _ => &[],
    }
}
