//! Munge credentials through the `munge` and `unmunge` programs (as Slurm sites have them; no C
//! binding, so no unsafe outside the verbs core): a credential restricted to this uid whose
//! payload names the job step, the rank, the coordinator's nonce and the session key; munged's
//! own replay cache refuses one decoded before. Rank 0 believes the payload's rank only from the
//! node the step placed that rank on (the credential's own `ENCODE_HOST`, see [`super::step`]).

use super::channel::{from_hex, to_hex};
use super::step::parse_origin;
use super::{DOMAIN, KEY_ENV, MungeJob, NONCE_LEN, Verified};
use crate::fabric::protocol::MAX_LINE;
use anyhow::{Result, anyhow, bail};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The bound on one `munge` or `unmunge` call.
const MUNGE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn munge_payload(job: &MungeJob, rank: u32, nonce: &str, session: &[u8; 32]) -> String {
    format!(
        "{}\njob={}\nstep={}\nrank={rank}\nnonce={nonce}\nsession={}\n",
        String::from_utf8_lossy(DOMAIN),
        job.job,
        job.step,
        to_hex(session)
    )
}

fn munge_command(program: &str, job: &MungeJob) -> Command {
    let mut c = Command::new(program);
    if let Some(s) = &job.socket {
        c.arg("--socket").arg(s);
    }
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run a munge program with `input` on stdin, within [`MUNGE_TIMEOUT`].
fn run_munge(mut cmd: Command, input: &[u8], what: &str) -> Result<std::process::Output> {
    let mut child = cmd.spawn().map_err(|e| {
        anyhow!("cannot run {what}: {e} (install munge, or set {KEY_ENV} on every rank)")
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
    }
    let deadline = Instant::now() + MUNGE_TIMEOUT;
    loop {
        if child.try_wait()?.is_some() {
            return Ok(child.wait_with_output()?);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{what} did not answer within {}: is munged running?",
                humantime::format_duration(MUNGE_TIMEOUT)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn munge_error(out: &std::process::Output) -> String {
    let e = String::from_utf8_lossy(&out.stderr);
    let e = e.trim();
    let e = e.strip_prefix("munge: Error: ").unwrap_or(e);
    let e = e.strip_prefix("unmunge: Error: ").unwrap_or(e);
    if e.is_empty() {
        format!("exit status {}", out.status.code().unwrap_or(-1))
    } else {
        e.lines().next().unwrap_or(e).to_string()
    }
}

pub(super) fn munge_encode(job: &MungeJob, payload: &str) -> Result<String> {
    let mut cmd = munge_command("munge", job);
    cmd.arg("--restrict-uid").arg(job.uid.to_string());
    let out = run_munge(cmd, payload.as_bytes(), "munge")?;
    if !out.status.success() {
        bail!("munge could not make a credential: {}", munge_error(&out));
    }
    let cred = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !cred.starts_with("MUNGE:") {
        bail!("munge printed no credential");
    }
    Ok(cred)
}

pub(super) fn verify_munge(
    job: &MungeJob,
    nonce: &[u8; NONCE_LEN],
    credential: &str,
) -> Result<Verified> {
    if credential.len() > MAX_LINE || !credential.starts_with("MUNGE:") {
        bail!("its munge credential is malformed");
    }
    let mut cmd = munge_command("unmunge", job);
    cmd.args(["--keys", "STATUS,UID,ENCODE_HOST"]);
    let out = run_munge(cmd, credential.as_bytes(), "unmunge")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() && !text.lines().any(|l| l.starts_with("STATUS:")) {
        bail!("its munge credential was refused: {}", munge_error(&out));
    }
    check_unmunged(job, nonce, out.status.success(), &text)
}

/// What `unmunge --keys STATUS,UID,ENCODE_HOST` printed for a rank's credential (`success`: its
/// exit status was 0), checked against the job and the challenge: metadata lines `KEY: value`,
/// a blank line, then the payload `munge_payload` wrote. The uid, the domain, the job and step,
/// the nonce and, with a layout, the host that made it must all agree; the rank and the session
/// key are what the credential then proves. Runs no program (a layout may resolve its nodes'
/// names), so it can be fuzzed without munged.
#[doc(hidden)]
pub fn check_unmunged(
    job: &MungeJob,
    nonce: &[u8; NONCE_LEN],
    success: bool,
    text: &str,
) -> Result<Verified> {
    if !success {
        // munged's own replay cache refuses a credential decoded before ("Replayed credential").
        let status = text
            .lines()
            .find_map(|l| l.strip_prefix("STATUS:"))
            .map_or("unmunge failed", str::trim);
        bail!("its munge credential was refused: {status}");
    }
    let (meta, payload) = text
        .split_once("\n\n")
        .ok_or_else(|| anyhow!("unmunge printed no payload"))?;
    let uid = meta
        .lines()
        .find_map(|l| l.strip_prefix("UID:"))
        .and_then(|v| {
            // "root (0)", or "0" alone.
            let v = v.trim();
            let n = v
                .rsplit_once('(')
                .map_or(v, |(_, n)| n.trim_end_matches(')'));
            n.trim().parse::<u32>().ok()
        })
        .ok_or_else(|| anyhow!("unmunge printed no UID"))?;
    if uid != job.uid {
        bail!(
            "its munge credential is of uid {uid}, not rank 0's uid {}",
            job.uid
        );
    }
    let mut lines = payload.lines();
    if lines.next().map(str::as_bytes) != Some(DOMAIN) {
        bail!("its munge credential is not an rdmadiag fabric credential");
    }
    let fields: std::collections::BTreeMap<&str, &str> =
        lines.filter_map(|l| l.split_once('=')).collect();
    let field = |k: &str| fields.get(k).copied().unwrap_or_default();
    if field("job") != job.job || field("step") != job.step {
        bail!(
            "its munge credential is for job {}.{}, not this run's {}.{}",
            field("job"),
            field("step"),
            job.job,
            job.step
        );
    }
    if from_hex(field("nonce")).as_deref() != Some(&nonce[..]) {
        bail!("its munge credential answers another challenge (replayed)");
    }
    let rank = field("rank")
        .parse::<u32>()
        .map_err(|_| anyhow!("its munge credential names no rank"))?;
    if let Some(layout) = &job.layout {
        let origin = meta
            .lines()
            .find_map(|l| l.strip_prefix("ENCODE_HOST:"))
            .and_then(parse_origin)
            .ok_or_else(|| {
                anyhow!(
                    "its munge credential names no host that made it (munged there has no origin \
                     address: start it with --origin)"
                )
            })?;
        layout.check(rank, &origin, &format!("{}.{}", job.job, job.step))?;
    }
    let session: [u8; 32] = from_hex(field("session"))
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| anyhow!("its munge credential carries no session key"))?;
    Ok(Verified {
        session: Some(session),
        rank: Some(rank),
    })
}
