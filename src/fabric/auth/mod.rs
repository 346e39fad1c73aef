//! Who may join a fabric run: the credential each rank proves when it connects (a munge
//! credential of this uid and Slurm job, a key every rank holds, or none with `--insecure`),
//! and the per-connection HMAC-SHA256 that ties every later line, both ways, to that proof.
//!
//! The handshake, on every connection to the coordinator:
//! 1. the coordinator sends a [`Challenge`] (plain): the scheme it wants and a fresh nonce;
//! 2. the rank answers with a [`Proof`] (plain): with a key, its own nonce and
//!    HMAC(key, "proof" | coordinator nonce | rank nonce); under munge, a credential restricted to
//!    this uid whose payload names the job, the step, the rank, the coordinator's nonce and a
//!    fresh session key;
//! 3. from then on every line is `MAC JSON`, the MAC being HMAC(session, direction | sequence |
//!    JSON) with a counter per direction: a forged, altered, replayed or reordered line fails.
//!    With a key the session key is HMAC(key, "session" | both nonces), so the rank also knows it
//!    talks to a coordinator holding the key.

use super::launcher::{Launch, Launcher};
use super::protocol;
use crate::exit::UsageError;
use anyhow::{Context as _, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

mod channel;
mod munge;
mod step;

use crate::connect::key::random;
pub use channel::{Direction, OpenError, Opener, Sealer, channel, from_hex, to_hex};
use channel::{tag, verify_tag};
#[doc(hidden)]
pub use munge::check_unmunged;
use munge::{munge_encode, munge_payload, verify_munge};
pub use step::StepLayout;

/// The environment variable that carries the shared key.
pub const KEY_ENV: &str = "RDMADIAG_FABRIC_KEY";
/// The shortest key accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// munged's socket where Debian, RHEL and Slurm's own packages put it.
pub const MUNGE_SOCKET: &str = "/run/munge/munge.socket.2";
/// What every MAC and credential of this protocol starts with, so that none is valid elsewhere.
pub(crate) const DOMAIN: &[u8] = b"rdmadiag-fabric-v1";
pub(crate) const NONCE_LEN: usize = 16;

/// How the ranks of a run prove they belong to it.
#[derive(Clone)]
pub enum Auth {
    /// A secret every rank holds.
    Key {
        key: Vec<u8>,
        /// Where it came from, for messages ("RDMADIAG_FABRIC_KEY", "--key-file /etc/...").
        source: String,
    },
    /// Munge credentials of this uid for this Slurm job step.
    Munge(MungeJob),
    /// No proof: anyone who reaches the coordinator's port may join (`--insecure`).
    Insecure,
}

/// The Slurm job step every rank's munge credential must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MungeJob {
    pub job: String,
    pub step: String,
    /// The uid that may decode the credentials, and must have encoded them: this process's.
    pub uid: u32,
    /// munged's socket (None: munge's own default).
    pub socket: Option<PathBuf>,
    /// Rank 0's view of the step's nodes and placement: a credential must come from the node
    /// that runs the rank it claims (None: not checked; the other ranks never verify).
    pub layout: Option<StepLayout>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Key { source, .. } => write!(f, "Key(from {source})"),
            Auth::Munge(j) => write!(f, "Munge({j:?})"),
            Auth::Insecure => f.write_str("Insecure"),
        }
    }
}

/// The scheme's name on the wire and in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    Key,
    Munge,
    Insecure,
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scheme::Key => "a shared key",
            Scheme::Munge => "a munge credential",
            Scheme::Insecure => "no credential (--insecure)",
        })
    }
}

impl Auth {
    pub fn scheme(&self) -> Scheme {
        match self {
            Auth::Key { .. } => Scheme::Key,
            Auth::Munge(_) => Scheme::Munge,
            Auth::Insecure => Scheme::Insecure,
        }
    }

    /// A key given directly (tests, the library API).
    pub fn key(key: &[u8]) -> Auth {
        Auth::Key {
            key: key.to_vec(),
            source: "the caller".into(),
        }
    }
}

/// The coordinator's first line on a connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum Greeting {
    Challenge { scheme: Scheme, nonce: String },
}

