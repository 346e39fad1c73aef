//! The coordinator's connections: each one's reader thread (the challenge, the credential, the
//! hello, then every sealed line, all bounded), and the rendezvous that accepts them until every
//! rank has joined or the deadline. A connection that has not proved itself holds one of at most
//! `size - joined` + [`SLACK`] slots, for [`HELLO_TIMEOUT`] in all, shared as
//! [`crate::connect::admission`] says: no address holds more than a few, and a slot held for a
//! second goes to a newer connection, so neither a flood from one host nor slow senders can keep
//! a rank out. Every refused, expired or evicted connection is closed at once (its descriptor
//! freed), and counted by address and reason for the report.

use super::auth::{self, Auth, Direction, Proof, Sealer};
use super::protocol::{self, Hello, ToCoordinator, ToRank};
use crate::connect::admission::{Admit, PER_ADDRESS, Unproven, admit, oldest};
use crate::report::fabric::RefusedConnections;
use anyhow::{Context as _, Result};
use std::collections::BTreeMap;
use std::io::{BufReader, ErrorKind};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(super) enum Event {
    /// A rank proved itself and said hello.
    Joined(Box<(Hello, Sealer)>),
    /// A connection failed its credential or hello (why).
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
    /// Its reader refused it and ends it itself (its Abort may still be on the way): closing
    /// it here does not shut it down.
    pub(super) ended_by_reader: bool,
}

impl Drop for Conn {
    /// Closing a connection shuts it down, so that its reader thread (which holds a descriptor
    /// of its own) and the rank at the other end see it at once: a run that unwinds on a signal
    /// or an error leaves no rank waiting.
    fn drop(&mut self) {
        if !self.ended_by_reader {
            let _ = self.writer.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// What the rendezvous ends with: the joined ranks' connections (by id), their hellos and
/// which connection each came on, and what was refused.
pub(super) struct Rendezvous {
    pub(super) conns: BTreeMap<usize, Conn>,
    pub(super) hellos: BTreeMap<u32, Hello>,
    pub(super) bound: BTreeMap<u32, usize>,
    pub(super) refused: Vec<RefusedConnections>,
}

/// Stack of each connection's reader thread: it only parses lines.
const READER_STACK: usize = 128 * 1024;

/// Connections beyond the ranks still to join that may wait for their hello at once.
pub const SLACK: usize = 8;

/// The longest a connection may take to send its credential and hello, in all.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The open files a coordinator of `size` ranks needs: two per connection that may be open at
/// once (its own and its reader's), and some for the rest of the process.
pub fn descriptors_needed(size: u32) -> u64 {
    2 * (2 * size as u64 + SLACK as u64) + 64
}

/// Make room for a coordinator of `size` ranks: raise the open-file soft limit to the hard
/// one when it is below what the run needs; fail, naming both, when the hard limit is too.
pub fn fit_descriptors(size: u32) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let need = descriptors_needed(size);
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit(RLIMIT_NOFILE)")?;
    if soft >= need {
        return Ok(());
    }
    if hard < need {
        anyhow::bail!(
            "rank 0 needs about {need} open files to coordinate {size} ranks, and this process \
             may open {hard} at most (its hard limit): raise it (ulimit -Hn, systemd's \
             LimitNOFILE=, or limits.conf)"
        );
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).with_context(|| {
        format!("raising the open-file limit from {soft} to {hard} for {size} ranks")
    })
}

/// A connection's reader: the challenge, the proof, the hello, then every sealed line.
fn spawn_reader(
    id: usize,
    stream: TcpStream,
    auth: Auth,
    tx: mpsc::Sender<(usize, Event)>,
) -> Result<()> {
    std::thread::Builder::new()
        .name(format!("fabric-conn-{id}"))
        .stack_size(READER_STACK)
        .spawn(move || {
            let mut lines = BufReader::new(&stream);
            let mut buf = Vec::new();
            // The refusal is counted before the connection hears of it: an intruder that goes
            // on to a rank's join finds its refusal in the report.
            let refuse = |mut stream: &TcpStream, why: String| {
                let _ = tx.send((id, Event::Refused(why.clone())));
                let _ = protocol::send(&mut stream, &ToRank::Abort { reason: why });
                let _ = stream.shutdown(std::net::Shutdown::Both);
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
                Err(e) => return refuse(&stream, format!("{e:#}")),
            };
            if let Err(e) = protocol::send(&mut &stream, &greeting) {
                return refuse(&stream, format!("could not be sent its challenge ({e})"));
            }
            let verified = match auth::read_plain::<Proof>(&mut lines, &mut buf) {
                Ok(p) => auth::verify(&auth, &nonce, &p),
                Err(e) => Err(anyhow::anyhow!(waiting(e))),
            };
            let verified = match verified {
                Ok(v) => v,
                Err(e) => return refuse(&stream, format!("{e:#}")),
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
                    let _ = tx.send((id, Event::Refused(why.clone())));
                    let _ = sealer.send(&mut &stream, &ToRank::Abort { reason: why });
                    let _ = stream.shutdown(std::net::Shutdown::Both);
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

/// What the rendezvous waits for: how many ranks, who may join, for how long, and where each
/// first refusal of a kind is shown as it happens.
pub(super) struct Expected<'a> {
    pub size: u32,
    pub auth: &'a Auth,
    pub timeout: Duration,
    pub shown: &'a dyn Fn(&str),
}

/// Refused connections, counted by address and reason in the order first seen; the first of
/// each is shown as it happens.
struct Refusals<'a> {
    list: Vec<RefusedConnections>,
    shown: &'a dyn Fn(&str),
}

impl Refusals<'_> {
    fn add(&mut self, address: Option<IpAddr>, reason: String) {
        let address = address.map_or_else(|| "-".to_string(), |a| a.to_string());
        let shown = format!("a connection from {address}: {reason}");
        if RefusedConnections::count_in(&mut self.list, address, reason) {
            (self.shown)(&shown);
        }
    }
}

/// The connections of the rendezvous: every open one by id, those still to prove themselves
/// with the time each was accepted, and what was refused.
struct Slots<'a> {
    conns: BTreeMap<usize, Conn>,
    pending: BTreeMap<usize, Instant>,
    refusals: Refusals<'a>,
    next_id: usize,
}

impl Slots<'_> {
    /// Close a connection now (dropping a [`Conn`] shuts it down, so its reader ends too),
    /// counting why.
    fn close(&mut self, id: usize, why: Option<String>) {
        self.pending.remove(&id);
        if let Some(c) = self.conns.remove(&id)
            && let Some(why) = why
        {
            self.refusals.add(c.peer, why);
        }
    }

    /// The connections still to prove themselves: when each came, and from where.
    fn unproven(&self) -> Vec<Unproven<usize>> {
        self.pending
            .iter()
            .map(|(id, since)| (*id, *since, self.conns.get(id).and_then(|c| c.peer)))
            .collect()
    }

    /// Close every connection that has had the whole hello timeout.
    fn expire(&mut self, hello_timeout: Duration) {
        let late: Vec<usize> = self
            .pending
            .iter()
            .filter(|(_, since)| since.elapsed() >= hello_timeout)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            let why = format!(
                "sent no credential and hello within {} in all",
                humantime::format_duration(hello_timeout)
            );
            self.close(id, Some(why));
        }
    }

