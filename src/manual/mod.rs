//! The hand-written parts of the man pages: examples, other tools' flags, exit status,
//! security, environment and related tools.
//!
//! Everything else in man/ comes from the clap definition (src/cli/). `cargo run --example
//! gen-docs` renders both into man/ and completions/, and tests/docs.rs fails when those files
//! are stale. A subcommand without an entry in [`EXAMPLES`] gets [`DEFAULT_EXAMPLES`], so a new
//! subcommand still gets a complete page; the tests below check that every example parses.

mod compatibility;
mod examples;
mod security;

pub use compatibility::compatibility;
pub use examples::{DEFAULT_EXAMPLES, EXAMPLES};
pub use security::security;

use crate::exit;

/// One example: what it shows, then the command lines. A line may start with a prompt naming
/// the host it runs on (`server$ `, `client$ `); `{cmd}` stands for the subcommand's name.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    pub what: &'static str,
    pub commands: &'static [&'static str],
}

/// Examples on rdmadiag(1): one tour of the subcommands.
pub const OVERVIEW_EXAMPLES: &[Example] = &[
    Example {
        what: "What RDMA devices this host has, and the state of their ports:",
        commands: &["rdmadiag devices", "rdmadiag ports"],
    },
    Example {
        what: "Is the fabric path to another host healthy? Start a server there, then measure \
               round trips from here:",
        commands: &[
            "server$ rdmadiag pingpong",
            "client$ rdmadiag pingpong 10.0.0.1",
        ],
    },
    Example {
        what: "A self-test of one device, no peer needed:",
        commands: &["rdmadiag pingpong --loopback"],
    },
    Example {
        what: "A node health check for Slurm, NHC-style scripts or Prometheus: every port ACTIVE \
               at 400 Gb/s, nothing printed unless something failed (rdmadiag-check(1)):",
        commands: &["rdmadiag check --expect-rate 400 --format nhc"],
    },
    Example {
        what: "Every subcommand prints one JSON document with --json (schema: \
               rdmadiag-json(7)) and tells the outcome by its exit status:",
        commands: &["rdmadiag ports --json | jq '.ports[] | {device, port, state}'"],
    },
];

/// The examples for a subcommand (its own, or [`DEFAULT_EXAMPLES`]).
pub fn examples(subcommand: &str) -> &'static [Example] {
    EXAMPLES
        .iter()
        .find(|(name, _)| *name == subcommand)
        .map_or(DEFAULT_EXAMPLES, |(_, examples)| examples)
}

/// A command line of an example with `{cmd}` replaced by the subcommand's name.
pub fn expand(line: &str, subcommand: &str) -> String {
    line.replace("{cmd}", subcommand)
}

/// Flags of the tools rdmadiag replaces that it accepts without showing them in `--help`:
/// (flag as written, what it does here, the subcommands that take it).
pub const OTHER_TOOLS_FLAGS: &[(&str, &str, &[&str])] = &[
    (
        "-R",
        "perftest's rdma_cm switch: the same as --cm.",
        TEST_COMMANDS,
    ),
    (
        "-m MTU",
        "perftest's and ibv_rc_pingpong's path MTU: the same as --mtu.",
        TEST_COMMANDS,
    ),
    (
        "-F, --CPU-freq",
        "perftest's \"do not fail on CPU frequency scaling\": accepted; rdmadiag has no such \
         check, so there is nothing to silence.",
        &["bw", "lat"],
    ),
    (
        "--report_gbits",
        "perftest's Gb/s switch: accepted; Gb/s is already the unit (--units mib for MiB/s).",
        &["bw", "lat"],
    ),
    (
        "-w GBPS, --limit_bw GBPS",
        "perftest's bandwidth limit: the same as --expect-bw, where a bare number is Gb/s \
         (-w 90 is --expect-bw 90Gb/s).",
        &["bw"],
    ),
    (
        "-y MPPS, --limit_msgrate MPPS",
        "perftest's message-rate limit: the same as --expect-msgrate, where a bare number is \
         Mpps (-y 10 is --expect-msgrate 10Mpps).",
        &["bw"],
    ),
    (
        "-A TYPE, --atomic_type TYPE",
        "perftest's atomic type (ib_atomic_bw, ib_atomic_lat): -A FETCH_AND_ADD is --op \
         atomic-fadd, -A CMP_AND_SWAP is --op atomic-cswap (8 bytes, RC).",
        &["bw", "lat"],
    ),
    (
        "-p PORT",
        "what this command took for -i before: still the port of the device.",
        &["ports"],
    ),
];

/// The subcommands that talk to a peer.
const TEST_COMMANDS: &[&str] = &["pingpong", "bw", "lat", "write", "read"];