/// The rank's answer to the challenge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "auth", rename_all = "snake_case")]
pub enum Proof {
    Key { nonce: String, mac: String },
    Munge { credential: String },
    Insecure,
}

/// The flags and environment that choose the scheme.
#[derive(Debug, Clone, Default)]
pub struct AuthFlags<'a> {
    pub key_file: Option<&'a Path>,
    pub insecure: bool,
}

/// Choose how this rank proves itself, the same way on every rank: `--key-file`, else
/// RDMADIAG_FABRIC_KEY, else munge under Slurm (munged's socket present), else `--insecure`;
/// without any, a usage error that says what to set.
pub fn choose(
    env: &dyn Fn(&str) -> Option<String>,
    flags: &AuthFlags,
    launch: &Launch,
) -> Result<Auth> {
    let env_key = env(KEY_ENV).filter(|k| !k.is_empty());
    if flags.insecure && (flags.key_file.is_some() || env_key.is_some()) {
        let which = if flags.key_file.is_some() {
            "--key-file"
        } else {
            KEY_ENV
        };
        return Err(UsageError(format!(
            "--insecure and {which} contradict each other: drop one"
        ))
        .into());
    }
    if let Some(path) = flags.key_file {
        let key = read_key_file(path)?;
        return Ok(Auth::Key {
            key,
            source: format!("--key-file {}", path.display()),
        });
    }
    if let Some(k) = env_key {
        check_key(
            k.as_bytes(),
            KEY_ENV,
            "in a file of mode 600 for --key-file, or exported",
        )?;
        return Ok(Auth::Key {
            key: k.into_bytes(),
            source: KEY_ENV.into(),
        });
    }
    if flags.insecure {
        return Ok(Auth::Insecure);
    }
    if launch.launcher == Launcher::Slurm {
        let job = env("SLURM_JOB_ID").or_else(|| env("SLURM_JOBID"));
        let socket = Path::new(MUNGE_SOCKET);
        match job {
            Some(job) if socket.exists() => {
                return Ok(Auth::Munge(MungeJob {
                    job,
                    step: env("SLURM_STEP_ID")
                        .or_else(|| env("SLURM_STEPID"))
                        .unwrap_or_default(),
                    uid: own_uid()?,
                    socket: None,
                    layout: (launch.rank == 0)
                        .then(|| StepLayout::from_env(env))
                        .flatten(),
                }));
            }
            Some(_) => {
                return Err(UsageError(format!(
                    "no key configured: under Slurm the ranks prove themselves with munge, but \
                     munged's socket {MUNGE_SOCKET} is missing on this node; start munged, or set \
                     {KEY_ENV} for every rank (srun --export=ALL,{KEY_ENV}), or --key-file FILE"
                ))
                .into());
            }
            None => {}
        }
    }
    Err(UsageError(format!(
        "no key configured: the rendezvous needs a credential so that only this run's ranks can \
         join; set {KEY_ENV} on every rank ({}) or --key-file FILE, or pass --insecure to let \
         anyone who reaches port {} join",
        match launch.launcher {
            Launcher::OpenMpi | Launcher::Pmix => "mpirun -x RDMADIAG_FABRIC_KEY",
            Launcher::Hydra => "export it, then mpiexec -genvlist RDMADIAG_FABRIC_KEY: never the key itself on a command line, where ps shows it",
            _ => "the same value everywhere",
        },
        launch.coordinator.1
    ))
    .into())
}

/// The largest key file read: a key is a line, not a file's worth.
pub const MAX_KEY_FILE: u64 = 1 << 16;

