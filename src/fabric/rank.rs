//! One rank's side of a fabric run: join the coordinator (retrying with backoff until a
//! deadline), prove it belongs to the run ([`super::auth`]), then run each round's pair test
//! through a [`PairRunner`] and report it.

use super::auth::{self, Auth, Direction, Greeting, OpenError};
use super::protocol::{self, Hello, PairSide, Peer, ToCoordinator, ToRank};
use crate::connect::key::TestKey;
use crate::report::fabric::config::PortConfig;
use anyhow::{Context as _, Result, anyhow, bail};
use std::io::{BufReader, ErrorKind};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// This rank's RDMA port, as it tells the rendezvous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub device: String,
    pub port: u8,
    pub gid: String,
}

/// One pair test as a rank sees it.
pub struct PairTest<'a> {
    pub round: u32,
    pub peer: &'a Peer,
    /// This rank is the pair's a (the lower rank): the client of the first bw test and of lat.
    pub first: bool,
    /// This rank's test port (bound with port 0 before the rendezvous).
    pub listener: &'a TcpListener,
    /// The pair's test-port key from the coordinator: the server end serves only a client that
    /// holds it, the client proves it.
    pub key: Option<TestKey>,
}

/// What runs the tests between two ranks: the real one drives verbs through the library API;
/// the tests use a stub.
pub trait PairRunner: Sync {
    /// This rank's device, port and GID.
    fn identity(&self) -> Result<Identity>;
    /// Run this side of one pair's tests; a failure goes in the side's `error`.
    fn run(&self, test: &PairTest) -> PairSide;
    /// What this rank says of its port for the configuration audit (sent with the hello);
    /// None when it cannot tell.
    fn config(&self) -> Option<PortConfig> {
        None
    }
}

/// How a rank joins and waits.
#[derive(Debug, Clone)]
pub struct RankConfig {
    pub rank: u32,
    pub size: u32,
    pub hostname: String,
    pub coordinator: (String, u16),
    /// How long to keep trying to reach the coordinator.
    pub connect_timeout: Duration,
    /// The longest silence from the coordinator between two messages (the rendezvous or a
    /// round of the others' tests).
    pub wait_timeout: Duration,
    /// How this rank proves it belongs to the run.
    pub auth: Auth,
}

