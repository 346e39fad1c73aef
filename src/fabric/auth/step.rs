//! The Slurm job step a munge credential must come from: its nodes, and which node runs each
//! rank. munge proves the uid and the host that made a credential (`ENCODE_HOST`, from the
//! credential itself, not from its payload); what a payload claims (job, step, rank) is only
//! believed when that host is the node the step placed that rank on, as Slurm's own launch
//! credential ties a task to its node. A process of the same uid outside the job can then claim
//! no rank but one of its own node's, and only one the job has not started yet.

use crate::fabric::hostlist;
use anyhow::{Result, bail};
use std::net::{IpAddr, ToSocketAddrs as _};
use std::time::Duration;

/// The bound on resolving one node's name when its credential's host name does not say it.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The step's nodes (`SLURM_STEP_NODELIST`) and how its tasks lie on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepLayout {
    pub nodes: Vec<String>,
    placement: Placement,
}

/// How ranks map to nodes: Slurm's block and cyclic distributions, from the tasks each node
/// runs (`SLURM_STEP_TASKS_PER_NODE`); any other (plane, arbitrary) only as "one of the nodes".
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placement {
    Block(Vec<u32>),
    Cyclic(Vec<u32>),
    AnyNode,
}

/// The host that made a credential, as unmunge prints it: `name (address)` or an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub name: Option<String>,
    pub address: Option<IpAddr>,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, &self.address) {
            (Some(n), Some(a)) => write!(f, "{n} ({a})"),
            (Some(n), None) => f.write_str(n),
            (None, Some(a)) => write!(f, "{a}"),
            (None, None) => f.write_str("an unknown host"),
        }
    }
}

/// unmunge's `ENCODE_HOST` value. None when it names no host at all (munged without an origin
/// address prints 0.0.0.0).
pub fn parse_origin(value: &str) -> Option<Origin> {
    let value = value.trim();
    let (name, address) = match value.rsplit_once('(') {
        Some((n, a)) => (n.trim(), a.trim_end_matches(')').trim()),
        None => match value.parse::<IpAddr>() {
            Ok(_) => ("", value),
            Err(_) => (value, ""),
        },
    };
    let address = address
        .parse::<IpAddr>()
        .ok()
        .filter(|a| !a.is_unspecified());
    let name = Some(name)
        .filter(|n| {
            !n.is_empty() && *n != "???" && n.len() <= 255 && !n.contains(char::is_whitespace)
        })
        .map(str::to_string);
    (name.is_some() || address.is_some()).then_some(Origin { name, address })
}

