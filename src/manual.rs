//! The hand-written parts of the man pages: examples, other tools' flags, exit status,
//! environment and related tools.
//!
//! Everything else in man/ comes from the clap definition (src/cli.rs). `cargo run --example
//! gen-docs` renders both into man/ and completions/, and tests/docs.rs fails when those files
//! are stale. A subcommand without an entry in [`EXAMPLES`] gets [`DEFAULT_EXAMPLES`], so a new
//! subcommand still gets a complete page; the tests below check that every example parses.

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
        what: "Every subcommand prints one JSON document with --json (schema: \
               rdmadiag-json(7)) and tells the outcome by its exit status:",
        commands: &["rdmadiag ports --json | jq '.ports[] | {device, port, state}'"],
    },
];

/// Examples per subcommand, keyed by the subcommand's name.
pub const EXAMPLES: &[(&str, &[Example])] = &[
    ("devices", DEVICES),
    ("ports", PORTS),
    ("pingpong", PINGPONG),
    ("bw", BW),
    ("lat", LAT),
    ("write", WRITE),
    ("read", READ),
    ("fabric", FABRIC),
];

const FABRIC: &[Example] = &[
    Example {
        what: "Every pair of 64 Slurm nodes, bw both ways and lat, in 63 rounds of 32 pairs; rank \
               0 (on the first node of the step) coordinates and prints the host x host matrices \
               and the suspects:",
        commands: &["srun -N64 --ntasks-per-node=1 rdmadiag fabric"],
    },
    Example {
        what: "Under Open MPI (or Hydra), which give no host list: name rank 0's host:",
        commands: &[
            "mpirun -np 8 --map-by node rdmadiag fabric --coordinator node01 --json > fabric.json",
        ],
    },
    Example {
        what: "Without a launcher: start the same line on every host (ssh, pdsh...); each finds \
               its rank in the list by hostname or address:",
        commands: &["rdmadiag fabric --hosts node[01-04] --tests bw -s 1M -n 1000"],
    },
    Example {
        what: "A quick look at a large fabric (three random matchings, suspects retested), for \
               node_exporter's textfile collector:",
        commands: &[
            "rdmadiag fabric --hosts node[001-512] --pattern quick --prometheus \
             /var/lib/node_exporter/fabric.prom",
        ],
    },
];

const BW: &[Example] = &[
    Example {
        what: "RDMA WRITE bandwidth to a server (the server needs no flags: the client sends the \
               whole test description):",
        commands: &["server$ rdmadiag bw", "client$ rdmadiag bw 10.0.0.1"],
    },
    Example {
        what: "SEND or READ instead, a sweep of sizes from 2 B to 8 MiB, four QPs:",
        commands: &[
            "client$ rdmadiag bw 10.0.0.1 --op send -a",
            "client$ rdmadiag bw 10.0.0.1 --op read -q 4 --sizes 4K,64K,1M",
        ],
    },
    Example {
        what: "Ten seconds per size (-D 10 as perftest, or -D 10s), both directions at once, in \
               MiB/s like perftest:",
        commands: &["client$ rdmadiag bw 10.0.0.1 -D 10 -b --units mib"],
    },
    Example {
        what: "A self-test of one device, no peer needed:",
        commands: &["rdmadiag bw --loopback --op write -s 64K"],
    },
    Example {
        what: "This host's port counters across the run (perftest's -W): what moved, error \
               counters marked:",
        commands: &["client$ rdmadiag bw 10.0.0.1 --counters"],
    },
    Example {
        what: "A health check: exit status 3 (and one line saying by how much) when the link \
               averages less than 90 Gb/s; the rate needs its unit (90Gb/s, 10GB/s, 900MiB/s). \
               The verdict at each size is in the JSON too (thresholds):",
        commands: &[
            "client$ rdmadiag bw 10.0.0.1 -s 1M --expect-bw 90Gb/s",
            "client$ rdmadiag bw 10.0.0.1 --sizes 4K,1M --expect-bw 90Gb/s --expect-size 1M",
            "client$ rdmadiag bw 10.0.0.1 -a --expect-msgrate 10Mpps --expect-size 64 --json | \
             jq '.thresholds[] | select(.ok | not)'",
        ],
    },
    Example {
        what: "One JSON document per run, for scripts:",
        commands: &["client$ rdmadiag bw 10.0.0.1 -a --json | jq '.bw[] | [.size, .bw_avg_gbps]'"],
    },
];

