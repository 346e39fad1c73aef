//! Who this process is in the run: its rank, the number of ranks and the coordinator's address,
//! from Slurm, Open MPI, PMIx or Hydra's environment, or from `--hosts`.

use super::hostlist;
use crate::exit::UsageError;
use anyhow::Result;
use std::time::{Duration, Instant};

/// The coordinator's TCP port when `--coordinator` names none.
pub const DEFAULT_COORDINATOR_PORT: u16 = 18600;

/// What launched this process, for messages and the plan line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Slurm,
    OpenMpi,
    Pmix,
    Hydra,
    HostList,
}

impl std::fmt::Display for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Launcher::Slurm => "Slurm",
            Launcher::OpenMpi => "Open MPI",
            Launcher::Pmix => "PMIx",
            Launcher::Hydra => "Hydra",
            Launcher::HostList => "--hosts",
        })
    }
}

/// This process's place in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub launcher: Launcher,
    pub rank: u32,
    pub size: u32,
    /// The coordinator's host and port (rank 0 listens there, every rank connects).
    pub coordinator: (String, u16),
}

/// What identifies this host: its name, and a test whether an address or name is one of its own.
pub struct ThisHost<'a> {
    pub hostname: &'a str,
    pub is_local: &'a dyn Fn(&str) -> bool,
}

/// The flags that bear on the launch.
#[derive(Debug, Clone, Default)]
pub struct LaunchFlags<'a> {
    pub hosts: Option<&'a str>,
    pub coordinator: Option<&'a str>,
}

/// Work out rank, size and coordinator. `env` reads one variable (the process environment in
/// the binary, a map in tests). `--hosts` wins over a launcher's variables; then Slurm, Open
/// MPI, PMIx and Hydra, in that order.
pub fn detect(
    env: &dyn Fn(&str) -> Option<String>,
    flags: &LaunchFlags,
    me: &ThisHost,
) -> Result<Launch> {
    let number = |name: &str| -> Result<Option<u32>> {
        match env(name) {
            None => Ok(None),
            Some(v) => v.trim().parse::<u32>().map(Some).map_err(|_| {
                UsageError(format!("{name}={v} is not a number (a launcher sets it)")).into()
            }),
        }
    };
    let named = flags
        .coordinator
        .map(str::to_string)
        .or_else(|| env("RDMADIAG_COORDINATOR").filter(|c| !c.trim().is_empty()));
    let coordinator = |default_host: Option<&str>, launcher: Launcher| -> Result<(String, u16)> {
        match (&named, default_host) {
            (Some(c), _) => parse_coordinator(c),
            (None, Some(h)) => Ok((h.to_string(), DEFAULT_COORDINATOR_PORT)),
            (None, None) => Err(UsageError(format!(
                "{launcher} gives no list of the hosts: name rank 0's host with --coordinator \
                 HOST[:PORT] (or RDMADIAG_COORDINATOR)"
            ))
            .into()),
        }
    };

    if let Some(list) = flags.hosts {
        let hosts = hostlist::expand(list).map_err(|e| UsageError(format!("--hosts: {e:#}")))?;
        let rank = own_position(&hosts, me)?;
        return Ok(Launch {
            launcher: Launcher::HostList,
            rank,
            size: hosts.len() as u32,
            coordinator: coordinator(Some(&hosts[0]), Launcher::HostList)?,
        });
    }
    if let Some(rank) = number("SLURM_PROCID")? {
        let size = match number("SLURM_STEP_NUM_TASKS")? {
            Some(s) => s,
            None => number("SLURM_NTASKS")?.ok_or_else(|| {
                UsageError(
                    "SLURM_PROCID is set but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS".into(),
                )
            })?,
        };
        let list = [
            "SLURM_STEP_NODELIST",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
        ]
        .iter()
        .find_map(|v| env(v));
        let first = match &list {
            Some(l) => Some(
                hostlist::expand(l)
                    .map_err(|e| UsageError(format!("Slurm's node list: {e:#}")))?
                    .remove(0),
            ),
            None => None,
        };
        return finish(
            Launcher::Slurm,
            rank,
            size,
            coordinator(first.as_deref(), Launcher::Slurm)?,
        );
    }
    if let Some(rank) = number("OMPI_COMM_WORLD_RANK")? {
        let size = number("OMPI_COMM_WORLD_SIZE")?.ok_or_else(|| {
            UsageError("OMPI_COMM_WORLD_RANK is set but not OMPI_COMM_WORLD_SIZE".into())
        })?;
        return finish(
            Launcher::OpenMpi,
            rank,
            size,
            coordinator(None, Launcher::OpenMpi)?,
        );
    }
    if let Some(rank) = number("PMIX_RANK")? {
        let size = match number("PMIX_SIZE")? {
            Some(s) => s,
            None => number("PMI_SIZE")?.ok_or_else(|| {
                UsageError("PMIX_RANK is set but no size (PMIX_SIZE or PMI_SIZE): start the ranks with mpirun, srun or --hosts".into())
            })?,
        };
        return finish(
            Launcher::Pmix,
            rank,
            size,
            coordinator(None, Launcher::Pmix)?,
        );
    }
    if let Some(rank) = number("PMI_RANK")? {
        let size = number("PMI_SIZE")?
            .ok_or_else(|| UsageError("PMI_RANK is set but not PMI_SIZE".into()))?;
        return finish(
            Launcher::Hydra,
            rank,
            size,
            coordinator(None, Launcher::Hydra)?,
        );
    }
    Err(UsageError(
        "no launcher found: run under srun or mpirun, or give every host's name with --hosts"
            .into(),
    )
    .into())
}