/// Slurm's tasks-per-node list (`2(x3),1`) expanded to one count per node; None when it is
/// malformed or does not cover exactly `nodes` nodes.
fn tasks_per_node(list: &str, nodes: usize) -> Option<Vec<u32>> {
    let mut counts = Vec::new();
    for item in list.trim().split(',') {
        let (count, times) = match item.split_once("(x") {
            Some((c, t)) => (c, t.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (item, 1),
        };
        let count = count.trim().parse::<u32>().ok()?;
        if times == 0 || counts.len() + times > nodes {
            return None;
        }
        counts.extend(std::iter::repeat_n(count, times));
    }
    (counts.len() == nodes).then_some(counts)
}

impl StepLayout {
    /// The step's layout from Slurm's variables; None without a node list.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Option<StepLayout> {
        let pick = |names: &[&str]| names.iter().find_map(|n| env(n));
        let list = pick(&[
            "SLURM_STEP_NODELIST",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
        ])?;
        let nodes = hostlist::expand(&list).ok()?;
        let counts = pick(&["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"])
            .and_then(|t| tasks_per_node(&t, nodes.len()));
        let distribution = env("SLURM_DISTRIBUTION").unwrap_or_default();
        let first = distribution
            .split([':', ','])
            .next()
            .unwrap_or_default()
            .trim();
        let placement = match (counts, first) {
            (Some(c), "" | "block") => Placement::Block(c),
            (Some(c), "cyclic") => Placement::Cyclic(c),
            _ => Placement::AnyNode,
        };
        let mut layout = StepLayout { nodes, placement };
        // Where this task's own node contradicts the placement worked out, trust only the nodes.
        let own = env("SLURM_PROCID").and_then(|r| r.trim().parse::<u32>().ok());
        if let (Some(rank), Some(node)) = (own, env("SLURMD_NODENAME"))
            && layout
                .node_of(rank)
                .ok()
                .flatten()
                .is_some_and(|n| n != node)
        {
            layout.placement = Placement::AnyNode;
        }
        Some(layout)
    }

    /// The node that runs `rank`: Ok(None) when the placement is not known, an error when the
    /// step has no such rank.
    pub fn node_of(&self, rank: u32) -> Result<Option<&str>> {
        let node = match &self.placement {
            Placement::AnyNode => return Ok(None),
            Placement::Block(counts) => {
                let mut first = 0u64;
                counts.iter().position(|&c| {
                    first += u64::from(c);
                    u64::from(rank) < first
                })
            }
            Placement::Cyclic(counts) => cyclic_node(counts, rank),
        };
        match node {
            Some(i) => Ok(Some(&self.nodes[i])),
            None => bail!("the step has no rank {rank}"),
        }
    }

    /// Fail unless a credential made on `origin` may speak for `rank`: the node Slurm placed
    /// that rank on (any node of the step when the placement is not known), by name or, when
    /// the names differ, by one of the node's addresses.
    pub fn check(&self, rank: u32, origin: &Origin, job: &str) -> Result<()> {
        let resolve = |n: &str| resolve(n, RESOLVE_TIMEOUT);
        self.check_with(rank, origin, job, &resolve)
    }

    fn check_with(
        &self,
        rank: u32,
        origin: &Origin,
        job: &str,
        resolve: &dyn Fn(&str) -> Vec<IpAddr>,
    ) -> Result<()> {
        let short = |h: &str| h.split('.').next().unwrap_or(h).to_ascii_lowercase();
        let by_name = |node: &str| {
            origin
                .name
                .as_deref()
                .is_some_and(|n| short(n) == short(node))
        };
        let by_address = |node: &str| origin.address.is_some_and(|a| resolve(node).contains(&a));
        match self.node_of(rank)? {
            Some(node) if by_name(node) || by_address(node) => Ok(()),
            Some(node) => bail!(
                "its munge credential was made on {origin}, but rank {rank} of job {job} runs on \
                 {node}"
            ),
            None if self.nodes.iter().any(|n| by_name(n)) => Ok(()),
            // Names first for every node, addresses only when no name matched.
            None if self.nodes.iter().take(64).any(|n| by_address(n)) => Ok(()),
            None => {
                bail!("its munge credential was made on {origin}, which is not a node of job {job}")
            }
        }
    }
}

/// Cyclic placement: rank r goes to the next node, in turn, that still has tasks to take.
fn cyclic_node(counts: &[u32], rank: u32) -> Option<usize> {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    if u64::from(rank) >= total {
        return None;
    }
    let mut left = u64::from(rank);
    let mut round = 0u32;
    loop {
        // The nodes still taking tasks in this round; skip whole rounds while rank lies beyond.
        let taking: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > round).collect();
        let next = counts
            .iter()
            .filter(|&&c| c > round)
            .map(|&c| c - round)
            .min()
            .unwrap_or(1);
        let span = taking.len() as u64 * u64::from(next);
        if left < span {
            return Some(taking[(left % taking.len() as u64) as usize]);
        }
        left -= span;
        round += next;
    }
}