const LAT: &[Example] = &[
    Example {
        what: "RDMA WRITE latency (half the round trip, like ib_write_lat), every percentile:",
        commands: &["server$ rdmadiag lat", "client$ rdmadiag lat 10.0.0.1"],
    },
    Example {
        what: "READ latency is a full round trip; SEND latency half of one; draw the \
               distribution:",
        commands: &[
            "client$ rdmadiag lat 10.0.0.1 --op read --histogram",
            "client$ rdmadiag lat 10.0.0.1 --op send -s 64 -D 10s",
        ],
    },
    Example {
        what: "A self-test of one device, no peer needed:",
        commands: &["rdmadiag lat --loopback --op send"],
    },
    Example {
        what: "A health check: exit status 3 unless the 99th percentile is at most 5 us:",
        commands: &["client$ rdmadiag lat 10.0.0.1 --expect-lat 5us --expect-percentile 99"],
    },
    Example {
        what: "One JSON document per run, for scripts:",
        commands: &["client$ rdmadiag lat 10.0.0.1 --json | jq '.lat[0].p99_us'"],
    },
];

const WRITE: &[Example] = &[
    Example {
        what: "Write a patterned 64 KiB buffer into the server's memory 100 times; the server \
               verifies every byte (a mismatch prints offset, expected and found bytes, and \
               exits 4):",
        commands: &["server$ rdmadiag write", "client$ rdmadiag write 10.0.0.1"],
    },
    Example {
        what: "A self-test of one device with a 4 MiB buffer:",
        commands: &["rdmadiag write --loopback -s 4M -n 10"],
    },
];

const READ: &[Example] = &[
    Example {
        what: "Read the server's patterned buffer and verify every byte here:",
        commands: &[
            "server$ rdmadiag read",
            "client$ rdmadiag read 10.0.0.1 -s 1M",
        ],
    },
    Example {
        what: "A self-test of one device, JSON for scripts:",
        commands: &["rdmadiag read --loopback --json"],
    },
];

/// Examples for a subcommand that has no entry in [`EXAMPLES`] yet: a test that talks to a peer.
pub const DEFAULT_EXAMPLES: &[Example] = &[
    Example {
        what: "A server and a client: start the server first (it serves one client, then \
               exits), then run the client on another host, naming the server:",
        commands: &["server$ rdmadiag {cmd}", "client$ rdmadiag {cmd} 10.0.0.1"],
    },
    Example {
        what: "A self-test on one device, both ends in one process, no peer needed:",
        commands: &["rdmadiag {cmd} --loopback"],
    },
    Example {
        what: "Connect the queue pairs through rdma_cm instead (the server follows the client):",
        commands: &[
            "server$ rdmadiag {cmd}",
            "client$ rdmadiag {cmd} --cm 10.0.0.1",
        ],
    },
    Example {
        what: "One JSON document for scripts (schema: rdmadiag-json(7)):",
        commands: &["rdmadiag {cmd} 10.0.0.1 --json"],
    },
];

const DEVICES: &[Example] = &[
    Example {
        what: "List every RDMA device: GUID, type, firmware, PCI id and how many ports are \
               active (what ibv_devices and ibv_devinfo show, read from sysfs like ibstat: no \
               device is opened, so it answers even when libibverbs cannot):",
        commands: &["rdmadiag devices"],
    },
    Example {
        what: "Show one device only:",
        commands: &["rdmadiag devices -d mlx5_0"],
    },
    Example {
        what: "For scripts: the names of the devices with at least one active port \
               (schema: rdmadiag-json(7)):",
        commands: &[
            "rdmadiag devices --json | jq -r '.devices[] | select(.ports_active > 0) | .name'",
        ],
    },
    Example {
        what: "More detail per port (link layer, speed, netdev MTU, GIDs) is in rdmadiag-ports(1):",
        commands: &["rdmadiag ports -d mlx5_0"],
    },
];