fn finish(launcher: Launcher, rank: u32, size: u32, coordinator: (String, u16)) -> Result<Launch> {
    if size as usize > hostlist::MAX_HOSTS {
        return Err(UsageError(format!(
            "{launcher} says {size} ranks: a fabric run takes at most {}",
            hostlist::MAX_HOSTS
        ))
        .into());
    }
    if size < 2 {
        return Err(UsageError(format!(
            "{launcher} started {size} rank(s): a fabric test needs at least 2"
        ))
        .into());
    }
    if rank >= size {
        return Err(UsageError(format!("{launcher} says rank {rank} of {size}")).into());
    }
    Ok(Launch {
        launcher,
        rank,
        size,
        coordinator,
    })
}

/// How long matching this host against `--hosts` by address may take in all: a name that does
/// not resolve costs a DNS timeout, and a list of a thousand such names must not take minutes.
const ADDRESS_MATCH_BUDGET: Duration = Duration::from_secs(5);

/// This host's position in `--hosts`: the entry naming its hostname (or its short name), else
/// the one that is one of its addresses (the literal addresses first, then names resolved within
/// [`ADDRESS_MATCH_BUDGET`] in all).
fn own_position(hosts: &[String], me: &ThisHost) -> Result<u32> {
    if hosts.len() < 2 {
        return Err(
            UsageError("--hosts names one host: a fabric test needs at least 2".into()).into(),
        );
    }
    let short = |h: &str| h.split('.').next().unwrap_or(h).to_string();
    let by_name: Vec<usize> = (0..hosts.len())
        .filter(|&i| hosts[i] == me.hostname || short(&hosts[i]) == short(me.hostname))
        .collect();
    let found = if by_name.is_empty() {
        by_address(hosts, me)?
    } else {
        by_name
    };
    match found[..] {
        [i] => Ok(i as u32),
        [] => Err(UsageError(format!(
            "this host ({}) is not in --hosts ({}), by name or by one of its addresses",
            me.hostname,
            shown(hosts)
        ))
        .into()),
        _ => Err(UsageError(format!(
            "this host ({}) matches {} entries of --hosts: each host once",
            me.hostname,
            found.len()
        ))
        .into()),
    }
}

