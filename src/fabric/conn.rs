//! The coordinator's connections: each one's reader thread (the challenge, the credential, the
//! hello, then every sealed line, all bounded), and the rendezvous that accepts them, at most
//! `size` + [`SLACK`] waiting at once, until every rank has joined or the deadline.

use super::auth::{self, Auth, Direction, Proof, Sealer};
use super::coordinator::{CoordinatorConfig, Progress};
use super::protocol::{self, Hello, ToCoordinator, ToRank};
use anyhow::{Context as _, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufReader, ErrorKind};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(super) enum Event {
    /// A rank proved itself and said hello.
    Joined(Box<(Hello, Sealer)>),
    /// A connection failed its credential or hello (why, naming the address).
    Refused(String),
    Msg(ToCoordinator),
    Closed(String),
}

/// One rank's connection.
pub(super) struct Conn {
    pub(super) writer: TcpStream,
    /// Seals what is sent on it, once the rank proved itself.
    pub(super) sealer: Option<Sealer>,
    /// The coordinator's own address on this connection (what the rank dialled).
    pub(super) local: Option<IpAddr>,
    pub(super) peer: Option<IpAddr>,
}

/// What the rendezvous ends with: every connection (by id), the ranks that joined and on
/// which connection, and what was refused.
pub(super) struct Rendezvous {
    pub(super) conns: Vec<Conn>,
    pub(super) hellos: BTreeMap<u32, Hello>,
    pub(super) bound: BTreeMap<u32, usize>,
    pub(super) refused: Vec<String>,
}

/// Stack of each connection's reader thread: it only parses lines.
const READER_STACK: usize = 128 * 1024;

/// Connections beyond the ranks still to join that may wait for their hello at once.
pub const SLACK: usize = 8;