/// A node's addresses (a literal address as itself), within `timeout` (a name whose lookup
/// hangs gives none).
fn resolve(node: &str, timeout: Duration) -> Vec<IpAddr> {
    if let Ok(a) = node.parse::<IpAddr>() {
        return vec![a];
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let name = node.to_string();
    std::thread::spawn(move || {
        let found: Vec<IpAddr> = (name.as_str(), 0)
            .to_socket_addrs()
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default();
        let _ = tx.send(found);
    });
    rx.recv_timeout(timeout).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(vars: &[(&str, &str)]) -> StepLayout {
        let env = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        StepLayout::from_env(&env).unwrap()
    }

    fn origin(s: &str) -> Origin {
        parse_origin(s).unwrap()
    }

    #[test]
    fn origins_as_unmunge_prints_them() {
        let o = origin("fab2 (10.78.0.2)");
        assert_eq!(o.name.as_deref(), Some("fab2"));
        assert_eq!(o.address, Some("10.78.0.2".parse().unwrap()));
        assert_eq!(origin("10.0.0.1").name, None);
        assert_eq!(origin("node7").address, None);
        assert_eq!(origin("??? (10.0.0.1)").name, None);
        assert!(parse_origin("0.0.0.0").is_none());
        assert!(parse_origin("??? (0.0.0.0)").is_none());
        assert!(parse_origin("").is_none());
    }

    #[test]
    fn tasks_per_node_lists() {
        assert_eq!(tasks_per_node("2(x3),1", 4), Some(vec![2, 2, 2, 1]));
        assert_eq!(tasks_per_node("1(x4)", 4), Some(vec![1; 4]));
        assert_eq!(tasks_per_node("1(x4)", 3), None);
        assert_eq!(tasks_per_node("1(x18446744073709551615)", 3), None);
        assert_eq!(tasks_per_node("x", 1), None);
        assert_eq!(tasks_per_node("1(x0)", 0), None);
    }

    #[test]
    fn block_and_cyclic_placement() {
        let block = layout(&[
            ("SLURM_STEP_NODELIST", "n[1-3]"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2),1"),
        ]);
        let on = |l: &StepLayout, r| l.node_of(r).unwrap().map(str::to_string);
        let got: Vec<_> = (0..5).map(|r| on(&block, r).unwrap()).collect();
        assert_eq!(got, ["n1", "n1", "n2", "n2", "n3"]);
        assert!(block.node_of(5).is_err());
        let cyclic = layout(&[
            ("SLURM_STEP_NODELIST", "n[1-3]"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2),1"),
            ("SLURM_DISTRIBUTION", "cyclic:block"),
        ]);
        let got: Vec<_> = (0..5).map(|r| on(&cyclic, r).unwrap()).collect();
        assert_eq!(got, ["n1", "n2", "n3", "n1", "n2"]);
        assert!(cyclic.node_of(5).is_err());
        let plane = layout(&[
            ("SLURM_STEP_NODELIST", "n[1-3]"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2),1"),
            ("SLURM_DISTRIBUTION", "plane=2"),
        ]);
        assert_eq!(plane.node_of(1).unwrap(), None);
        let contradicted = layout(&[
            ("SLURM_STEP_NODELIST", "n[1-3]"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2),1"),
            ("SLURM_PROCID", "1"),
            ("SLURMD_NODENAME", "n2"),
        ]);
        assert_eq!(
            contradicted.node_of(0).unwrap(),
            None,
            "rank 1 is on n2: not block"
        );
    }

    #[test]
    fn a_credential_speaks_only_for_its_own_nodes_ranks() {
        let l = layout(&[
            ("SLURM_STEP_NODELIST", "fab[1-4]"),
            ("SLURM_STEP_TASKS_PER_NODE", "1(x4)"),
        ]);
        let no_dns = |_: &str| Vec::new();
        let fab2 = origin("fab2.cluster (10.78.0.2)");
        assert!(l.check_with(1, &fab2, "7.0", &no_dns).is_ok());
        let e = l
            .check_with(3, &fab2, "7.0", &no_dns)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("made on fab2.cluster (10.78.0.2), but rank 3 of job 7.0 runs on fab4"),
            "{e}"
        );
        // By address when the credential's name is not the node's.
        let dns = |n: &str| {
            if n == "fab2" {
                vec!["10.78.0.2".parse().unwrap()]
            } else {
                Vec::new()
            }
        };
        assert!(l.check_with(1, &origin("10.78.0.2"), "7.0", &dns).is_ok());
        assert!(l.check_with(2, &origin("10.78.0.2"), "7.0", &dns).is_err());
        // Placement unknown: any node of the step, none outside it.
        let any = layout(&[("SLURM_STEP_NODELIST", "fab[1-4]")]);
        assert!(any.check_with(3, &fab2, "7.0", &no_dns).is_ok());
        let e = any
            .check_with(3, &origin("fab9 (10.78.0.9)"), "7.0", &no_dns)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a node of job 7.0"), "{e}");
    }

    #[test]
    fn resolving_literals_needs_no_lookup() {
        assert_eq!(
            resolve("192.0.2.7", Duration::ZERO),
            vec!["192.0.2.7".parse::<IpAddr>().unwrap()]
        );
    }
}