/// The entries that are one of this host's addresses: literal addresses first (no lookup), then,
/// when none is, names until the budget is spent.
fn by_address(hosts: &[String], me: &ThisHost) -> Result<Vec<usize>> {
    let literal = |h: &str| h.parse::<std::net::IpAddr>().is_ok();
    let mut found: Vec<usize> = (0..hosts.len())
        .filter(|&i| literal(&hosts[i]) && (me.is_local)(&hosts[i]))
        .collect();
    if !found.is_empty() {
        return Ok(found);
    }
    let started = Instant::now();
    let names: Vec<usize> = (0..hosts.len()).filter(|&i| !literal(&hosts[i])).collect();
    for (done, &i) in names.iter().enumerate() {
        if started.elapsed() > ADDRESS_MATCH_BUDGET {
            return Err(UsageError(format!(
                "this host ({}) is not in --hosts ({}) by name, and resolving the names to find \
                 its address gave up after {}s ({done} of {} names): name each host as its \
                 hostname says, or by its address",
                me.hostname,
                shown(hosts),
                ADDRESS_MATCH_BUDGET.as_secs(),
                names.len()
            ))
            .into());
        }
        if (me.is_local)(&hosts[i]) {
            found.push(i);
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// A host list as a message shows it: the first few names and how many there are.
fn shown(hosts: &[String]) -> String {
    match hosts {
        [a, b, c, _, ..] => format!("{a},{b},{c},... {} hosts", hosts.len()),
        _ => hosts.join(","),
    }
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.
pub fn parse_coordinator(s: &str) -> Result<(String, u16)> {
    let s = s.trim();
    let bad = || UsageError(format!("--coordinator '{s}' is not HOST[:PORT]"));
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(UsageError(format!(
                "--coordinator '{s}': brackets hold an IPv6 address, not '{host}'"
            ))
            .into());
        }
        let port = match after.strip_prefix(':') {
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => return Err(bad().into()),
            },
            None if after.is_empty() => DEFAULT_COORDINATOR_PORT,
            None => return Err(bad().into()),
        };
        return Ok((host.to_string(), port));
    }
    match s.rsplit_once(':') {
        _ if s.is_empty() => Err(bad().into()),
        Some((host, _)) if host.contains(':') => Ok((s.to_string(), DEFAULT_COORDINATOR_PORT)),
        Some((host, port)) if !host.is_empty() => match port.parse::<u16>() {
            Ok(p) if p > 0 => Ok((host.to_string(), p)),
            _ => Err(bad().into()),
        },
        Some(_) => Err(bad().into()),
        None => Ok((s.to_string(), DEFAULT_COORDINATOR_PORT)),
    }
}

/// Whether `host` (a name or an address) is one of this machine's addresses: it resolves to an
/// address a socket can bind here.
pub fn is_local_address(host: &str) -> bool {
    use std::net::{ToSocketAddrs, UdpSocket};
    (host, 0)
        .to_socket_addrs()
        .map(|addrs| addrs.into_iter().any(|a| UdpSocket::bind(a).is_ok()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn launch(vars: &[(&str, &str)], flags: LaunchFlags, host: &str) -> Result<Launch> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env = move |k: &str| map.get(k).cloned();
        let is_local = |h: &str| h == "10.0.0.2";
        detect(
            &env,
            &flags,
            &ThisHost {
                hostname: host,
                is_local: &is_local,
            },
        )
    }

    fn usage(r: Result<Launch>) -> String {
        let e = r.unwrap_err();
        assert!(e.is::<UsageError>(), "not a usage error: {e:#}");
        format!("{e:#}")
    }

    #[test]
    fn slurm_gives_rank_size_and_the_first_host_as_coordinator() {
        let l = launch(
            &[
                ("SLURM_PROCID", "3"),
                ("SLURM_NTASKS", "8"),
                ("SLURM_STEP_NUM_TASKS", "4"),
                ("SLURM_STEP_NODELIST", "node[07-10]"),
                ("SLURM_JOB_NODELIST", "node[01-20]"),
            ],
            LaunchFlags::default(),
            "node10",
        )
        .unwrap();
        assert_eq!(l.launcher, Launcher::Slurm);
        assert_eq!((l.rank, l.size), (3, 4), "the step's task count wins");
        assert_eq!(l.coordinator, ("node07".into(), DEFAULT_COORDINATOR_PORT));
        let l = launch(
            &[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_NODELIST", "a,b"),
            ],
            LaunchFlags {
                coordinator: Some("head:9000"),
                ..Default::default()
            },
            "a",
        )
        .unwrap();
        assert_eq!((l.size, l.coordinator), (2, ("head".into(), 9000)));
    }

    #[test]
    fn mpi_launchers_need_a_coordinator() {
        let ompi = [("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "3")];
        let e = usage(launch(&ompi, LaunchFlags::default(), "x"));
        assert!(e.contains("Open MPI") && e.contains("--coordinator"), "{e}");
        let l = launch(
            &ompi,
            LaunchFlags {
                coordinator: Some("127.0.0.1:18700"),
                ..Default::default()
            },
            "x",
        )
        .unwrap();
        assert_eq!((l.launcher, l.rank, l.size), (Launcher::OpenMpi, 1, 3));
        assert_eq!(l.coordinator, ("127.0.0.1".into(), 18700));
        let mut with_env = ompi.to_vec();
        with_env.push(("RDMADIAG_COORDINATOR", "head"));
        let l = launch(&with_env, LaunchFlags::default(), "x").unwrap();
        assert_eq!(l.coordinator, ("head".into(), DEFAULT_COORDINATOR_PORT));

        let hydra = [
            ("PMI_RANK", "2"),
            ("PMI_SIZE", "4"),
            ("RDMADIAG_COORDINATOR", "h:1"),
        ];
        let l = launch(&hydra, LaunchFlags::default(), "x").unwrap();
        assert_eq!((l.launcher, l.rank, l.size), (Launcher::Hydra, 2, 4));
        let e = usage(launch(&hydra[..2], LaunchFlags::default(), "x"));
        assert!(e.contains("Hydra"), "{e}");

        let pmix = [
            ("PMIX_RANK", "0"),
            ("PMI_SIZE", "2"),
            ("RDMADIAG_COORDINATOR", "h"),
        ];
        assert_eq!(
            launch(&pmix, LaunchFlags::default(), "x").unwrap().launcher,
            Launcher::Pmix
        );
        let e = usage(launch(&[("PMIX_RANK", "0")], LaunchFlags::default(), "x"));
        assert!(e.contains("no size"), "{e}");
    }

    #[test]
    fn host_list_rank_by_name_or_local_address() {
        let flags = |h| LaunchFlags {
            hosts: Some(h),
            ..Default::default()
        };
        let l = launch(&[], flags("fab[1-4]"), "fab3").unwrap();
        assert_eq!((l.launcher, l.rank, l.size), (Launcher::HostList, 2, 4));
        assert_eq!(l.coordinator, ("fab1".into(), DEFAULT_COORDINATOR_PORT));
        let l = launch(&[], flags("fab1.lab,fab2.lab"), "fab2").unwrap();
        assert_eq!(l.rank, 1, "the short name matches");
        let l = launch(&[], flags("10.0.0.1,10.0.0.2,10.0.0.3"), "guest").unwrap();
        assert_eq!(l.rank, 1, "by a local address");
        let l = launch(&[("OMPI_COMM_WORLD_RANK", "0")], flags("a,b"), "b").unwrap();
        assert_eq!(
            l.launcher,
            Launcher::HostList,
            "--hosts wins over the environment"
        );
        assert!(usage(launch(&[], flags("a,b"), "c")).contains("not in --hosts"));
        assert!(usage(launch(&[], flags("a,a"), "a")).contains("matches 2"));
        assert!(usage(launch(&[], flags("a"), "a")).contains("at least 2"));
        assert!(usage(launch(&[], flags("a[1-"), "a")).contains("--hosts"));
        let e = usage(launch(&[], flags("n[1-1000]"), "c"));
        assert!(e.contains("n1,n2,n3,... 1000 hosts"), "{e}");
    }

    /// A thousand names that each cost a slow lookup: matching gives up within its budget and
    /// says why; literal addresses are matched without any lookup.
    #[test]
    fn matching_by_address_is_bounded_in_time() {
        let lookups = std::sync::atomic::AtomicUsize::new(0);
        let slow = |h: &str| {
            lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(200));
            h == "10.0.0.2"
        };
        let hosts = hostlist::expand("unresolvable[1-1000]").unwrap();
        let started = Instant::now();
        let me = ThisHost {
            hostname: "guest",
            is_local: &slow,
        };
        let e = format!("{:#}", own_position(&hosts, &me).unwrap_err());
        assert!(e.contains("gave up after 5s"), "{e}");
        assert!(started.elapsed() < ADDRESS_MATCH_BUDGET + Duration::from_secs(2));
        let mut hosts = hosts;
        hosts.push("10.0.0.2".into());
        lookups.store(0, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(own_position(&hosts, &me).unwrap(), 1000);
        assert_eq!(
            lookups.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "a literal address matched: no name is resolved"
        );
    }

    #[test]
    fn no_launcher_and_bad_values_are_usage_errors() {
        assert!(usage(launch(&[], LaunchFlags::default(), "x")).contains("no launcher"));
        let e = usage(launch(
            &[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "4294967295"),
                ("SLURM_NODELIST", "a,b"),
            ],
            LaunchFlags::default(),
            "a",
        ));
        assert!(e.contains("at most 65536"), "{e}");
        let e = usage(launch(
            &[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")],
            LaunchFlags::default(),
            "x",
        ));
        assert!(e.contains("SLURM_PROCID=x"), "{e}");
        let e = usage(launch(
            &[
                ("SLURM_PROCID", "2"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_NODELIST", "a,b"),
            ],
            LaunchFlags::default(),
            "x",
        ));
        assert!(e.contains("rank 2 of 2"), "{e}");
        let e = usage(launch(
            &[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "1"),
                ("SLURM_NODELIST", "a"),
            ],
            LaunchFlags::default(),
            "x",
        ));
        assert!(e.contains("at least 2"), "{e}");
    }

    #[test]
    fn coordinator_addresses() {
        let p = |s| parse_coordinator(s).map_err(|e| e.to_string());
        assert_eq!(p("h").unwrap(), ("h".into(), DEFAULT_COORDINATOR_PORT));
        assert_eq!(p("h:1").unwrap(), ("h".into(), 1));
        assert_eq!(p("[::1]:5").unwrap(), ("::1".into(), 5));
        assert_eq!(
            p("[::1]").unwrap(),
            ("::1".into(), DEFAULT_COORDINATOR_PORT)
        );
        assert_eq!(
            p("fe80::1").unwrap(),
            ("fe80::1".into(), DEFAULT_COORDINATOR_PORT)
        );
        for bad in [
            "", "h:", "h:0", "h:x", ":5", "[::1", "[::1]x", "[x]:0", "[]", "[::1]:0", "[h]:5",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }
}