/// The longest a connection may take to send its credential and hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection's reader: the challenge, the proof, the hello, then every sealed line.
fn spawn_reader(
    id: usize,
    mut stream: TcpStream,
    auth: Auth,
    tx: mpsc::Sender<(usize, Event)>,
) -> Result<()> {
    let from = stream
        .peer_addr()
        .map_or_else(|_| "an unknown address".into(), |a| a.to_string());
    std::thread::Builder::new()
        .name(format!("fabric-conn-{id}"))
        .stack_size(READER_STACK)
        .spawn(move || {
            let mut lines = BufReader::new(match stream.try_clone() {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send((id, Event::Refused(format!("{from}: {e}"))));
                    return;
                }
            });
            let mut buf = Vec::new();
            let refuse = |stream: &mut TcpStream, why: String| {
                let _ = protocol::send(
                    stream,
                    &ToRank::Abort {
                        reason: why.clone(),
                    },
                );
                let _ = stream.shutdown(std::net::Shutdown::Both);
                let _ = tx.send((
                    id,
                    Event::Refused(format!("a connection from {from}: {why}")),
                ));
            };
            let waiting = |e: anyhow::Error| {
                let timed_out = e.downcast_ref::<std::io::Error>().is_some_and(|e| {
                    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
                });
                if timed_out {
                    format!(
                        "sent no credential and hello within {}",
                        humantime::format_duration(HELLO_TIMEOUT)
                    )
                } else {
                    format!("{e:#}")
                }
            };
            let (greeting, nonce) = match auth::challenge(&auth) {
                Ok(c) => c,
                Err(e) => return refuse(&mut stream, format!("{e:#}")),
            };
            if let Err(e) = protocol::send(&mut stream, &greeting) {
                return refuse(
                    &mut stream,
                    format!("could not be sent its challenge ({e})"),
                );
            }
            let verified = match auth::read_plain::<Proof>(&mut lines, &mut buf) {
                Ok(p) => auth::verify(&auth, &nonce, &p),
                Err(e) => Err(anyhow::anyhow!(waiting(e))),
            };
            let verified = match verified {
                Ok(v) => v,
                Err(e) => return refuse(&mut stream, format!("{e:#}")),
            };
            let (mut sealer, mut opener) = auth::channel(verified.session, Direction::ToRank);
            let hello = match protocol::read_line(&mut lines, &mut buf) {
                Ok(0) => Err("it closed the connection before its hello".to_string()),
                Ok(_) => match opener.open(&buf) {
                    Ok(json) => match serde_json::from_slice::<ToCoordinator>(json) {
                        Ok(ToCoordinator::Hello(h)) => Ok(h),
                        Ok(_) => Err("its first message is not a hello".into()),
                        Err(e) => Err(format!("it sent an unreadable hello ({e})")),
                    },
                    Err(e) => Err(format!("it sent {e}")),
                },
                Err(e) => Err(waiting(e.into())),
            };
            let hello = match (hello, verified.rank) {
                (Ok(h), Some(r)) if h.rank != r => Err(format!(
                    "its credential is for rank {r}, its hello claims rank {}",
                    h.rank
                )),
                (h, _) => h,
            };
            let hello = match hello {
                Ok(h) => h,
                Err(why) => {
                    let _ = sealer.send(
                        &mut stream,
                        &ToRank::Abort {
                            reason: why.clone(),
                        },
                    );
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    let _ = tx.send((
                        id,
                        Event::Refused(format!("a connection from {from}: {why}")),
                    ));
                    return;
                }
            };
            // Joined: from now on the round deadlines bound its silence.
            let _ = stream.set_read_timeout(None);
            if tx
                .send((id, Event::Joined(Box::new((hello, sealer)))))
                .is_err()
            {
                return;
            }
            loop {
                let ev = match protocol::read_line(&mut lines, &mut buf) {
                    Ok(0) => Event::Closed("its connection closed".into()),
                    Ok(_) => match opener.open(&buf) {
                        Ok(json) => match serde_json::from_slice::<ToCoordinator>(json) {
                            Ok(m) => Event::Msg(m),
                            Err(e) => Event::Closed(format!("it sent something unreadable ({e})")),
                        },
                        Err(e) => Event::Closed(format!("it sent {e}")),
                    },
                    Err(e) => Event::Closed(format!("its connection failed ({e})")),
                };
                let last = matches!(ev, Event::Closed(_));
                if tx.send((id, ev)).is_err() || last {
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
        })
        .context("starting a connection's reader thread")?;
    Ok(())
}

/// Accept connections until every rank has joined or the rendezvous deadline; then close the
/// listener and every connection that has not joined.
pub(super) fn rendezvous(
    listener: TcpListener,
    cfg: &CoordinatorConfig,
    progress: &dyn Progress,
    rx: &mpsc::Receiver<(usize, Event)>,
    tx: mpsc::Sender<(usize, Event)>,
) -> Result<Rendezvous> {
    let mut conns: Vec<Conn> = Vec::new();
    let mut hellos: BTreeMap<u32, Hello> = BTreeMap::new();
    let mut bound: BTreeMap<u32, usize> = BTreeMap::new();
    // Connections that have not (yet) joined: each holds a reader thread until its hello
    // deadline; beyond `size - joined + SLACK` of them a new connection is closed at once.
    let mut pending: BTreeSet<usize> = BTreeSet::new();
    let mut refused: Vec<String> = Vec::new();
    let mut overflow = 0usize;
    let deadline = Instant::now() + cfg.rendezvous_timeout;
    while (hellos.len() as u32) < cfg.size && Instant::now() < deadline {
        if crate::exit::STOP.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(anyhow::Error::new(crate::exit::Interrupted)
                .context("waiting for the ranks to join"));
        }
        loop {
            match listener.accept() {
                Ok((s, from)) => {
                    let room = (cfg.size as usize - hellos.len()) + SLACK;
                    if pending.len() >= room {
                        overflow += 1;
                        if overflow == 1 {
                            let why = format!(
                                "connections from {from} and others: more than {room} waiting \
                                 to join at once (closed unread)"
                            );
                            progress.refused(&why);
                            refused.push(why);
                        }
                        drop(s);
                        continue;
                    }
                    s.set_nonblocking(false)?;
                    let _ = s.set_nodelay(true);
                    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
                    let _ = s.set_read_timeout(Some(
                        HELLO_TIMEOUT
                            .min(cfg.rendezvous_timeout)
                            .max(Duration::from_millis(100)),
                    ));
                    let id = conns.len();
                    spawn_reader(id, s.try_clone()?, cfg.auth.clone(), tx.clone())?;
                    pending.insert(id);
                    conns.push(Conn {
                        local: s.local_addr().ok().map(|a| a.ip()),
                        peer: s.peer_addr().ok().map(|a| a.ip()),
                        writer: s,
                        sealer: None,
                    });
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    break;
                }
                Err(e) => bail!("the coordinator's listener failed: {e}"),
            }
        }
        while let Ok((id, ev)) = rx.recv_timeout(Duration::from_millis(5)) {
            let (h, sealer) = match ev {
                Event::Joined(j) => *j,
                Event::Refused(why) => {
                    pending.remove(&id);
                    progress.refused(&why);
                    refused.push(why);
                    continue;
                }
                Event::Msg(_) | Event::Closed(_) => {
                    pending.remove(&id);
                    if let Some(r) = bound.iter().find(|(_, c)| **c == id).map(|(r, _)| *r) {
                        bound.remove(&r);
                        hellos.remove(&r);
                    }
                    continue;
                }
            };
            pending.remove(&id);
            let conn = &mut conns[id];
            conn.sealer = Some(sealer);
            let refuse = if h.size != cfg.size {
                Some(format!(
                    "rank {} says the run has {} ranks, rank 0 says {}",
                    h.rank, h.size, cfg.size
                ))
            } else if h.rank >= cfg.size {
                Some(format!(
                    "rank {} is beyond the {} ranks of the run",
                    h.rank, cfg.size
                ))
            } else if hellos.contains_key(&h.rank) {
                Some(format!("two processes claim rank {}", h.rank))
            } else {
                None
            };
            if let Some(reason) = refuse {
                if let Some(sealer) = &mut conn.sealer {
                    let _ = sealer.send(
                        &mut conn.writer,
                        &ToRank::Abort {
                            reason: reason.clone(),
                        },
                    );
                }
                let _ = conn.writer.shutdown(std::net::Shutdown::Both);
                let why = format!(
                    "{} ({}): {reason}",
                    conn.peer.map_or_else(|| "?".into(), |ip| ip.to_string()),
                    h.hostname
                );
                progress.refused(&why);
                refused.push(why);
                continue;
            }
            bound.insert(h.rank, id);
            hellos.insert(h.rank, h);
        }
    }
    // No one joins after the rendezvous: close the port and whatever has not joined.
    drop(listener);
    for id in pending {
        let _ = conns[id].writer.shutdown(std::net::Shutdown::Both);
    }
    if overflow > 1 {
        let why = format!("{overflow} connections closed unread in all (too many waiting at once)");
        progress.refused(&why);
        refused.push(why);
    }
    Ok(Rendezvous {
        conns,
        hellos,
        bound,
        refused,
    })
}
