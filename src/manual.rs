//! The hand-written parts of the man pages: each subcommand's examples, the exit status, the
//! environment and the related tools.
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
        what: "Every subcommand prints one JSON document with --json (schema: docs/json.md in \
               the source) and tells the outcome by its exit status:",
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
        what: "Ten seconds per size, both directions at once, in MiB/s like perftest:",
        commands: &["client$ rdmadiag bw 10.0.0.1 -D 10s -b --units mib"],
    },
    Example {
        what: "A self-test of one device, no peer needed:",
        commands: &["rdmadiag bw --loopback --op write -s 64K"],
    },
    Example {
        what: "A health check: exit status 3 (and one line saying by how much) when the link \
               averages less than 90 Gb/s:",
        commands: &["client$ rdmadiag bw 10.0.0.1 -s 1M --expect-bw 90Gb/s"],
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
               exits 1):",
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
        what: "One JSON document for scripts (schema: docs/json.md in the source):",
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
               (schema: docs/json.md in the source):",
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
        commands: &["rdmadiag ports -d mlx5_0 -p 1"],
    },
    Example {
        what: "Add the device limits and every port detail, the IB MTUs among them (ibv_devinfo \
               -v; this opens the devices through libibverbs):",
        commands: &["rdmadiag ports -v"],
    },
    Example {
        what: "Add the port counters from sysfs; non-zero error counters are highlighted:",
        commands: &["rdmadiag ports -d mlx5_0 -p 1 --counters"],
    },
    Example {
        what: "For scripts: each port's state, and the GID index rdmadiag uses by default \
               (what -x takes; schema: docs/json.md in the source):",
        commands: &[
            "rdmadiag ports --json | jq -r '.ports[] | [.device, .port, .state] | @tsv'",
            "rdmadiag ports -d rxe0 -p 1 --json | jq '.ports[0].default_gid_index'",
        ],
    },
    Example {
        what: "Error counters as JSON, to compare before and after a test:",
        commands: &["rdmadiag ports --counters --json | jq '.ports[] | {device, port, counters}'"],
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
        what: "For scripts: the latency percentiles as one JSON document (schema: docs/json.md \
               in the source); the exit status tells success from failure:",
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
        "The command ran, but a health threshold given on the command line was not met.",
    ),
];

/// ENVIRONMENT, on rdmadiag(1).
pub const ENVIRONMENT: &[(&str, &str)] = &[(
    "NO_COLOR",
    "When set and not empty, tables are drawn without colour (https://no-color.org). \
         TERM=dumb does the same. Tables get boxes and colour only when standard output is a \
         terminal; on a pipe they are plain columns.",
)];

/// The other tools in SEE ALSO, on every page: (name, manual section).
pub const SEE_ALSO: &[(&str, &str)] = &[
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
            [exit::OK, exit::FAILURE, exit::USAGE, exit::THRESHOLD]
        );
    }
}
