# The RDMA devices present, for -d/--device.
function __fish_rdmadiag_devices
    set -l root /sys/class/infiniband
    set -q RDMADIAG_SYSFS_ROOT; and set root $RDMADIAG_SYSFS_ROOT
    ls $root 2>/dev/null
end

# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_rdmadiag_global_optspecs
    string join \n h/help V/version
end

function __fish_rdmadiag_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_rdmadiag_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_rdmadiag_using_subcommand
    set -l cmd (__fish_rdmadiag_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -s h -l help -d 'Print help'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "devices" -d 'List RDMA devices: GUID, type, firmware, PCI id, PCIe link, NUMA node, ports and their state (read from sysfs)'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "ports" -d 'Show ports: state, link layer, speed, active IB MTU, netdev (its driver, speed and MTU), and the GID table with types and IPs; with -v, each device\'s limits, PCIe link and path, NUMA node, local CPUs and driver'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "pingpong" -d 'SEND/RECV ping-pong round trips (like ibv_rc_pingpong): server without HOST, client with'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "bw" -d 'Bandwidth and message rate of SEND, RDMA WRITE, RDMA READ or atomics (like ib_*_bw)'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "lat" -d 'Latency of SEND, RDMA WRITE, RDMA READ or atomics, with percentiles (like ib_*_lat)'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "write" -d 'Diagnose RDMA WRITE: write a patterned buffer into the peer and verify every byte'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "read" -d 'Diagnose RDMA READ: read the peer\'s patterned buffer and verify every byte'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "check" -d 'Node health check: ports up at the expected rate, PCIe links at full speed and width, NICs on the right NUMA node, error counters still, short loopback and peer tests; table, NHC lines, JSON or Prometheus; can drain a Slurm node'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "fabric" -d 'Test every link of a cluster in parallel rounds of pairs (bw both ways, lat), launched by srun, mpirun or --hosts, and name the slow or failing host, link or group'
complete -c rdmadiag -n "__fish_rdmadiag_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand devices" -s d -l device -d 'Show only this device (e.g. mlx5_0, rxe0)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand devices" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand devices" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand devices" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -s i -l ib-port -d 'Show only this port (1-based; -i as ibv_devinfo and the test commands)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -l interval -d 'With --counters: read them, wait this long (Ctrl-C ends the wait early), read them again and show what changed and the rate (e.g. 10s)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -s d -l device -d 'Show only this device (e.g. mlx5_0, rxe0)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -s v -l verbose -d 'Add device limits and port details, the IB MTUs among them (at least what `ibv_devinfo -v` shows): this opens each device through libibverbs, where without -v only sysfs is read'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -l counters -d 'Add the port counters from sysfs (counters/ and hw_counters/); non-zero error counters are highlighted'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand ports" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s c -l connection -d 'Transport: reliable connected (RC), unreliable connected (UC: SEND and WRITE) or unreliable datagram (UD: SEND only)' -r -f -a "RC\t'Reliable connected'
UC\t'Unreliable connected'
UD\t'Unreliable datagram'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s s -l size -d 'Message size in bytes; K, M and G are binary (4K = 4096)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s n -l iters -d 'Number of round trips' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l rx-depth -d 'Receives kept posted' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s p -l port -d 'TCP port of the control connection' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l bind -d 'Server: listen on this address only' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l key-file -d 'The test-port key, from FILE (at least 16 bytes, mode 600; else RDMADIAG_KEY): a server with a key serves only clients that prove they hold it, and proves it holds it too; a client proves it to a server that asks. Without a key a server serves whoever connects' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s i -l ib-port -d 'Use this port of the device (1-based)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s x -l gid-index -d 'Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l mtu -d 'Path MTU in bytes (default: the smaller active MTU of the two ports)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l tclass -d 'RoCE traffic class of the test\'s packets, 0-255 (0x prefix for hex): the GRH traffic class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26 is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm\'s ToS. Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l sl -d 'InfiniBand service level of the test\'s packets, 0-15 (not with --cm, where the path gives it). Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l timeout -d 'Longest wait for anything from the peer (connect, each message, each completion); a bare number is seconds' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l wait -d 'Server: how long to wait for a client before giving up (not with --persist)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l max-size -d 'Server: refuse tests whose messages are larger than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l max-qps -d 'Server: refuse tests that ask for more queue pairs than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l compat -d 'Speak another tool\'s protocol instead of rdmadiag\'s' -r -f -a "ibv\t'rdma-core\'s ibv_rc_pingpong / ibv_ud_pingpong exchange (the peer then needs -g IDX)'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s d -l device -d 'Use this RDMA device (default: a client, the one carrying the IP that reaches the peer; a server, --loopback and fabric, the first with an active port)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s e -l events -d 'Sleep on completion events instead of busy polling'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l counters -d 'Read this host\'s port counters (sysfs counters/ and hw_counters/) before and after the test and show what changed; error counters are marked (client and --loopback only)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l persist -d 'Server: keep serving, one client after another, whatever test each asks for; each client is logged on stderr (served, told busy, failed)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l loopback -d 'Run both ends in this process on one device: a self-test needing no peer'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l cm -d 'Connect the queue pairs through rdma_cm (librdmacm) instead of exchanging them by hand'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s v -l verbose -d 'Print the device, port, GID and MTU used on both ends (on stderr)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand pingpong" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l op -d 'The operation to measure' -r -f -a "send\t''
write\t''
read\t''
atomic-fadd\t'8-byte atomic fetch-and-add on the server\'s buffer (RC; checked: exit 4 if it differs)'
atomic-cswap\t'8-byte atomic compare-and-swap on the server\'s buffer (RC; checked: exit 4 if it differs)'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s A -l atomic_type -d 'perftest\'s -A FETCH_AND_ADD|CMP_AND_SWAP: --op atomic-fadd or --op atomic-cswap' -r -f -a "FETCH_AND_ADD\t''
CMP_AND_SWAP\t''"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s c -l connection -d 'Transport: reliable connected (RC), unreliable connected (UC: SEND and WRITE) or unreliable datagram (UD: SEND only)' -r -f -a "RC\t'Reliable connected'
UC\t'Unreliable connected'
UD\t'Unreliable datagram'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s s -l size -d 'Message size; K, M and G are binary (64K = 65536). Default: 64K for bw, 2 for lat, 8 for atomics (which move 8 bytes, no other size)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l sizes -d 'Run these sizes, in order (comma-separated, e.g. 64,4K,64K)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s n -l iters -d 'Operations per size (per QP). Default: 5000 for bw WRITE, else 1000' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s D -l duration -d 'Run each size for this long instead of a number of operations (e.g. 10s, 2m; a bare number is seconds, as perftest\'s -D)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s I -l inline -d 'Send messages up to this size inline (0: never); more than the device allows is an error. Default: 0 for bw; for lat 236, or less if the device allows less' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s p -l port -d 'TCP port of the control connection' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l bind -d 'Server: listen on this address only' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l key-file -d 'The test-port key, from FILE (at least 16 bytes, mode 600; else RDMADIAG_KEY): a server with a key serves only clients that prove they hold it, and proves it holds it too; a client proves it to a server that asks. Without a key a server serves whoever connects' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s i -l ib-port -d 'Use this port of the device (1-based)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s x -l gid-index -d 'Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l mtu -d 'Path MTU in bytes (default: the smaller active MTU of the two ports)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l tclass -d 'RoCE traffic class of the test\'s packets, 0-255 (0x prefix for hex): the GRH traffic class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26 is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm\'s ToS. Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l sl -d 'InfiniBand service level of the test\'s packets, 0-15 (not with --cm, where the path gives it). Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l timeout -d 'Longest wait for anything from the peer (connect, each message, each completion); a bare number is seconds' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l wait -d 'Server: how long to wait for a client before giving up (not with --persist)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l max-size -d 'Server: refuse tests whose messages are larger than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l max-qps -d 'Server: refuse tests that ask for more queue pairs than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l compat -d 'Speak another tool\'s protocol instead of rdmadiag\'s: connect to its server (a one-shot server serves its clients without this flag; see COMPATIBILITY)' -r -f -a "perftest\t'perftest\'s exchange: connect to an ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat or ib_read_lat server (RC or UC WRITE, RC READ, RC SEND for bw)'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s q -l qps -d 'Queue pairs to spread the operations over' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s t -l tx-depth -d 'Operations in flight per QP' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s Q -l cq-mod -d 'Request a completion every N operations. Default: 100, and 1 for messages over 8 KiB (as perftest); given explicitly, N applies to every size' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s l -l post-list -d 'Post this many operations per ibv_post_send call' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s o -l outstanding -d 'RDMA READs or atomics in flight per QP (--op read, atomic-*). Default: the device\'s maximum, as perftest' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l units -d 'Units of the bandwidth columns' -r -f -a "gbit\t'Gigabits per second (10^9 bits)'
mib\t'Mebibytes per second (2^20 bytes), as perftest prints by default'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l expect-bw -d 'Health check: exit 3 unless the average bandwidth is at least this rate, with its unit (90Gb/s, 10GB/s, 900MiB/s), at every size or the one --expect-size names' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s w -l limit_bw -d 'perftest\'s -w / --limit_bw: --expect-bw with a bare number in Gb/s' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l expect-msgrate -d 'Health check: exit 3 unless the message rate is at least this (10Mpps, 500kpps), at every size or the one --expect-size names' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s y -l limit_msgrate -d 'perftest\'s -y / --limit_msgrate: --expect-msgrate with a bare number in Mpps' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l expect-size -d 'The size the thresholds apply to, or every size run' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s d -l device -d 'Use this RDMA device (default: a client, the one carrying the IP that reaches the peer; a server, --loopback and fabric, the first with an active port)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s a -l all -d 'Sweep sizes 2 B to 8 MiB in powers of two'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l vs-tcp -d 'Also run the same sizes over a plain TCP connection between the same hosts and show both side by side, with the CPU time each side spent (like qperf\'s tcp_bw/tcp_lat)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s F -l CPU-freq -d 'perftest\'s -F (do not fail on CPU frequency scaling): accepted, nothing to do'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l report_gbits -d 'perftest\'s --report_gbits: accepted, Gb/s is already the unit (see --units)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l counters -d 'Read this host\'s port counters (sysfs counters/ and hw_counters/) before and after the test and show what changed; error counters are marked (client and --loopback only)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l persist -d 'Server: keep serving, one client after another, whatever test each asks for; each client is logged on stderr (served, told busy, failed)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l loopback -d 'Run both ends in this process on one device: a self-test needing no peer'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l cm -d 'Connect the queue pairs through rdma_cm (librdmacm) instead of exchanging them by hand'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s v -l verbose -d 'Print the device, port, GID and MTU used on both ends (on stderr)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s b -l bidirectional -d 'Measure both directions at once; the figures are their sum (as perftest), each direction is shown too'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand bw" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l op -d 'The operation to measure' -r -f -a "send\t''
write\t''
read\t''
atomic-fadd\t'8-byte atomic fetch-and-add on the server\'s buffer (RC; checked: exit 4 if it differs)'
atomic-cswap\t'8-byte atomic compare-and-swap on the server\'s buffer (RC; checked: exit 4 if it differs)'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s A -l atomic_type -d 'perftest\'s -A FETCH_AND_ADD|CMP_AND_SWAP: --op atomic-fadd or --op atomic-cswap' -r -f -a "FETCH_AND_ADD\t''
CMP_AND_SWAP\t''"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s c -l connection -d 'Transport: reliable connected (RC), unreliable connected (UC: SEND and WRITE) or unreliable datagram (UD: SEND only)' -r -f -a "RC\t'Reliable connected'
UC\t'Unreliable connected'
UD\t'Unreliable datagram'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s s -l size -d 'Message size; K, M and G are binary (64K = 65536). Default: 64K for bw, 2 for lat, 8 for atomics (which move 8 bytes, no other size)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l sizes -d 'Run these sizes, in order (comma-separated, e.g. 64,4K,64K)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s n -l iters -d 'Operations per size (per QP). Default: 5000 for bw WRITE, else 1000' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s D -l duration -d 'Run each size for this long instead of a number of operations (e.g. 10s, 2m; a bare number is seconds, as perftest\'s -D)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s I -l inline -d 'Send messages up to this size inline (0: never); more than the device allows is an error. Default: 0 for bw; for lat 236, or less if the device allows less' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s p -l port -d 'TCP port of the control connection' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l bind -d 'Server: listen on this address only' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l key-file -d 'The test-port key, from FILE (at least 16 bytes, mode 600; else RDMADIAG_KEY): a server with a key serves only clients that prove they hold it, and proves it holds it too; a client proves it to a server that asks. Without a key a server serves whoever connects' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s i -l ib-port -d 'Use this port of the device (1-based)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s x -l gid-index -d 'Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l mtu -d 'Path MTU in bytes (default: the smaller active MTU of the two ports)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l tclass -d 'RoCE traffic class of the test\'s packets, 0-255 (0x prefix for hex): the GRH traffic class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26 is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm\'s ToS. Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l sl -d 'InfiniBand service level of the test\'s packets, 0-15 (not with --cm, where the path gives it). Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l timeout -d 'Longest wait for anything from the peer (connect, each message, each completion); a bare number is seconds' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l wait -d 'Server: how long to wait for a client before giving up (not with --persist)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l max-size -d 'Server: refuse tests whose messages are larger than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l max-qps -d 'Server: refuse tests that ask for more queue pairs than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l compat -d 'Speak another tool\'s protocol instead of rdmadiag\'s: connect to its server (a one-shot server serves its clients without this flag; see COMPATIBILITY)' -r -f -a "perftest\t'perftest\'s exchange: connect to an ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat or ib_read_lat server (RC or UC WRITE, RC READ, RC SEND for bw)'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l timing -d 'How samples are taken: perftest (every operation signalled and its completion polled inside the sample, as ib_*_lat) or lean (a completion every 16th operation, reaped outside the samples). READ and atomics always wait for each completion' -r -f -a "perftest\t'As perftest\'s ib_*_lat: every operation signalled, its completion polled in the sample'
lean\t'A completion every 16th operation, reaped outside the samples'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l expect-lat -d 'Health check: exit 3 unless the latency (median, or --expect-percentile) is at most this, with its unit (5us, 1ms), at every size or the one --expect-size names' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l expect-percentile -d 'Which percentile --expect-lat applies to: 50, 90, 99, 99.9 or 99.99' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l expect-size -d 'The size --expect-lat applies to, or every size run' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s d -l device -d 'Use this RDMA device (default: a client, the one carrying the IP that reaches the peer; a server, --loopback and fabric, the first with an active port)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s a -l all -d 'Sweep sizes 2 B to 8 MiB in powers of two'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l vs-tcp -d 'Also run the same sizes over a plain TCP connection between the same hosts and show both side by side, with the CPU time each side spent (like qperf\'s tcp_bw/tcp_lat)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s F -l CPU-freq -d 'perftest\'s -F (do not fail on CPU frequency scaling): accepted, nothing to do'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l report_gbits -d 'perftest\'s --report_gbits: accepted, Gb/s is already the unit (see --units)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l counters -d 'Read this host\'s port counters (sysfs counters/ and hw_counters/) before and after the test and show what changed; error counters are marked (client and --loopback only)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l persist -d 'Server: keep serving, one client after another, whatever test each asks for; each client is logged on stderr (served, told busy, failed)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l loopback -d 'Run both ends in this process on one device: a self-test needing no peer'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l cm -d 'Connect the queue pairs through rdma_cm (librdmacm) instead of exchanging them by hand'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s v -l verbose -d 'Print the device, port, GID and MTU used on both ends (on stderr)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -l histogram -d 'Draw the latency distribution'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand lat" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s s -l size -d 'Buffer size; K, M and G are binary' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s n -l iters -d 'How many times to move the buffer' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s p -l port -d 'TCP port of the control connection' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l bind -d 'Server: listen on this address only' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l key-file -d 'The test-port key, from FILE (at least 16 bytes, mode 600; else RDMADIAG_KEY): a server with a key serves only clients that prove they hold it, and proves it holds it too; a client proves it to a server that asks. Without a key a server serves whoever connects' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s i -l ib-port -d 'Use this port of the device (1-based)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s x -l gid-index -d 'Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l mtu -d 'Path MTU in bytes (default: the smaller active MTU of the two ports)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l tclass -d 'RoCE traffic class of the test\'s packets, 0-255 (0x prefix for hex): the GRH traffic class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26 is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm\'s ToS. Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l sl -d 'InfiniBand service level of the test\'s packets, 0-15 (not with --cm, where the path gives it). Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l timeout -d 'Longest wait for anything from the peer (connect, each message, each completion); a bare number is seconds' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l wait -d 'Server: how long to wait for a client before giving up (not with --persist)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l max-size -d 'Server: refuse tests whose messages are larger than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l max-qps -d 'Server: refuse tests that ask for more queue pairs than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s d -l device -d 'Use this RDMA device (default: a client, the one carrying the IP that reaches the peer; a server, --loopback and fabric, the first with an active port)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l counters -d 'Read this host\'s port counters (sysfs counters/ and hw_counters/) before and after the test and show what changed; error counters are marked (client and --loopback only)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l persist -d 'Server: keep serving, one client after another, whatever test each asks for; each client is logged on stderr (served, told busy, failed)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l loopback -d 'Run both ends in this process on one device: a self-test needing no peer'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l cm -d 'Connect the queue pairs through rdma_cm (librdmacm) instead of exchanging them by hand'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s v -l verbose -d 'Print the device, port, GID and MTU used on both ends (on stderr)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s h -l help -d 'Print help'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand write" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s s -l size -d 'Buffer size; K, M and G are binary' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s n -l iters -d 'How many times to move the buffer' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s p -l port -d 'TCP port of the control connection' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l bind -d 'Server: listen on this address only' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l key-file -d 'The test-port key, from FILE (at least 16 bytes, mode 600; else RDMADIAG_KEY): a server with a key serves only clients that prove they hold it, and proves it holds it too; a client proves it to a server that asks. Without a key a server serves whoever connects' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s i -l ib-port -d 'Use this port of the device (1-based)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s x -l gid-index -d 'Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l mtu -d 'Path MTU in bytes (default: the smaller active MTU of the two ports)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l tclass -d 'RoCE traffic class of the test\'s packets, 0-255 (0x prefix for hex): the GRH traffic class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26 is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm\'s ToS. Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l sl -d 'InfiniBand service level of the test\'s packets, 0-15 (not with --cm, where the path gives it). Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l timeout -d 'Longest wait for anything from the peer (connect, each message, each completion); a bare number is seconds' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l wait -d 'Server: how long to wait for a client before giving up (not with --persist)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l max-size -d 'Server: refuse tests whose messages are larger than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l max-qps -d 'Server: refuse tests that ask for more queue pairs than this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s d -l device -d 'Use this RDMA device (default: a client, the one carrying the IP that reaches the peer; a server, --loopback and fabric, the first with an active port)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l counters -d 'Read this host\'s port counters (sysfs counters/ and hw_counters/) before and after the test and show what changed; error counters are marked (client and --loopback only)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l persist -d 'Server: keep serving, one client after another, whatever test each asks for; each client is logged on stderr (served, told busy, failed)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l loopback -d 'Run both ends in this process on one device: a self-test needing no peer'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l cm -d 'Connect the queue pairs through rdma_cm (librdmacm) instead of exchanging them by hand'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s v -l verbose -d 'Print the device, port, GID and MTU used on both ends (on stderr)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s h -l help -d 'Print help'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand read" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-state -d 'Each port\'s logical state. Default: active (and then also the physical state LinkUp)' -r -f -a "down\t''
init\t''
armed\t''
active\t''"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-rate -d 'Each port\'s rate, exactly: 400Gb/s, or a bare number in Gb/s as NHC\'s check_hw_ib (--expect-rate 100)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-width -d 'Each port\'s width: 1X, 2X, 4X, 8X or 12X' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-mtu -d 'Each port\'s MTU in bytes: the netdev\'s on RoCE (e.g. 9000), the active IB MTU on InfiniBand (e.g. 4096; the device is opened through libibverbs to read it)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-link-layer -d 'Each port\'s link layer' -r -f -a "infiniband\t''
ethernet\t''"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-pcie -d 'Like --pcie, but each device\'s slowest link on its path must reach this generation and width instead of the device\'s maximum (an x16 card in an x8 slot on purpose: 4,8): GEN,WIDTH as 4,16 or gen4,x16 (generations 1 to 6: 2.5, 5, 8, 16, 32, 64 GT/s)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-numa -d 'Each device\'s NUMA node (sysfs numa_node of its PCI function; -1, no node, fails). A device with no PCI parent is skipped with a note' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l cpus -d 'Each device\'s NUMA node holds these CPUs (the job\'s, as taskset takes them: 0-15,32): compared with /sys/devices/system/node/nodeN/cpulist' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l interval -d 'Watch the error counters (counters/ and hw_counters/) for this long (e.g. 10s); with no --max-error-delta, any rise fails' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l max-error-delta -d 'How much each port\'s error counters may rise in all over --interval' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l loopback-bw -d 'A short loopback RDMA WRITE bandwidth test on each port (64 KiB messages, up to 1 s) must average at least this rate, with its unit (90Gb/s, 10GB/s)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l loopback-lat -d 'A short loopback RDMA WRITE latency test on each port (2 B, 1000 samples) must have a median of at most this, with its unit (5us)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l peer -d 'Run --peer-bw and --peer-lat against this persistent rdmadiag server (`rdmadiag bw --persist` there; any test subcommand serves every test). PORT defaults to 18515' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l key-file -d 'The key of a --peer server started with one (as its --key-file; else RDMADIAG_KEY)' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l peer-bw -d 'RDMA WRITE bandwidth to --peer (64 KiB messages, up to 1 s) must average at least this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l peer-lat -d 'RDMA WRITE latency to --peer (2 B, 1000 samples) must have a median of at most this' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l tclass -d 'RoCE traffic class of the test\'s packets, 0-255 (0x prefix for hex): the GRH traffic class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26 is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm\'s ToS. Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l sl -d 'InfiniBand service level of the test\'s packets, 0-15 (not with --cm, where the path gives it). Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l timeout -d 'Bounds the whole run, every test and wait included (well inside Slurm\'s HealthCheckTimeout, 60 s by default); a bare number is seconds' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l format -d 'How to write the report' -r -f -a "text\t'A table: check, target, expected, actual, verdict'
json\t'One JSON document (rdmadiag-json(7))'
nhc\t'LBNL NHC\'s convention: nothing when all passed, else one `ERROR: rdmadiag: ...` line per failure'
prometheus\t'Prometheus text exposition format (for node_exporter\'s textfile collector)'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -s o -l output -d 'Write the report to this file instead of standard output, atomically (a temporary file in the same directory, then renamed): node_exporter never reads half a file' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -s d -l device -d 'Check this device, or one port of it (mlx5_0, mlx5_0:1); repeat for more. Default: every port of every device' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l expect-gid -d 'Each port has a usable RoCE v2 GID: one with an IPv4 or a routable IPv6 address'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l pcie -d 'Each device\'s PCIe link, and every link on its path to the root port, runs at the device\'s maximum speed and width (sysfs max_link_speed, max_link_width): a card trained at x8 of x16, or behind a bridge at Gen3, fails, naming the link and both figures. A device with no PCI parent (Soft-RoCE) or no PCIe link attributes is skipped with a note ("does not apply"), neither passed nor failed'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l slurm-drain -d 'On a failure, drain this Slurm node ($SLURMD_NODENAME) with the reason "rdmadiag: <first failure>"; when every check passes, resume it if (and only if) its reason starts with "rdmadiag:". Needs scontrol on PATH'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand check" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l hosts -d 'Every host of the run, in Slurm hostlist syntax (node[01-04,07]): each rank finds its position by hostname or local address. Without it the rank comes from Slurm, Open MPI, PMIx or Hydra' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l coordinator -d 'Rank 0\'s host (and port, default 18600), where every rank meets: required under mpirun (or set RDMADIAG_COORDINATOR); by default the first host of Slurm\'s list or --hosts' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l pattern -d 'Which pairs test each other' -r -f -a "all-pairs\t'Every pair once, in N-1 rounds (N with a bye when N is odd)'
ring\t'Each host with the next one'
quick\t'A few random perfect matchings, then suspects retested'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l tests -d 'The tests each pair runs, comma-separated' -r -f -a "bw\t'RDMA WRITE bandwidth, both directions'
lat\t'RDMA WRITE latency (median half round trip)'"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s s -l size -d 'The bandwidth test\'s message size' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s n -l iters -d 'Iterations of each test (bandwidth messages, latency round trips)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s i -l ib-port -d 'Use this port of the device (1-based)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s x -l gid-index -d 'Use this GID index (default on RoCE: the RoCE v2 GID of the IP that reaches the peer)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l tclass -d 'RoCE traffic class of the test\'s packets, 0-255 (0x prefix for hex): the GRH traffic class, which RoCE v2 carries as the IP TOS byte, so the DSCP is its top 6 bits (DSCP 26 is --tclass 104) and the ECN its low 2. With --cm it is rdma_cm\'s ToS. Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l sl -d 'InfiniBand service level of the test\'s packets, 0-15 (not with --cm, where the path gives it). Default 0' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l seed -d 'Seed of --pattern quick\'s matchings (the same on every rank)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l min-bw-ratio -d 'A host, link or group is slow when its bandwidth is below this fraction of the reference (the median of the hosts\' median bandwidths) and beyond the run\'s noise' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l max-lat-ratio -d 'A host or link is slow when its latency is above this multiple of the reference (the median of the hosts\' median latencies) and beyond the run\'s noise' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l expect-bw -d 'Also flag a pair whose bandwidth (either direction) is below this rate (10Gb/s, 1GB/s)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l expect-lat -d 'Also flag a pair whose latency is above this (5us, 1ms)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l max-error-delta -d 'Flag a pair whose error counter rose by more than N (default: a rise above what the run\'s own pairs show, Q3 + 3 x max(IQR, Q3, 1))' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l require-same -d 'Also fail the run (exit 3) when these configuration fields differ between the hosts, comma-separated: firmware, driver, kernel, rdma-core, rdmadiag, numa (active MTU, rate, width, link layer, GID type and a PCIe link below its maximum fail by default; every difference is reported)' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l retest-rounds -d 'Retest rounds at most: a suspect is retested round after round until its figures decide (a fault reproduced stays, a retest at the ratio clears it); still undecided after N rounds, it is reported as undecided, not as a suspect' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l timeout -d 'The bound on each wait: joining the coordinator, each wait of a pair test for its peer; a round may last a few times this. A bare number is seconds' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l csv -d 'Write one CSV row per pair to FILE (rank 0)' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l prometheus -d 'Write Prometheus metrics to FILE, atomically (for node_exporter\'s textfile collector)' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l key-file -d 'Read the run\'s shared key from FILE (at least 16 bytes, mode 600; the same file on every rank). Only ranks that prove the run\'s credential join: this key, else RDMADIAG_FABRIC_KEY, else under srun a munge credential of the same uid and job step, made on the node that runs the rank it claims; with none of them the run refuses to start. Every later message is HMAC-signed (SECURITY in the man page)' -r -F
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l bind -d 'Listen on this local address only (rank 0\'s coordinator and every rank\'s test port); default: every address, as perftest' -r
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s d -l device -d 'Use this RDMA device (default: a client, the one carrying the IP that reaches the peer; a server, --loopback and fabric, the first with an active port)' -r -f -a "(__fish_rdmadiag_devices)"
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l no-counter-check -d 'Do not judge the error counters (they are still read and reported)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l allow-missing -d 'Go on without ranks missing at the rendezvous (they are named, and the run exits 3)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l no-retest -d 'Do not retest suspects against hosts that passed (every suspect stays one)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s v -l verbose -d 'Other ranks print a line per round on stderr; rank 0 adds status lines'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l insecure -d 'Run without any credential: ANYONE who can reach rank 0\'s port during the rendezvous can join the run, claim a rank and report forged figures'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -l json -d 'Print one JSON document instead of tables (schema: rdmadiag-json(7))'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand fabric" -s V -l version -d 'Print version'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "devices" -d 'List RDMA devices: GUID, type, firmware, PCI id, PCIe link, NUMA node, ports and their state (read from sysfs)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "ports" -d 'Show ports: state, link layer, speed, active IB MTU, netdev (its driver, speed and MTU), and the GID table with types and IPs; with -v, each device\'s limits, PCIe link and path, NUMA node, local CPUs and driver'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "pingpong" -d 'SEND/RECV ping-pong round trips (like ibv_rc_pingpong): server without HOST, client with'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "bw" -d 'Bandwidth and message rate of SEND, RDMA WRITE, RDMA READ or atomics (like ib_*_bw)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "lat" -d 'Latency of SEND, RDMA WRITE, RDMA READ or atomics, with percentiles (like ib_*_lat)'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "write" -d 'Diagnose RDMA WRITE: write a patterned buffer into the peer and verify every byte'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "read" -d 'Diagnose RDMA READ: read the peer\'s patterned buffer and verify every byte'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "check" -d 'Node health check: ports up at the expected rate, PCIe links at full speed and width, NICs on the right NUMA node, error counters still, short loopback and peer tests; table, NHC lines, JSON or Prometheus; can drain a Slurm node'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "fabric" -d 'Test every link of a cluster in parallel rounds of pairs (bw both ways, lat), launched by srun, mpirun or --hosts, and name the slow or failing host, link or group'
complete -c rdmadiag -n "__fish_rdmadiag_using_subcommand help; and not __fish_seen_subcommand_from devices ports pingpong bw lat write read check fabric help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