const PORTS: &[Example] = &[
    Example {
        what: "Every port of every device: state, link layer, speed, netdev and its MTU, and the \
               GID table with GID types and IP addresses (ibv_devinfo plus show_gids), from sysfs:",
        commands: &["rdmadiag ports"],
    },
    Example {
        what: "One port of one device (ibv_devinfo -d mlx5_0 -i 1):",
        commands: &["rdmadiag ports -d mlx5_0 -i 1"],
    },
    Example {
        what: "Add the device limits and every port detail, the IB MTUs among them (ibv_devinfo \
               -v; this opens the devices through libibverbs):",
        commands: &["rdmadiag ports -v"],
    },
    Example {
        what: "Add the port counters from sysfs; non-zero error counters are highlighted:",
        commands: &["rdmadiag ports -d mlx5_0 -i 1 --counters"],
    },
    Example {
        what: "For scripts: each port's state, and the GID index rdmadiag uses by default \
               (what -x takes; schema: rdmadiag-json(7)):",
        commands: &[
            "rdmadiag ports --json | jq -r '.ports[] | [.device, .port, .state] | @tsv'",
            "rdmadiag ports -d rxe0 -i 1 --json | jq '.ports[0].default_gid_index'",
        ],
    },
    Example {
        what: "What the counters did over ten seconds (Ctrl-C ends the wait early, exit status \
               130), with rates; error counters that rose are marked:",
        commands: &["rdmadiag ports -d mlx5_0 -i 1 --counters --interval 10s"],
    },
    Example {
        what: "For scripts: the error counters that rose over a minute, port by port:",
        commands: &[
            "rdmadiag ports --counters --interval 1m --json | jq '.ports[] | {device, \
                     port, rose: [.counter_deltas.deltas[] | select(.error and .delta > 0)]}'",
        ],
    },
];

const PINGPONG: &[Example] = &[
    Example {
        what: "A server and a client: start the server first (it waits up to 10 minutes for one \
               client, then exits), then run the client on another host, naming the server:",
        commands: &[
            "server$ rdmadiag pingpong",
            "client$ rdmadiag pingpong 10.0.0.1",
        ],
    },
    Example {
        what: "A self-test on one device, both ends in one process, no peer needed:",
        commands: &[
            "rdmadiag pingpong --loopback",
            "rdmadiag pingpong --loopback -d rxe0 -c UD -s 1024",
        ],
    },
    Example {
        what: "Connect the RC queue pairs through rdma_cm (librdmacm) instead of exchanging \
               them over the control connection; the server follows the client's choice:",
        commands: &[
            "server$ rdmadiag pingpong",
            "client$ rdmadiag pingpong --cm 10.0.0.1",
        ],
    },
    Example {
        what: "Choose the transport, message size and number of round trips, and sleep on \
               completion events instead of polling:",
        commands: &["client$ rdmadiag pingpong 10.0.0.1 -c UD -s 1024 -n 100000 -e"],
    },
    Example {
        what: "Pick the device, port and GID index by hand and print what both ends use:",
        commands: &["client$ rdmadiag pingpong 10.0.0.1 -d mlx5_0 -i 1 -x 3 -v"],
    },
    Example {
        what: "A server that stays up for one client after another, on one address only:",
        commands: &["server$ rdmadiag pingpong --persist --bind 10.0.0.1"],
    },
    Example {
        what: "Against rdma-core's ibv_rc_pingpong as the server (it needs -g with a GID \
               index, see rdmadiag-ports(1)):",
        commands: &[
            "server$ ibv_rc_pingpong -g 1",
            "client$ rdmadiag pingpong --compat ibv 10.0.0.1",
        ],
    },
    Example {
        what: "And with ibv_rc_pingpong as the client:",
        commands: &[
            "server$ rdmadiag pingpong --compat ibv",
            "client$ ibv_rc_pingpong -g 1 10.0.0.1",
        ],
    },
    Example {
        what: "For scripts: the latency percentiles as one JSON document (schema: \
               rdmadiag-json(7)); the exit status tells success from failure:",
        commands: &["client$ rdmadiag pingpong 10.0.0.1 --json | jq '{median_us, p99_us, max_us}'"],
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
         not met; one line on standard error says which and by how much.",
    ),
    (
        exit::DATA_MISMATCH,
        "Data did not arrive as sent: write or read found a transfer whose bytes differ; the \
         transfer, offset, expected and found bytes are on standard error.",
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
        "RDMADIAG_COORDINATOR",
        "fabric: rank 0's HOST[:PORT], as --coordinator (which wins). Read under a launcher \
         that gives no host list (Open MPI, PMIx, Hydra).",
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
                             fix the example (or give `{name}` its own entry) in src/manual.rs"
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
                "src/manual.rs has examples for `{name}`, which src/cli.rs does not define"
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
                        "{} {name} is hidden from --help but not in src/manual.rs's \
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
