//! `--slurm-drain`: drain this Slurm node when a check failed, and resume it when every check
//! passed, but only if rdmadiag drained it (an operator's drain is never undone or replaced).

use crate::report::check::{CheckReport, SlurmAction, SlurmOutcome, first_failure};
use anyhow::{Context as _, Result, bail};
use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What every reason rdmadiag sets starts with; only such a drain is ever resumed.
pub const REASON_PREFIX: &str = "rdmadiag:";
/// Longest wait for one scontrol call.
const SCONTROL_TIMEOUT: Duration = Duration::from_secs(10);
/// Slurm keeps reasons short; longer ones are cut here.
const MAX_REASON: usize = 200;

/// This node as Slurm knows it, and the scontrol to talk to it with.
#[derive(Debug, Clone)]
pub struct Slurm {
    pub node: String,
    pub scontrol: PathBuf,
}

/// The node's state and reason, from `scontrol show node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// e.g. `IDLE+DRAIN`.
    pub state: String,
    /// Without the `[user@time]` Slurm appends; None when there is none.
    pub reason: Option<String>,
}

impl NodeStatus {
    fn drained(&self) -> bool {
        self.state.contains("DRAIN")
    }
}

/// The first executable `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

impl Slurm {
    /// The node from `$SLURMD_NODENAME` (set for HealthCheckProgram) and scontrol from PATH;
    /// either missing is an error before anything is checked.
    pub fn from_env() -> Result<Slurm> {
        let node = std::env::var("SLURMD_NODENAME")
            .ok()
            .filter(|n| !n.trim().is_empty())
            .context(
                "--slurm-drain needs SLURMD_NODENAME (slurmd sets it for HealthCheckProgram; \
                 elsewhere export it, e.g. SLURMD_NODENAME=$(hostname -s))",
            )?;
        let scontrol = on_path("scontrol").with_context(|| {
            "--slurm-drain needs scontrol on PATH (Debian package slurm-client)".to_string()
        })?;
        Ok(Slurm { node, scontrol })
    }

    /// Run scontrol with `args`; its stdout, or an error naming the command and what it said.
    fn scontrol(&self, args: &[String]) -> Result<String> {
        let shown = format!("scontrol {}", args.join(" "));
        let mut child = Command::new(&self.scontrol)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", self.scontrol.display()))?;
        let start = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if start.elapsed() >= SCONTROL_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{shown} did not finish within {} s (is slurmctld reachable?)",
                    SCONTROL_TIMEOUT.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let (mut out, mut err) = (String::new(), String::new());
        if let Some(mut s) = child.stdout.take() {
            s.read_to_string(&mut out)?;
        }
        if let Some(mut s) = child.stderr.take() {
            s.read_to_string(&mut err)?;
        }
        if !status.success() {
            let said = err
                .lines()
                .chain(out.lines())
                .find(|l| !l.trim().is_empty());
            bail!(
                "{shown} failed ({status}){}",
                said.map(|s| format!(": {}", s.trim())).unwrap_or_default()
            );
        }
        Ok(out)
    }

    /// The node's state and reason now.
    pub fn status(&self) -> Result<NodeStatus> {
        let out = self.scontrol(&["show".into(), "node".into(), self.node.clone()])?;
        parse_show_node(&out).with_context(|| {
            format!(
                "scontrol show node {} printed no State= for the node",
                self.node
            )
        })
    }

    /// Drain or resume the node as the report says (see [`decide`]).
    pub fn apply(&self, report: &CheckReport) -> Result<SlurmOutcome> {
        let before = self.status()?;
        let failure = first_failure(report);
        let (action, reason, detail) = decide(failure.as_deref(), &before);
        let node = format!("NodeName={}", self.node);
        match action {
            SlurmAction::Drain => {
                let reason = reason.clone().unwrap_or_default();
                self.scontrol(&[
                    "update".into(),
                    node,
                    "State=DRAIN".into(),
                    format!("Reason={reason}"),
                ])?;
            }
            SlurmAction::Resume => {
                self.scontrol(&["update".into(), node, "State=RESUME".into()])?;
            }
            SlurmAction::None => {}
        }
        Ok(SlurmOutcome {
            node: self.node.clone(),
            action,
            previous_reason: before.reason,
            reason,
            detail,
        })
    }
}