/// A key file: a regular file readable by its owner only (as ssh and munged insist), of at most
/// [`MAX_KEY_FILE`] bytes, holding a key that [`check_key`] accepts once a trailing newline is
/// dropped. Opened without blocking, so a FIFO or a device is refused, never waited on.
pub fn read_key_file(path: &Path) -> Result<Vec<u8>> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let shown = path.display();
    let usage =
        |what: String| anyhow::Error::from(UsageError(format!("--key-file {shown}: {what}")));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| usage(e.to_string()))?;
    let meta = file.metadata().map_err(|e| usage(e.to_string()))?;
    if !meta.is_file() {
        return Err(usage(
            "not a regular file (a key file holds the key)".into(),
        ));
    }
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(UsageError(format!(
            "--key-file {shown} may be read by others (mode {:o}): chmod 600 it",
            mode & 0o777
        ))
        .into());
    }
    if meta.len() > MAX_KEY_FILE {
        return Err(usage(format!(
            "{} bytes: a key file holds at most {MAX_KEY_FILE} (e.g. openssl rand -hex 32 > FILE)",
            meta.len()
        )));
    }
    let mut key = Vec::new();
    file.take(MAX_KEY_FILE + 1)
        .read_to_end(&mut key)
        .map_err(|e| usage(e.to_string()))?;
    if key.len() as u64 > MAX_KEY_FILE {
        return Err(usage(format!(
            "more than {MAX_KEY_FILE} bytes: not a key file"
        )));
    }
    while key.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        key.pop();
    }
    check_key(&key, &format!("--key-file {shown}"), "> FILE")?;
    Ok(key)
}

/// A key worth its name: at least [`MIN_KEY_LEN`] bytes, not only blanks, and at least 5
/// distinct bytes (16 spaces or `aaaa...` would pass the length and guard nothing; a random hex
/// key of 16 characters has fewer than 5 distinct ones with a chance under one in a million).
pub fn check_key(key: &[u8], source: &str, to: &str) -> Result<()> {
    let make = format!("e.g. openssl rand -hex 32 {to}");
    if key.len() < MIN_KEY_LEN {
        return Err(UsageError(format!(
            "{source} holds {} bytes: a key needs at least {MIN_KEY_LEN} ({make})",
            key.len()
        ))
        .into());
    }
    let mut seen = [false; 256];
    key.iter().for_each(|&b| seen[b as usize] = true);
    if key.iter().all(u8::is_ascii_whitespace) || seen.iter().filter(|s| **s).count() < 5 {
        return Err(UsageError(format!(
            "{source} is a key anyone could guess (blanks, or fewer than 5 distinct characters): \
             make a random one ({make})"
        ))
        .into());
    }
    Ok(())
}

/// This process's real uid, from /proc (no unsafe outside the verbs core).
fn own_uid() -> Result<u32> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no Uid line in /proc/self/status"))
}

/// What the coordinator learnt from a rank's proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub session: Option<[u8; 32]>,
    /// The rank a munge credential was made for (the hello must claim the same).
    pub rank: Option<u32>,
}

/// The coordinator's side, before the rank's hello: a fresh challenge.
pub fn challenge(auth: &Auth) -> Result<(Greeting, [u8; NONCE_LEN])> {
    let nonce = random::<NONCE_LEN>()?;
    Ok((
        Greeting::Challenge {
            scheme: auth.scheme(),
            nonce: to_hex(&nonce),
        },
        nonce,
    ))
}

/// The coordinator's side: check a rank's proof against the challenge it was sent. The error
/// says what failed ("bad key", "replayed credential", "another job", ...).
pub fn verify(auth: &Auth, nonce: &[u8; NONCE_LEN], proof: &Proof) -> Result<Verified> {
    match (auth, proof) {
        (Auth::Insecure, Proof::Insecure) => Ok(Verified {
            session: None,
            rank: None,
        }),
        (Auth::Key { key, .. }, Proof::Key { nonce: rn, mac }) => {
            let rn = from_hex(rn)
                .filter(|n| n.len() == NONCE_LEN)
                .ok_or_else(|| anyhow!("its proof carries no valid nonce"))?;
            let mac = from_hex(mac).ok_or_else(|| anyhow!("its proof carries no valid MAC"))?;
            if !verify_tag(key, &[DOMAIN, b"proof", nonce, &rn], &mac) {
                bail!("bad key (its proof does not match rank 0's key)");
            }
            Ok(Verified {
                session: Some(tag(key, &[DOMAIN, b"session", nonce, &rn])),
                rank: None,
            })
        }
        (Auth::Munge(job), Proof::Munge { credential }) => verify_munge(job, nonce, credential),
        (_, p) => {
            let theirs = match p {
                Proof::Key { .. } => Scheme::Key,
                Proof::Munge { .. } => Scheme::Munge,
                Proof::Insecure => Scheme::Insecure,
            };
            bail!(
                "it offers {theirs}, rank 0 wants {}{}",
                auth.scheme(),
                if theirs == Scheme::Insecure {
                    " (no key configured on that rank)"
                } else {
                    ""
                }
            )
        }
    }
}