/// How often a wait looks whether a signal asked the run to stop.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Dial the coordinator, retrying with backoff (50 ms doubling to 1 s) until the deadline.
pub fn connect(cfg: &RankConfig) -> Result<TcpStream> {
    let (host, port) = &cfg.coordinator;
    let deadline = Instant::now() + cfg.connect_timeout;
    let mut backoff = Duration::from_millis(50);
    let mut last = String::from("no attempt");
    loop {
        if crate::exit::STOP.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(anyhow::Error::new(crate::exit::Interrupted)
                .context(format!("dialling the fabric coordinator at {host}:{port}")));
        }
        let addrs: Vec<SocketAddr> = match (host.as_str(), *port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                last = format!("cannot resolve '{host}': {e}");
                Vec::new()
            }
        };
        for a in &addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            match TcpStream::connect_timeout(
                a,
                left.clamp(Duration::from_millis(10), Duration::from_secs(5)),
            ) {
                Ok(s) => return Ok(s),
                Err(e) => {
                    last = format!(
                        "{a}: {}",
                        e.to_string().split(" (os error").next().unwrap_or_default()
                    )
                }
            }
        }
        if Instant::now() + backoff >= deadline {
            bail!(
                "cannot reach the fabric coordinator at {host}:{port} within {} ({last}): is rank 0 \
                 running there, and does --coordinator name its host?",
                humantime::format_duration(cfg.connect_timeout)
            );
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Connect and read the coordinator's challenge. A connection closed before it (the
/// coordinator sheds connections beyond those it can serve at once) is dialled again, with
/// backoff, until the connect deadline.
fn dial(cfg: &RankConfig, at: &str) -> Result<(TcpStream, BufReader<TcpStream>, Greeting)> {
    let deadline = Instant::now() + cfg.connect_timeout;
    let mut backoff = Duration::from_millis(50);
    loop {
        let stream = connect(cfg)?;
        let _ = stream.set_nodelay(true);
        stream.set_read_timeout(Some(cfg.wait_timeout))?;
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        let mut lines = BufReader::new(stream.try_clone()?);
        let mut buf = Vec::new();
        match auth::read_plain::<Greeting>(&mut lines, &mut buf) {
            Ok(g) => return Ok((stream, lines, g)),
            Err(e) => {
                let shed = e.is::<protocol::ConnectionClosed>()
                    || e.downcast_ref::<std::io::Error>().is_some_and(|e| {
                        matches!(
                            e.kind(),
                            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                        )
                    });
                if !shed || Instant::now() + backoff >= deadline {
                    return Err(e.context(format!(
                        "waiting for the fabric coordinator's challenge at {at}"
                    )));
                }
            }
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Join the run and serve its rounds until the coordinator says it is over; returns the run's
/// exit code. `log` gets a line per round (shown with -v).
pub fn run_rank(
    cfg: &RankConfig,
    runner: &dyn PairRunner,
    listener: &TcpListener,
    log: &dyn Fn(&str),
) -> Result<u8> {
    let me = runner.identity()?;
    let test_port = listener.local_addr()?.port();
    let hello = ToCoordinator::Hello(Hello {
        rank: cfg.rank,
        size: cfg.size,
        hostname: cfg.hostname.clone(),
        device: me.device.clone(),
        port: me.port,
        gid: me.gid.clone(),
        address: None,
        test_port,
        config: runner.config().map(Box::new),
    });
    let at = format!("{}:{}", cfg.coordinator.0, cfg.coordinator.1);
    let (mut stream, mut lines, greeting) = dial(cfg, &at)?;
    let mut buf = Vec::new();
    let (proof, session) = match auth::prove(&cfg.auth, cfg.rank, &greeting) {
        Ok(p) => p,
        Err(e) => {
            let _ = protocol::send(&mut stream, &auth::mismatch(&cfg.auth));
            return Err(e.context(format!("rank {} cannot join the run at {at}", cfg.rank)));
        }
    };
    protocol::send(&mut stream, &proof).context("sending this rank's credential")?;
    let (mut sealer, mut opener) = auth::channel(session, Direction::ToCoordinator);
    sealer
        .send(&mut stream, &hello)
        .context("telling the coordinator this rank's address")?;
    let mut authenticated = false;
    // Every wait polls for a signal (SIGTERM during the rendezvous left a rank waiting for
    // the whole of it).
    stream.set_read_timeout(Some(STOP_POLL))?;
    let stop = || crate::exit::STOP.load(std::sync::atomic::Ordering::Relaxed);
    loop {
        let deadline = Instant::now() + cfg.wait_timeout;
        match protocol::read_line_polled(&mut lines, &mut buf, deadline, &stop) {
            Ok(0) => {
                bail!("the fabric coordinator closed the connection before the end of the run")
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {
                return Err(anyhow::Error::new(crate::exit::Interrupted)
                    .context("waiting for the fabric coordinator"));
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => bail!(
                "no word from the fabric coordinator within {}",
                humantime::format_duration(cfg.wait_timeout)
            ),
            Err(e) => return Err(anyhow!("reading from the fabric coordinator: {e}")),
        }
        let json = match opener.open(&buf) {
            Ok(json) => json,
            // A refusal of the credential comes before any sealed line, as plain JSON.
            Err(OpenError::Unsealed) if !authenticated => {
                if let Ok(ToRank::Abort { reason }) = serde_json::from_slice(&buf) {
                    bail!(
                        "the fabric coordinator at {at} refused rank {}: {reason}",
                        cfg.rank
                    );
                }
                bail!(
                    "the fabric coordinator at {at} sent {}",
                    OpenError::Unsealed
                )
            }
            Err(e) => bail!(
                "the fabric coordinator at {at} sent {e}: this rank stops (is something between \
                 the ranks forging the run?)"
            ),
        };
        authenticated = true;
        let msg: ToRank = serde_json::from_slice(json)
            .map_err(|e| anyhow!("the fabric coordinator sent something unreadable: {e}"))?;
        match msg {
            ToRank::Round {
                round,
                peer,
                first,
                pair_key,
            } => {
                let key = match pair_key.as_deref().map(TestKey::from_hex) {
                    Some(None) => bail!("the fabric coordinator sent a malformed pair key"),
                    Some(k) => k,
                    None => None,
                };
                let side = match &peer {
                    Some(p) => {
                        let started = Instant::now();
                        let side = runner.run(&PairTest {
                            round,
                            peer: p,
                            first,
                            listener,
                            key: key.clone(),
                        });
                        log(&format!(
                            "round {round}: with {} in {:.1} s{}",
                            p.host,
                            started.elapsed().as_secs_f64(),
                            side.error
                                .as_deref()
                                .map(|e| format!(": {e}"))
                                .unwrap_or_default()
                        ));
                        side
                    }
                    None => PairSide::default(),
                };
                sealer
                    .send(&mut stream, &ToCoordinator::Done { round, side })
                    .context("reporting a round to the coordinator")?;
            }
            ToRank::Finish { exit_code } => return Ok(exit_code),
            ToRank::Abort { reason } => bail!("the fabric coordinator ended the run: {reason}"),
        }
    }
}
