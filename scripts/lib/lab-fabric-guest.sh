# shellcheck shell=bash
# lab-fabric-guest.sh: the guest side of `scripts/lab --hosts N`: eth0 + rxe0, munged, slurmd (slurmctld on fab1), then COMMAND on fab1.
#
# Sourced, as root inside guest fab$lab_index, by the script scripts/lib/lab-fabric.sh generated; that
# script set lab_run, lab_cwd, lab_command, lab_index, lab_hosts, PATH and SLURM_CONF. fab1 writes its
# output to $lab_run/out (streamed by scripts/lab) and COMMAND's status to $lab_run/rc; guest K>1
# writes to $lab_run/outK, and to $lab_run/failedK why it could not be set up. Guests K>1 then wait
# (Slurm runs their tasks) until scripts/lab stops them once fab1 is done.

# shellcheck disable=SC2154  # (lab_* variables: set by the generated script that sources this file)

me=fab$lab_index
if ((lab_index == 1)); then
    exec >>"$lab_run/out" 2>&1 </dev/null
else
    exec >>"$lab_run/out$lab_index" 2>&1 </dev/null
fi

# lab_fail WHY: this guest could not be set up: say why, and stop (fab1 with status 125).
lab_fail() {
    echo "lab: $me: $*"
    echo "lab: $me: last kernel messages:"
    dmesg | tail -n 15
    echo "$*" >"$lab_run/failed$lab_index"
    if ((lab_index == 1)); then
        echo 125 >"$lab_run/rc"
        exit 125
    fi
    exec sleep infinity   # (scripts/lab stops this guest when fab1 is done)
}

# Private /run, /dev/pts and /dev/shm: the host's /run must not be written to from the guests.
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
# The guest's devtmpfs lacks what udev would add: bash's <(...) and many tools need /dev/fd.
[[ -e /dev/fd ]] || ln -s /proc/self/fd /dev/fd
hostname "$me"
echo "$lab_run/bin/modprobe" >/proc/sys/kernel/modprobe

# Every guest's name, in this guest only: /etc/hosts is the host's file, so bind a private copy over it.
{
    echo "127.0.0.1 localhost"
    for ((k = 1; k <= lab_hosts; k++)); do echo "10.78.0.$k fab$k"; done
} >/run/hosts
mount --bind /run/hosts /etc/hosts || lab_fail "cannot bind /run/hosts over /etc/hosts"

for m in virtio_net rdma_rxe rdma_ucm; do
    modprobe "$m" || lab_fail "rxe0 not set up: modprobe $m failed (kernel $(uname -r))"
done
ip link set lo up
for ((i = 0; i < 50; i++)); do
    [[ -e /sys/class/net/eth0 ]] && break
    sleep 0.1
done
ip link set eth0 up &&
    ip addr add "10.78.0.$lab_index/24" dev eth0 ||
    lab_fail "eth0 not set up (interfaces: $(ls /sys/class/net | paste -sd' '))"
rdma link add rxe0 type rxe netdev eth0 || lab_fail "rxe0 not set up: 'rdma link add rxe0 type rxe netdev eth0' failed"

# Wait (at most 10 s) until port 1 is ACTIVE and the IPv4-mapped GID of 10.78.0.i is in the GID table.
gid_tail=$(printf 'ffff:0a4e:00%02x$' "$lab_index")
for ((i = 0; i < 100; i++)); do
    state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null || true)
    if [[ $state == *ACTIVE* ]] && grep -qs "$gid_tail" /sys/class/infiniband/rxe0/ports/1/gids/[0-3]; then
        break
    fi
    sleep 0.1
done
[[ $state == *ACTIVE* ]] || lab_fail "rxe0 port 1 is not ACTIVE (state: ${state:-unknown})"
grep -qs "$gid_tail" /sys/class/infiniband/rxe0/ports/1/gids/[0-3] || lab_fail "rxe0 has no GID for 10.78.0.$lab_index"
# Before the daemons start: Slurm hands srun's limits to the tasks, and RDMA needs locked memory.
ulimit -l unlimited

# munge (Slurm's authentication): the host's key, private state and log directories.
mkdir -p /run/munge /run/slurmd /run/slurmctld
mount -t tmpfs tmpfs /var/lib/munge && mount -t tmpfs tmpfs /var/log/munge ||
    lab_fail "cannot mount tmpfs on /var/lib/munge and /var/log/munge"
[[ -r /etc/munge/munge.key ]] || lab_fail "no /etc/munge/munge.key (scripts/setup installs munge, which makes one)"
munged --force || lab_fail "munged did not start: $(tail -n 3 /var/log/munge/munged.log 2>/dev/null)"

# slurmd 22.05 insists on a cgroup hierarchy; v1 controllers on a tmpfs satisfy it (cgroup.conf).
mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup || lab_fail "cannot mount a tmpfs on /sys/fs/cgroup"
for c in freezer cpuset memory devices cpu,cpuacct; do
    mkdir -p "/sys/fs/cgroup/$c"
    mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" || lab_fail "cannot mount the cgroup v1 controller $c"
done
if ((lab_index == 1)); then
    slurmctld -f "$SLURM_CONF" || lab_fail "slurmctld did not start: $(tail -n 3 /run/slurmctld.log 2>/dev/null)"
fi
slurmd -f "$SLURM_CONF" -N "$me" || lab_fail "slurmd did not start: $(tail -n 3 /run/slurmd.log 2>/dev/null)"
touch "$lab_run/ready$lab_index"

if ((lab_index > 1)); then
    exec sleep infinity   # (scripts/lab stops this guest when fab1 is done)
fi

# fab1: wait (at most 180 s) until every node is idle; stop early when another guest failed.
lab_start=$SECONDS
while :; do
    idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | wc -l)
    ((idle >= lab_hosts)) && break
    for ((k = 2; k <= lab_hosts; k++)); do
        [[ -s $lab_run/failed$k ]] && lab_fail "fab$k could not be set up: $(cat "$lab_run/failed$k")"
    done
    if ((SECONDS - lab_start >= 180)); then
        states=$(sinfo -h -N -o '%N=%T' 2>&1 | paste -sd' ')
        lab_fail "Slurm not ready: $idle of $lab_hosts nodes idle after 180 s (${states:-sinfo printed nothing}); slurmctld log: $(tail -n 3 /run/slurmctld.log | paste -sd' ')"
    fi
    sleep 0.5
done
echo "lab: fab1..fab$lab_hosts up (eth0 10.78.0.1-$lab_hosts, rxe0 on eth0), Slurm: $lab_hosts nodes idle after $((SECONDS - lab_start)) s, kernel $(uname -r)"
cd "$lab_cwd" || lab_fail "cannot cd to $lab_cwd in the guest"
rc=0
bash -c "$lab_command" || rc=$?
echo "$rc" >"$lab_run/rc"