/// What a rank sends when its scheme is not the coordinator's: its scheme, and no proof (so
/// rank 0 can say what that rank has).
pub fn mismatch(auth: &Auth) -> Proof {
    match auth {
        Auth::Key { .. } => Proof::Key {
            nonce: String::new(),
            mac: String::new(),
        },
        Auth::Munge(_) => Proof::Munge {
            credential: String::new(),
        },
        Auth::Insecure => Proof::Insecure,
    }
}

/// The rank's side: answer a challenge; returns the proof and the session key. Fails when the
/// coordinator wants another scheme (send [`mismatch`] then).
pub fn prove(auth: &Auth, rank: u32, greeting: &Greeting) -> Result<(Proof, Option<[u8; 32]>)> {
    let Greeting::Challenge { scheme, nonce } = greeting;
    if *scheme != auth.scheme() {
        bail!(
            "rank 0 wants {scheme} and this rank has {}: every rank needs the same credential \
             (the same {KEY_ENV}, --key-file, or --insecure on all of them)",
            auth.scheme()
        );
    }
    let cn = from_hex(nonce)
        .filter(|n| n.len() == NONCE_LEN)
        .ok_or_else(|| anyhow!("the coordinator's challenge carries no valid nonce"))?;
    match auth {
        Auth::Insecure => Ok((Proof::Insecure, None)),
        Auth::Key { key, .. } => {
            let rn = random::<NONCE_LEN>()?;
            let mac = tag(key, &[DOMAIN, b"proof", &cn, &rn]);
            Ok((
                Proof::Key {
                    nonce: to_hex(&rn),
                    mac: to_hex(&mac),
                },
                Some(tag(key, &[DOMAIN, b"session", &cn, &rn])),
            ))
        }
        Auth::Munge(job) => {
            let session = random::<32>()?;
            let payload = munge_payload(job, rank, nonce, &session);
            let credential = munge_encode(job, &payload)?;
            Ok((Proof::Munge { credential }, Some(session)))
        }
    }
}

