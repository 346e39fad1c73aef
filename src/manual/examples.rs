//! The EXAMPLES sections of the subcommands' man pages, one list per subcommand.

use super::Example;

/// Examples per subcommand, keyed by the subcommand's name.
pub const EXAMPLES: &[(&str, &[Example])] = &[
    ("devices", DEVICES),
    ("ports", PORTS),
    ("pingpong", PINGPONG),
    ("bw", BW),
    ("lat", LAT),
    ("write", WRITE),
    ("read", READ),
    ("check", CHECK),
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
        what: "Under Open MPI (or Hydra), which give no host list: name rank 0's host, and give \
               every rank the run's key (mpirun forwards it with -x):",
        commands: &[
            "export RDMADIAG_FABRIC_KEY=$(openssl rand -hex 32)",
            "mpirun -np 8 --map-by node -x RDMADIAG_FABRIC_KEY rdmadiag fabric --coordinator node01 --json > fabric.json",
        ],
    },
    Example {
        what: "Without a launcher: start the same line on every host (ssh, pdsh...); each finds \
               its rank in the list by hostname or address, and proves it with the key file \
               (mode 600, the same on every host):",
        commands: &[
            "rdmadiag fabric --hosts node[01-04] --key-file /etc/rdmadiag/fabric.key --tests bw -s 1M -n 1000",
        ],
    },
    Example {
        what: "Also fail when firmware or the kernel differ between the hosts (active MTU, rate, \
               width, link layer, GID type and a downgraded PCIe link fail by default; the \
               configuration audit reports every difference):",
        commands: &["srun -N16 --ntasks-per-node=1 rdmadiag fabric --require-same firmware,kernel"],
    },
    Example {
        what: "A quick look at a large fabric (three random matchings, suspects retested), for \
               node_exporter's textfile collector:",
        commands: &[
            "rdmadiag fabric --hosts node[001-512] --key-file /etc/rdmadiag/fabric.key \
             --pattern quick --prometheus /var/lib/node_exporter/fabric.prom",
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
        what: "Against a host that still runs perftest: its ib_write_bw server prints our \
               figures (see COMPATIBILITY):",
        commands: &[
            "server$ ib_write_bw -s 65536",
            "client$ rdmadiag bw 10.0.0.1 --compat perftest -s 64K",
        ],
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

const CHECK: &[Example] = &[
    Example {
        what: "Is every port of every device ACTIVE and LinkUp? A table of each check; exit \
               status 0 when all passed, 3 when one failed, 1 when the check could not run:",
        commands: &["rdmadiag check"],
    },
    Example {
        what: "NHC's check_hw_ib: these ports at exactly 400 Gb/s (a bare number is Gb/s), \
               4X; nothing is printed on success, one ERROR line per failure otherwise:",
        commands: &[
            "rdmadiag check -d mlx5_0:1 -d mlx5_1:1 --expect-rate 400 --expect-width 4X \
             --format nhc",
        ],
    },
    Example {
        what: "RoCE: the link layer, a jumbo netdev MTU and a usable RoCE v2 GID; error counters \
               (counters/ and hw_counters/) may not rise at all over 10 seconds:",
        commands: &[
            "rdmadiag check --expect-link-layer ethernet --expect-mtu 9000 --expect-gid \
             --max-error-delta 0 --interval 10s",
        ],
    },
    Example {
        what: "PCIe and NUMA: every device's link, and each bridge's on its path to the root \
               port, at the device's maximum speed and width (a card trained at x8, or behind a \
               Gen3 switch link, fails naming the link and both figures); or at least Gen4 x16 \
               whatever the card could do; and the NIC on the NUMA node of the job's CPUs. A \
               device with no PCI parent (Soft-RoCE) is skipped with a note, not passed:",
        commands: &[
            "rdmadiag check --pcie",
            "rdmadiag check --expect-pcie gen4,x16 --expect-numa 0 --cpus 0-15",
        ],
    },
    Example {
        what: "Move data too: a short loopback test per port (the HCA), and one against a \
               persistent server on another host (the cable and the switch); the settings of \
               each test are printed with the verdicts:",
        commands: &[
            "rdmadiag check --loopback-bw 300Gb/s --loopback-lat 5us",
            "server$ rdmadiag bw --persist",
            "client$ rdmadiag check --peer 10.0.0.1 --peer-bw 350Gb/s --peer-lat 4us",
        ],
    },
    Example {
        what: "Slurm: drain this node (reason \"rdmadiag: <first failure>\") when a check fails, \
               resume it when all pass, but only if rdmadiag drained it. As slurm.conf's \
               HealthCheckProgram, through a wrapper script, run on every node every 5 minutes. \
               slurmd kills a program still running after HealthCheckTimeout (60 s by default): \
               keep --timeout well inside it. /usr/local/sbin/rdmadiag-check holds the two \
               lines `#!/bin/sh` and the rdmadiag line below; slurm.conf the other two:",
        commands: &[
            "rdmadiag check --expect-rate 400 --max-error-delta 0 --interval 5s \
             --loopback-bw 300Gb/s --timeout 30s --slurm-drain --format nhc",
            "HealthCheckProgram=/usr/local/sbin/rdmadiag-check",
            "HealthCheckInterval=300",
        ],
    },
    Example {
        what: "Prometheus: every minute from cron, into node_exporter's textfile collector \
               (prometheus-node-exporter --collector.textfile.directory=/var/lib/node_exporter); \
               the file is replaced atomically, so a scrape never reads half of it. Alert on \
               rdmadiag_check_ok == 0, and on a stale rdmadiag_check_timestamp_seconds. A line \
               of /etc/cron.d/rdmadiag:",
        commands: &[
            "* * * * * root rdmadiag check --format prometheus --interval 20s \
             --output /var/lib/node_exporter/rdmadiag.prom",
        ],
    },
    Example {
        what: "For scripts: the failed checks as JSON (schema: rdmadiag-json(7)):",
        commands: &["rdmadiag check --json | jq '.checks[] | select(.ok | not)'"],
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
        what: "Every port of every device: state, link layer, speed, active IB MTU, netdev and its \
               MTU, and the GID table with GID types and IP addresses (ibv_devinfo plus \
               show_gids), from sysfs:",
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