    /// Take a new connection: its reader thread, a slot, a deadline.
    fn admit(
        &mut self,
        s: TcpStream,
        auth: &Auth,
        tx: &mpsc::Sender<(usize, Event)>,
        hello_timeout: Duration,
    ) {
        let peer = s.peer_addr().ok().map(|a| a.ip());
        let set_up = s
            .set_nonblocking(false)
            .and_then(|()| s.set_write_timeout(Some(Duration::from_secs(10))))
            .and_then(|()| s.set_read_timeout(Some(hello_timeout)))
            .and_then(|()| s.try_clone());
        let _ = s.set_nodelay(true);
        let id = self.next_id;
        self.next_id += 1;
        let started = set_up
            .map_err(anyhow::Error::from)
            .and_then(|reader| spawn_reader(id, reader, auth.clone(), tx.clone()));
        if let Err(e) = started {
            self.refusals
                .add(peer, format!("could not be taken ({e:#})"));
            return;
        }
        self.pending.insert(id, Instant::now());
        self.conns.insert(
            id,
            Conn {
                local: s.local_addr().ok().map(|a| a.ip()),
                peer,
                writer: s,
                sealer: None,
                ended_by_reader: false,
            },
        );
    }

    /// Accept what the listener holds. The slots are `room`, shared as
    /// [`admit`](crate::connect::admission::admit) says (no address holds more than
    /// [`PER_ADDRESS`]; when full, the address holding most gives one up, a connection alone at
    /// its address after a second); a newcomer without a slot is closed unread. A failed accept (out of descriptors, a connection reset in the queue) is counted
    /// and the listener goes on; out of descriptors, the oldest waiting connection makes room.
    fn accept_all(
        &mut self,
        listener: &TcpListener,
        room: usize,
        auth: &Auth,
        tx: &mpsc::Sender<(usize, Event)>,
        hello_timeout: Duration,
    ) {
        loop {
            match listener.accept() {
                Ok((s, from)) => {
                    match admit(self.pending.len(), room, &self.unproven(), Some(from.ip())) {
                        Admit::Room => {}
                        Admit::Evict(old, held) => {
                            let why = format!(
                                "held a slot for {} without proving itself (given to a newer \
                                 connection)",
                                humantime::format_duration(Duration::from_secs(held.as_secs()))
                            );
                            self.close(old, Some(why));
                        }
                        Admit::AddressFull => {
                            self.refusals.add(
                                Some(from.ip()),
                                format!(
                                    "{PER_ADDRESS} connections from this address waiting to join \
                                     at once (closed unread)"
                                ),
                            );
                            continue;
                        }
                        Admit::Full => {
                            self.refusals.add(
                                Some(from.ip()),
                                "too many connections waiting to join at once (closed unread)"
                                    .into(),
                            );
                            continue;
                        }
                    }
                    self.admit(s, auth, tx, hello_timeout);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    return;
                }
                Err(e) => {
                    let out_of_files = matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    );
                    self.refusals
                        .add(None, format!("the listener could not accept ({e})"));
                    let unproven = self.unproven().into_iter().map(|(id, t, _)| (id, t));
                    if out_of_files && let Some((old, _)) = oldest(unproven) {
                        self.close(old, Some("closed to free a descriptor".into()));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            }
        }
    }
}

/// Accept connections until every rank has joined or the rendezvous deadline; then close the
/// listener and every connection that has not joined.
pub(super) fn rendezvous(
    listener: TcpListener,
    cfg: &Expected,
    rx: &mpsc::Receiver<(usize, Event)>,
    tx: mpsc::Sender<(usize, Event)>,
) -> Result<Rendezvous> {
    let mut slots = Slots {
        conns: BTreeMap::new(),
        pending: BTreeMap::new(),
        refusals: Refusals {
            list: Vec::new(),
            shown: cfg.shown,
        },
        next_id: 0,
    };
    let mut hellos: BTreeMap<u32, Hello> = BTreeMap::new();
    let mut bound: BTreeMap<u32, usize> = BTreeMap::new();
    let hello_timeout = HELLO_TIMEOUT
        .min(cfg.timeout)
        .max(Duration::from_millis(100));
    let deadline = Instant::now() + cfg.timeout;
    while (hellos.len() as u32) < cfg.size && Instant::now() < deadline {
        if crate::exit::STOP.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(anyhow::Error::new(crate::exit::Interrupted)
                .context("waiting for the ranks to join"));
        }
        let room = (cfg.size as usize - hellos.len()) + SLACK;
        slots.accept_all(&listener, room, cfg.auth, &tx, hello_timeout);
        slots.expire(hello_timeout);
        while let Ok((id, ev)) = rx.recv_timeout(Duration::from_millis(5)) {
            let (h, sealer) = match ev {
                Event::Joined(j) if slots.pending.remove(&id).is_some() => *j,
                // Expired or evicted while its hello was on its way: already closed.
                Event::Joined(_) => continue,
                Event::Refused(why) => {
                    if slots.pending.contains_key(&id) {
                        if let Some(c) = slots.conns.get_mut(&id) {
                            c.ended_by_reader = true;
                        }
                        slots.close(id, Some(why));
                    }
                    continue;
                }
                Event::Msg(_) | Event::Closed(_) => {
                    if let Some(r) = bound.iter().find(|(_, c)| **c == id).map(|(r, _)| *r) {
                        bound.remove(&r);
                        hellos.remove(&r);
                    }
                    slots.close(id, None);
                    continue;
                }
            };
            let Some(conn) = slots.conns.get_mut(&id) else {
                continue;
            };
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
                slots.close(id, Some(format!("{} ({reason})", h.hostname)));
                continue;
            }
            bound.insert(h.rank, id);
            hellos.insert(h.rank, h);
        }
    }
    // No one joins after the rendezvous: close the port and whatever has not joined.
    drop(listener);
    for id in slots.pending.keys().copied().collect::<Vec<_>>() {
        slots.close(
            id,
            Some("had not proved itself when the rendezvous ended".into()),
        );
    }
    Ok(Rendezvous {
        conns: slots.conns,
        hellos,
        bound,
        refused: slots.refusals.list,
    })
}