/// Read one line of at most [`MAX_LINE`] bytes and parse it as plain JSON.
pub fn read_plain<T: serde::de::DeserializeOwned>(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> Result<T> {
    if protocol::read_line(r, buf)? == 0 {
        return Err(protocol::ConnectionClosed.into());
    }
    serde_json::from_slice(buf).map_err(|e| anyhow!("an unreadable line ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(launcher: Launcher) -> Launch {
        Launch {
            launcher,
            rank: 1,
            size: 2,
            coordinator: ("h".into(), 18600),
        }
    }

    #[test]
    fn key_handshake_and_channel() {
        let auth = Auth::key(b"0123456789abcdef0123");
        let (g, n) = challenge(&auth).unwrap();
        let (proof, rank_session) = prove(&auth, 1, &g).unwrap();
        let v = verify(&auth, &n, &proof).unwrap();
        assert_eq!(v.session, rank_session);
        let wrong = Auth::key(b"another key of 16+ bytes");
        let e = verify(&wrong, &n, &proof).unwrap_err().to_string();
        assert!(e.contains("bad key"), "{e}");
        // The same proof against a fresh challenge (a replay) fails.
        let (_, n2) = challenge(&auth).unwrap();
        assert!(verify(&auth, &n2, &proof).is_err());

        let (mut seal, _) = channel(v.session, Direction::ToCoordinator);
        let (_, mut open) = channel(rank_session, Direction::ToRank);
        let l1 = seal.seal(&serde_json::json!({"a": 1})).unwrap();
        let l2 = seal.seal(&serde_json::json!({"a": 2})).unwrap();
        let upper = String::from_utf8(l1.clone()).unwrap();
        let (mac, rest) = upper.split_once(' ').unwrap();
        let upper = format!("{} {rest}", mac.to_uppercase());
        assert!(
            open.clone().open(upper.as_bytes()).is_err(),
            "one spelling of a MAC"
        );
        assert_eq!(open.open(&l1).unwrap(), br#"{"a":1}"#);
        assert_eq!(open.open(&l1), Err(OpenError::BadMac), "replayed");
        assert_eq!(open.open(&l2).unwrap(), br#"{"a":2}"#);
        let mut forged = seal.seal(&serde_json::json!({"a": 3})).unwrap();
        let n = forged.len();
        forged[n - 3] = b'4';
        assert_eq!(open.open(&forged), Err(OpenError::BadMac), "altered");
        assert_eq!(open.open(br#"{"a":3}"#), Err(OpenError::Unsealed));
        // A line sent one way is no good the other way.
        let (mut coordinator, mut reflected) = channel(v.session, Direction::ToRank);
        let (_, mut rank) = channel(v.session, Direction::ToCoordinator);
        let l = coordinator.seal(&1).unwrap();
        assert!(rank.open(&l).is_ok());
        assert_eq!(reflected.open(&l), Err(OpenError::BadMac), "reflected");
    }

    #[test]
    fn schemes_must_agree() {
        let key = Auth::key(b"0123456789abcdef0123");
        let (g, n) = challenge(&Auth::Insecure).unwrap();
        assert!(
            prove(&key, 1, &g)
                .unwrap_err()
                .to_string()
                .contains("rank 0 wants no credential")
        );
        let (proof, _) = prove(&Auth::Insecure, 1, &g).unwrap();
        let (_, kn) = challenge(&key).unwrap();
        let e = verify(&key, &kn, &proof).unwrap_err().to_string();
        assert!(e.contains("no key configured on that rank"), "{e}");
        assert!(
            verify(&Auth::Insecure, &n, &proof)
                .unwrap()
                .session
                .is_none()
        );
    }

    #[test]
    fn choosing_the_scheme() {
        let none = |_: &str| None;
        let e = choose(&none, &AuthFlags::default(), &launch(Launcher::OpenMpi))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no key configured") && e.contains("mpirun -x"),
            "{e}"
        );
        let short = |k: &str| (k == KEY_ENV).then(|| "short".to_string());
        assert!(choose(&short, &AuthFlags::default(), &launch(Launcher::HostList)).is_err());
        let good = |k: &str| (k == KEY_ENV).then(|| "a-long-enough-key-1234".to_string());
        let a = choose(&good, &AuthFlags::default(), &launch(Launcher::Slurm)).unwrap();
        assert_eq!(a.scheme(), Scheme::Key, "an explicit key wins over munge");
        let insecure = AuthFlags {
            insecure: true,
            ..Default::default()
        };
        assert!(choose(&good, &insecure, &launch(Launcher::HostList)).is_err());
        let a = choose(&none, &insecure, &launch(Launcher::Slurm)).unwrap();
        assert_eq!(a.scheme(), Scheme::Insecure);
    }

    #[test]
    fn key_files_must_be_private_and_long_enough() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("rdmadiag-key.{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("key");
        std::fs::write(&f, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_key_file(&f).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_key_file(&f).unwrap(), b"0123456789abcdef0123");
        std::fs::write(&f, "short\n").unwrap();
        assert!(
            read_key_file(&f)
                .unwrap_err()
                .to_string()
                .contains("at least")
        );
        assert!(read_key_file(&dir.join("none")).is_err());
        for (bad, says) in [
            (b" ".repeat(16), "anyone could guess"),
            (b"abababababababababab".to_vec(), "anyone could guess"),
            (vec![b'k'; MAX_KEY_FILE as usize + 1], "at most 65536"),
        ] {
            std::fs::write(&f, &bad).unwrap();
            let e = read_key_file(&f).unwrap_err();
            assert!(e.is::<UsageError>() && e.to_string().contains(says), "{e}");
        }
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || tx.send(read_key_file(&path).map_err(|e| e.to_string())));
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("a FIFO with no writer is refused, not waited on")
            .unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(read_key_file(Path::new("/dev/null")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(
            from_hex(&to_hex(&[0, 1, 254, 255])).unwrap(),
            [0, 1, 254, 255]
        );
        assert!(from_hex("abc").is_none() && from_hex("zz").is_none() && from_hex("é1").is_none());
    }
}