/// What the section of other tools' flags says first, on a subcommand's page.
pub fn other_tools_intro(subcommand: &str) -> &'static str {
    match subcommand {
        "ports" => "Letters that this command accepts but --help does not show.",
        "bw" | "lat" => {
            "Letters of perftest (ib_*_bw, ib_*_lat) and ibv_rc_pingpong that this command \
             accepts but --help does not show. As in perftest, -D takes seconds as a bare \
             number (-D 10), -a sweeps 2 B to 8 MiB, and -s, -n, -c, -d, -i, -x, -p and -I mean \
             what they mean there (bw also -q, -t, -Q, -l, -o and -b)."
        }
        _ => {
            "Letters of perftest and ibv_rc_pingpong that this command accepts but --help does \
             not show."
        }
    }
}

/// The other tools' flags one subcommand accepts.
pub fn other_tools_flags(subcommand: &str) -> Vec<(&'static str, &'static str)> {
    OTHER_TOOLS_FLAGS
        .iter()
        .filter(|(_, _, subs)| subs.contains(&subcommand))
        .map(|(flag, what, _)| (*flag, *what))
        .collect()
}

/// EXIT STATUS, on every page.
pub const EXIT_STATUS: &[(u8, &str)] = &[
    (exit::OK, "Success."),
    (
        exit::FAILURE,
        "Runtime failure: no RDMA device, an unknown device or port, a verbs error, a peer that \
         refused, vanished or timed out. The reason is one line on standard error.",
    ),
    (
        exit::USAGE,
        "Usage error: an unknown flag, a bad value or a combination that cannot work.",
    ),
    (
        exit::THRESHOLD,
        "The command ran, but a health threshold given on the command line (--expect-*) was \
         not met, or a check of rdmadiag check failed; one line on standard error says which \
         and by how much.",
    ),
    (
        exit::DATA_MISMATCH,
        "Data did not arrive as sent: write or read found a transfer whose bytes differ (the \
         transfer, offset, expected and found bytes are on standard error), or an atomic bw or \
         lat test found the server's 8-byte target or a returned value not as its operations \
         left it (expected and found values on standard error).",
    ),
    (
        exit::INTERRUPTED,
        "Interrupted by SIGINT (Ctrl-C): the test stopped, released its queue pairs and memory, \
         and said so on standard error. A second Ctrl-C exits at once.",
    ),
    (
        exit::TERMINATED,
        "Stopped by SIGTERM (timeout(1), a batch scheduler ending the job): stopped and \
         cleaned up as for SIGINT.",
    ),
];

/// ENVIRONMENT, on rdmadiag(1).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "NO_COLOR",
        "When set and not empty, tables are drawn without colour (https://no-color.org). \
         TERM=dumb does the same. Tables get boxes and colour only when standard output is a \
         terminal; on a pipe they are plain columns.",
    ),
    (
        "RDMADIAG_CLOCK",
        "lat, write, read and pingpong: monotonic takes every latency sample from \
         CLOCK_MONOTONIC instead of the CPU's counter (the TSC where the kernel lists it as \
         constant_tsc and nonstop_tsc, aarch64's virtual counter), to compare the two; tsc \
         takes the TSC even where the CPU does not list it as invariant (as perftest always \
         does; still calibrated against CLOCK_MONOTONIC_RAW, reported as tsc_forced): for \
         benchmarks in a virtual machine whose kernel keeps the TSC from its clocksource. The \
         clock used is in the settings line and JSON's clock.",
    ),
    (
        "RDMADIAG_COORDINATOR",
        "fabric: rank 0's HOST[:PORT], as --coordinator (which wins). Read under a launcher \
         that gives no host list (Open MPI, PMIx, Hydra).",
    ),
    (
        "RDMADIAG_FABRIC_KEY",
        "fabric: the run's shared key (at least 16 bytes, the same on every rank), when \
         --key-file names none: each rank proves it holds it, and every message of the run \
         carries an HMAC-SHA256 under a key drawn from it for that connection. Under srun \
         without it the ranks prove themselves with munge (a credential of the same uid and job \
         step, munged's socket /run/munge/munge.socket.2). Forward it to every rank: mpirun -x \
         RDMADIAG_FABRIC_KEY, srun --export=ALL (the default).",
    ),
    (
        "SLURM_JOB_ID, SLURM_STEP_ID",
        "fabric under srun with munge: the job step every rank's credential must name; a \
         credential of another job, step or uid, or one seen before, is refused. Rank 0 reads \
         SLURM_STEP_TASKS_PER_NODE and SLURM_DISTRIBUTION too: a credential speaks only for the \
         ranks of the node that made it (see SECURITY in rdmadiag-fabric(1)).",
    ),
    (
        "SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_NTASKS, SLURM_STEP_NODELIST",
        "fabric under srun: the rank, the number of ranks (the step's, else the job's) and the \
         hosts, whose first is the coordinator. Open MPI's OMPI_COMM_WORLD_RANK and \
         OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK and Hydra's PMI_RANK and PMI_SIZE give the rank \
         and size under mpirun.",
    ),
];

