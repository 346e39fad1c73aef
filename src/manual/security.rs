//! The SECURITY sections: who may join a fabric run, use a test port or a server, and what an
//! open server or `--insecure` gives up. One list per subcommand that has a port of its own.

/// (heading, text) items of a subcommand's SECURITY section.
type Items = &'static [(&'static str, &'static str)];

const SERVERS: Items = &[
    (
        "With a key",
        "--key-file FILE (mode 600) or RDMADIAG_KEY on the server: it serves only clients that \
         prove they hold the same key (an HMAC over both ends' nonces, both ways; the key never \
         crosses the wire), and proves it holds it too. A client gives its key the same way.",
    ),
    (
        "Without a key",
        "the server serves whoever connects first, as perftest does: anyone who reaches its port \
         may run tests on its NIC (within --max-size and --max-qps) and, for a one-shot server, \
         take the place of the client it waited for.",
    ),
    (
        "What a client can cost a server",
        "a keyed server gives a connection 3 s to greet and prove itself; a --persist server \
         holds at most 32 connections at once, each with --timeout in all for its greeting and \
         request, at most 8 still greeting from one address; when all are taken one still \
         greeting gives its place up (from the address holding the most, or after 1 s), else \
         the newcomer is told the server is busy. A test's buffer is registered for that \
         test only, with the least remote access its operation needs, never REMOTE_ATOMIC.",
    ),
];

const FABRIC: Items = &[
    (
        "Who can join",
        "only ranks that prove the run's credential when they connect to rank 0; the run refuses \
         to start without one. With --key-file or RDMADIAG_FABRIC_KEY: the key, by an HMAC over a \
         fresh challenge. Under srun without a key: a munge credential restricted to the uid, \
         naming the job step, the rank and the challenge; rank 0 believes the rank only when the \
         credential was made (munge's own ENCODE_HOST) on the node the step placed that rank on \
         (SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, block or cyclic; any node of the step \
         for other distributions), and munged refuses a credential seen before. Every later \
         message, both ways, is HMAC-signed with a sequence number.",
    ),
    (
        "What munge cannot tell",
        "a process of the same uid on the same node, started before that node's rank joins, can \
         take its place, as it could attach to that rank anyway: munge, like Slurm, trusts every \
         process of a uid on a node. The real rank is then refused and named on stderr.",
    ),
    (
        "Test ports",
        "rank 0 gives each pair of each round a fresh key, sent only to its two ranks over their \
         signed connections; a test port serves only the client that proves it, and keeps \
         waiting past anyone else, so an intruder that connects first is refused; each rank \
         reports those it refused to rank 0, which counts them in the report's refused.",
    ),
    (
        "What a client can cost rank 0",
        "lines of at most 64 KiB; at most the ranks still to join + 8 connections waiting at \
         once, each with 10 s in all for its credential and hello, and at most 8 of them from \
         one address, so a flood from one host leaves the other hosts' ranks their places; \
         when every place is taken the address holding the most gives up its oldest, and one \
         alone at its address gives way after 1 s. Refused connections are \
         closed at once and counted in the report (refused: address, reason, count); a rank \
         missing while connections were refused is said to have possibly been kept out by them. \
         Rank 0 raises its open-file limit to fit its ranks, and refuses to start when it cannot.",
    ),
    (
        "--insecure",
        "no credential: anyone who can reach rank 0's port during the rendezvous can join, claim \
         a rank (taking the real one's place) and report forged figures, and test ports serve \
         the first comer. For a lab only.",
    ),
];

const CHECK: Items = &[(
    "--peer",
    "a server started with a key serves only a check that gives the same key (--key-file or \
     RDMADIAG_KEY); against a server without one, whoever reaches it first is served, and a \
     busy server is asked again while --timeout lasts.",
)];

/// The SECURITY items of a subcommand's page (none for those without a port).
pub fn security(subcommand: &str) -> Items {
    match subcommand {
        "fabric" => FABRIC,
        "check" => CHECK,
        "pingpong" | "bw" | "lat" | "write" | "read" => SERVERS,
        _ => &[],
    }
}