/// What to do: with a failure, drain with `rdmadiag: <failure>` unless someone else's drain is
/// in place; without one, resume only a drain whose reason rdmadiag set.
pub fn decide(failure: Option<&str>, now: &NodeStatus) -> (SlurmAction, Option<String>, String) {
    let ours = now
        .reason
        .as_deref()
        .is_some_and(|r| r.starts_with(REASON_PREFIX));
    match failure {
        Some(_) if now.drained() && !ours => (
            SlurmAction::None,
            None,
            format!(
                "already drained by someone else (reason \"{}\"): left as it is",
                now.reason.as_deref().unwrap_or("")
            ),
        ),
        Some(f) => {
            let mut reason = format!("{REASON_PREFIX} {f}");
            if reason.len() > MAX_REASON {
                let mut cut = MAX_REASON - 3;
                while !reason.is_char_boundary(cut) {
                    cut -= 1;
                }
                reason.truncate(cut);
                reason.push_str("...");
            }
            let detail = format!("drained: {reason}");
            (SlurmAction::Drain, Some(reason), detail)
        }
        None if now.drained() && ours => (
            SlurmAction::Resume,
            None,
            "every check passed: resumed (rdmadiag had drained it)".into(),
        ),
        None if now.drained() => (
            SlurmAction::None,
            None,
            format!(
                "every check passed; drained by someone else (reason \"{}\"): left drained",
                now.reason.as_deref().unwrap_or("")
            ),
        ),
        None => (
            SlurmAction::None,
            None,
            "every check passed; not drained: nothing to do".into(),
        ),
    }
}

/// State and reason from `scontrol show node NAME`: `State=IDLE+DRAIN ...` and a line
/// `Reason=text [user@time]`.
pub fn parse_show_node(text: &str) -> Option<NodeStatus> {
    let state = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("State=").filter(|s| !s.is_empty()))?
        .to_string();
    let reason = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("Reason="))
        .map(|r| {
            let r = r.trim_end();
            // Slurm appends who set it and when: " [root@2026-12-03T12:00:00]".
            match r.rfind(" [") {
                Some(at) if r.ends_with(']') => r[..at].to_string(),
                _ => r.to_string(),
            }
        })
        .filter(|r| !r.is_empty() && r != "(null)");
    Some(NodeStatus { state, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW: &str = "NodeName=lab1 Arch=x86_64 CoresPerSocket=1\n   \
        CPUAlloc=0 CPUTot=1 CPULoad=0.00\n   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0\n   \
        Partitions=lab\n   Reason=rdmadiag: rxe0:1: state DOWN, expected ACTIVE \
        [root@2026-12-03T12:00:00]\n";

    fn status(state: &str, reason: Option<&str>) -> NodeStatus {
        NodeStatus {
            state: state.into(),
            reason: reason.map(String::from),
        }
    }

    #[test]
    fn show_node_gives_state_and_reason_without_who_and_when() {
        let s = parse_show_node(SHOW).unwrap();
        assert_eq!(s.state, "IDLE+DRAIN");
        assert_eq!(
            s.reason.as_deref(),
            Some("rdmadiag: rxe0:1: state DOWN, expected ACTIVE")
        );
        let idle = parse_show_node("NodeName=lab1\n   State=IDLE ThreadsPerCore=1\n").unwrap();
        assert_eq!(idle, status("IDLE", None));
        assert!(parse_show_node("Node lab1 not found").is_none());
    }

    #[test]
    fn drain_on_failure_resume_only_our_own_drain() {
        let (a, r, _) = decide(Some("rxe0:1: rate 2.5 Gb/s"), &status("IDLE", None));
        assert_eq!(a, SlurmAction::Drain);
        assert_eq!(r.as_deref(), Some("rdmadiag: rxe0:1: rate 2.5 Gb/s"));
        // Our own earlier drain gets the new reason.
        let ours = status("IDLE+DRAIN", Some("rdmadiag: old"));
        assert_eq!(decide(Some("new"), &ours).0, SlurmAction::Drain);
        assert_eq!(decide(None, &ours).0, SlurmAction::Resume);
        // An operator's drain is neither replaced nor undone.
        let theirs = status("IDLE+DRAIN", Some("bad DIMM, ticket 42"));
        assert_eq!(decide(Some("x"), &theirs).0, SlurmAction::None);
        let (a, _, detail) = decide(None, &theirs);
        assert_eq!(a, SlurmAction::None);
        assert!(detail.contains("bad DIMM"), "{detail}");
        assert_eq!(decide(None, &status("IDLE", None)).0, SlurmAction::None);
        let long = "x".repeat(500);
        let (_, r, _) = decide(Some(&long), &status("IDLE", None));
        assert!(r.unwrap().len() <= MAX_REASON);
    }
}