/// The other tools in SEE ALSO, on every page: (name, manual section).
pub const SEE_ALSO: &[(&str, &str)] = &[
    ("rdmadiag-json", "7"),
    ("ibv_devices", "1"),
    ("ibv_devinfo", "1"),
    ("ibv_rc_pingpong", "1"),
    ("ibv_ud_pingpong", "1"),
    ("ib_send_lat", "1"),
    ("ib_send_bw", "1"),
    ("ib_write_lat", "1"),
    ("ib_write_bw", "1"),
    ("ib_read_lat", "1"),
    ("ib_read_bw", "1"),
    ("qperf", "1"),
    ("rdma", "8"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::{CommandFactory, Parser};

    /// The rdmadiag arguments of an example line: without its prompt, up to a pipe or redirection;
    /// None for a line that runs another tool.
    fn rdmadiag_args(line: &str) -> Option<Vec<String>> {
        let line = line.split_once("$ ").map_or(line, |(_, rest)| rest);
        let line = line.split(['|', '>']).next().unwrap();
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        (words.first().map(String::as_str) == Some("rdmadiag")).then_some(words)
    }

    #[test]
    fn every_example_parses_with_the_real_cli() {
        let cli = Cli::command();
        let mut pages = vec![("rdmadiag", OVERVIEW_EXAMPLES)];
        for sub in cli.get_subcommands() {
            pages.push((sub.get_name(), examples(sub.get_name())));
        }
        for (name, list) in pages {
            for ex in list {
                for line in ex.commands {
                    let line = expand(line, name);
                    let Some(args) = rdmadiag_args(&line) else {
                        continue;
                    };
                    if let Err(e) = Cli::try_parse_from(&args) {
                        panic!(
                            "man page example for `{name}` does not parse: {line}\n{e}\n\
                             fix the example (or give `{name}` its own entry) in src/manual/examples.rs"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn table_names_only_real_subcommands() {
        let cmd = Cli::command();
        for (name, _) in EXAMPLES {
            assert!(
                cmd.find_subcommand(name).is_some(),
                "src/manual/examples.rs has examples for `{name}`, which src/cli/ does not define"
            );
        }
    }

    #[test]
    fn every_page_has_examples_and_every_exit_code_is_documented() {
        for sub in Cli::command().get_subcommands() {
            assert!(!examples(sub.get_name()).is_empty());
        }
        let codes: Vec<u8> = EXIT_STATUS.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            codes,
            [
                exit::OK,
                exit::FAILURE,
                exit::USAGE,
                exit::THRESHOLD,
                exit::DATA_MISMATCH,
                exit::INTERRUPTED,
                exit::TERMINATED
            ]
        );
        // --help says the same codes in one line.
        for (code, _) in EXIT_STATUS {
            assert!(
                crate::cli::EXIT_CODES_HELP.contains(&format!(" {code} ")),
                "--help does not name exit code {code}"
            );
        }
    }

    #[test]
    fn every_hidden_flag_is_documented_and_parses() {
        for sub in Cli::command().get_subcommands() {
            let documented = other_tools_flags(sub.get_name());
            for arg in sub.get_arguments().filter(|a| a.is_hide_set()) {
                let names: Vec<String> = arg
                    .get_short()
                    .map(|c| format!("-{c}"))
                    .into_iter()
                    .chain(arg.get_long().map(|l| format!("--{l}")))
                    .collect();
                for name in &names {
                    assert!(
                        documented
                            .iter()
                            .any(|(flag, _)| flag.split([',', ' ']).any(|w| w == name)),
                        "{} {name} is hidden from --help but not in src/manual/mod.rs's \
                         OTHER_TOOLS_FLAGS",
                        sub.get_name()
                    );
                }
            }
            // Every documented letter parses on that subcommand (with a value where it takes one).
            for (flag, _) in documented {
                let mut words = flag.split(", ").next().unwrap().split(' ');
                let mut args = vec!["rdmadiag", sub.get_name(), "10.0.0.1"];
                if sub.get_name() == "ports" {
                    args.pop();
                }
                args.push(words.next().unwrap());
                let value = match words.next() {
                    Some("MTU") => Some("1024"),
                    Some("TYPE") => Some("FETCH_AND_ADD"),
                    Some(_) => Some("1"),
                    None => None,
                };
                args.extend(value);
                if let Err(e) = Cli::try_parse_from(&args) {
                    panic!("{args:?}: {e}");
                }
            }
        }
    }
}
