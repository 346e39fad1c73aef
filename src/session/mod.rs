//! Roles every test subcommand shares: client, one-shot or persistent server, and loopback.
//! Nothing here prints: status lines go to the options' status sink, progress to an observer.

pub mod perf;
pub mod phase;
pub mod pingpong;
mod sink;
mod sniff;

pub use sniff::serve_client_or_perftest;

use crate::connect::admission::{Admit, admit};
use crate::connect::control::{ControlChannel, Message, Test};
use crate::connect::endpoint::PortChoice;
use crate::connect::key::{TestKey, Unauthenticated, is_unauthenticated};
pub use crate::perf::{Observer, Unobserved};
use crate::report::pingpong::PingpongReport;
use anyhow::{Context as _, Result, anyhow, bail};
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub use crate::exit::STOP;
pub use sink::{RefusalSink, StatusSink};

/// Peer tools a test can speak to on their own wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compat {
    /// rdma-core's ibv_rc_pingpong / ibv_ud_pingpong exchange (pingpong).
    Ibv,
    /// perftest's out-of-band exchange (bw against an ib_write_bw or ib_read_bw server).
    Perftest,
}

/// Connection options common to every test subcommand.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The server to connect to (set from the role by [`crate::run`]).
    pub host: Option<String>,
    pub port: u16,
    pub bind: Option<IpAddr>,
    pub persist: bool,
    /// Bound on every wait for the peer.
    pub timeout: Duration,
    /// How long a one-shot server waits for its client.
    pub wait: Duration,
    pub choice: PortChoice,
    /// Speak another tool's wire instead of rdmadiag's.
    pub compat: Option<Compat>,
    /// Where status lines go.
    pub status: StatusSink,
    /// Where a persistent server's one line per client goes (served, told busy, failed).
    pub client_log: StatusSink,
    /// Who a server refused for want of its key.
    pub refusals: RefusalSink,
    /// What this side agrees to allocate when serving.
    pub limits: ServerLimits,
    /// The test-port key: a server serves only clients that hold it, a client proves it.
    pub key: Option<TestKey>,
}

impl SessionOptions {
    /// Options for a test another command runs in-process (`check`, `fabric`): on `choice`, one
    /// bound for every wait, a client of `port` (or, through [`crate::serve_on`], a server on a
    /// port bound already), nothing logged, the default server limits.
    pub fn in_process(choice: PortChoice, port: u16, timeout: Duration) -> SessionOptions {
        SessionOptions {
            host: None,
            port,
            bind: None,
            persist: false,
            timeout,
            wait: timeout,
            choice,
            compat: None,
            status: StatusSink::default(),
            client_log: StatusSink::default(),
            refusals: RefusalSink::default(),
            limits: ServerLimits::default(),
            key: None,
        }
    }
}

/// A server never allocates or registers beyond these because a client asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub max_size: u32,
    pub max_qps: u32,
    /// Total bytes of registered buffers one test may need.
    pub max_memory: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_size: 64 << 20,
            max_qps: 64,
            max_memory: 1 << 30,
        }
    }
}

impl ServerLimits {
    /// Check a request against the limits; the reason goes back to the client.
    pub fn check(&self, spec: &crate::connect::control::TestSpec) -> Result<(), String> {
        let (sizes, qps): (Vec<u32>, u32) = match &spec.test {
            Test::Pingpong(p) => (vec![p.size], 1),
            Test::Bw(p) | Test::Lat(p) | Test::Verify(p) => (p.sizes.clone(), p.qps),
        };
        let biggest = sizes.iter().copied().max().unwrap_or(0);
        if biggest > self.max_size {
            return Err(format!(
                "over this server's limits: a {biggest}-byte message exceeds its --max-size \
                 {}",
                self.max_size
            ));
        }
        if qps > self.max_qps {
            return Err(format!(
                "over this server's limits: {qps} QPs exceed its --max-qps {}",
                self.max_qps
            ));
        }
        // Each QP registers at most a send area and a receive area of the largest size.
        let memory = qps as u64 * 2 * (biggest as u64 + 64);
        if memory > self.max_memory {
            return Err(format!(
                "over this server's limits: {qps} QPs of {biggest}-byte buffers need {memory} \
                 bytes of registered memory, more than its {} byte limit",
                self.max_memory
            ));
        }
        Ok(())
    }
}

/// A status line for the operator, to the options' sink.
pub fn status(opts: &SessionOptions, msg: &str) {
    if let Some(f) = &opts.status.0 {
        f(msg);
    }
}

/// A persistent server's line about one client, to the options' client log.
fn log_client(opts: &SessionOptions, msg: &str) {
    if let Some(f) = &opts.client_log.0 {
        f(msg);
    }
}

/// Connect to the server's control port, bounded by the timeout.
pub fn dial(opts: &SessionOptions) -> Result<TcpStream> {
    let host = opts.host.as_deref().unwrap_or("127.0.0.1");
    phase::enter(phase::CONNECT, Some(&format!("{host}:{}", opts.port)));
    let addrs: Vec<SocketAddr> = (host, opts.port)
        .to_socket_addrs()
        .map_err(|e| anyhow!("cannot resolve host '{host}': {e}"))?
        .collect();
    let mut last = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, opts.timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some((addr, e)),
        }
    }
    let Some((addr, e)) = last else {
        bail!("host '{host}' has no address");
    };
    let hint = match e.kind() {
        ErrorKind::ConnectionRefused => match opts.compat {
            Some(Compat::Perftest) => " (is a perftest server running there on that port?)",
            Some(Compat::Ibv) => " (is ibv_rc_pingpong running there on that port?)",
            None => " (is an rdmadiag server running there on that port?)",
        },
        ErrorKind::TimedOut | ErrorKind::WouldBlock => " (no answer: host down or filtered?)",
        _ => "",
    };
    let e = if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) {
        format!(
            "timed out after {}",
            humantime::format_duration(opts.timeout)
        )
    } else {
        // io::Error's text ends in "(os error N)"; the kind's words are enough here.
        e.to_string()
            .split(" (os error")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    bail!("cannot connect to {addr}: {e}{hint}")
}

/// Fail fast: the device and port a server would use exist and are usable (the device opens,
/// the port is ACTIVE, a RoCE port has a GID), checked before it listens. A server with nothing
/// to serve with says so at once instead of waiting for a client and blaming it.
pub fn check_serving_port(opts: &SessionOptions) -> Result<()> {
    crate::connect::endpoint::choose_port(&opts.choice, opts.bind)
        .map(drop)
        .context("not listening for clients")
}

/// Listen on the control port (`--bind` or every address).
pub fn listen(opts: &SessionOptions) -> Result<TcpListener> {
    let ip = opts.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let addr = SocketAddr::new(ip, opts.port);
    let l = TcpListener::bind(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
    l.set_nonblocking(true)
        .with_context(|| format!("making the listener on {addr} non-blocking"))?;
    Ok(l)
}

/// Wait for one client, up to `wait` (None: until Ctrl-C).
pub fn accept(l: &TcpListener, wait: Option<Duration>) -> Result<TcpStream> {
    let start = Instant::now();
    loop {
        match l.accept() {
            Ok((s, peer)) => {
                s.set_nonblocking(false)
                    .with_context(|| format!("setting up the connection from {peer}"))?;
                return Ok(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => bail!("accepting a client: {e}"),
        }
        if STOP.load(Ordering::Relaxed) {
            return Err(
                anyhow::Error::new(crate::exit::Interrupted).context("waiting for a client")
            );
        }
        if let Some(w) = wait.filter(|w| start.elapsed() >= *w) {
            let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
            bail!(
                "no client connected to {addr} within {}",
                humantime::format_duration(w)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a server with a key gives a connection to greet and prove itself: a real client
/// does in milliseconds; one that stalls cannot hold a one-shot server's port for long.
pub const KEYED_GREETING_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a new connection has to greet: the timeout, at most [`KEYED_GREETING_TIMEOUT`]
/// with a key.
fn greeting_timeout(opts: &SessionOptions) -> Duration {
    if opts.key.is_some() {
        opts.timeout.min(KEYED_GREETING_TIMEOUT)
    } else {
        opts.timeout
    }
}

/// Greet a client and read its test request (both bounded by the timeout; with a key, the
/// greeting and proof by [`KEYED_GREETING_TIMEOUT`] in all, and any failure there is the
/// client's [`Unauthenticated`]).
fn handshake(stream: TcpStream, opts: &SessionOptions) -> Result<(ControlChannel, Message)> {
    let arrived = Instant::now();
    let keyed = opts.key.is_some();
    let greeting_timeout = greeting_timeout(opts);
    let mut ch = ControlChannel::new(stream, greeting_timeout)?;
    let peer = ch.peer().to_string();
    phase::enter(phase::HANDSHAKE, Some(&peer));
    ch.set_deadline(Some(arrived + greeting_timeout));
    let software = match ch.greet_as_server(opts.key.as_ref()) {
        Ok(s) => s,
        Err(e) if keyed && !is_unauthenticated(&e) => {
            return Err(e.context(Unauthenticated(format!("{peer} did not greet"))));
        }
        Err(e) => return Err(e),
    };
    // A persistent server's connection sends its request within the timeout of its arrival:
    // one deadline in all, so it cannot hold a place step by step. A one-shot server's client
    // may take the timeout again (it opens its device and makes its QPs before the request).
    ch.set_timeout(opts.timeout);
    ch.set_deadline(opts.persist.then(|| arrived + opts.timeout));
    status(opts, &format!("client {peer} ({software}) connected"));
    let msg = ch.recv("the test request")?;
    ch.set_deadline(None);
    Ok((ch, msg))
}

/// What a server did for one client.
#[derive(Debug, Clone)]
pub enum Served {
    /// A ping-pong: the client's measurement, the report both ends print.
    Pingpong(Box<PingpongReport>),
    /// A bw/lat/write/read test (the client prints its report; the server has none).
    Perf(perf::PerfServed),
    /// A perftest client's test: its figures, which it sends at the end (perftest's server
    /// prints them too).
    Perftest(Box<crate::report::perf::PerfReport>),
}

/// Run the test a client asked for, within this server's limits.
fn dispatch(mut ch: ControlChannel, msg: Message, opts: &SessionOptions) -> Result<Served> {
    let peer = ch.peer().to_string();
    let (spec, endpoint, endpoints) = match msg {
        Message::Request { spec, endpoint } => (spec, Some(endpoint), Vec::new()),
        Message::PerfRequest { spec, endpoints } => (spec, None, endpoints),
        _ => bail!("{peer} did not send a test request"),
    };
    if let Err(reason) = opts.limits.check(&spec) {
        return Err(ch.refuse(reason));
    }
    let Some(endpoint) = endpoint else {
        return Ok(Served::Perf(perf::serve(&mut ch, opts, &spec, &endpoints)?));
    };
    match spec.test {
        Test::Pingpong(_) => Ok(Served::Pingpong(Box::new(pingpong::serve(
            &mut ch, opts, &spec, &endpoint,
        )?))),
        _ => Err(ch.refuse(format!(
            "a {} test's request carries no endpoints list",
            spec.test.name()
        ))),
    }
}

/// Serve one rdmadiag client: greet, read its request, run the test it asks for.
pub fn serve_client(stream: TcpStream, opts: &SessionOptions) -> Result<Served> {
    let (ch, msg) = handshake(stream, opts)?;
    dispatch(ch, msg, opts)
}

/// Run as the server for one client (rdmadiag's protocol or, through `serve`, another tool's).
pub fn run_server<T>(
    opts: &SessionOptions,
    serve: impl Fn(TcpStream, &SessionOptions) -> Result<T>,
) -> Result<T> {
    phase::enter(phase::LISTEN, None);
    check_serving_port(opts)?;
    let l = listen(opts)?;
    status(
        opts,
        &format!("waiting for a client on {}", l.local_addr()?),
    );
    serve_first(&l, opts, serve)
}

/// Serve the first client; with a key, the first that proves it holds it (others are logged
/// and closed, and the wait goes on), all within the options' `wait`.
fn serve_first<T>(
    l: &TcpListener,
    opts: &SessionOptions,
    serve: impl Fn(TcpStream, &SessionOptions) -> Result<T>,
) -> Result<T> {
    let started = Instant::now();
    loop {
        let left = opts.wait.saturating_sub(started.elapsed());
        let stream = accept(l, Some(left.max(Duration::from_millis(1)))).map_err(|e| {
            if opts.key.is_some() && started.elapsed() >= opts.wait {
                anyhow!(
                    "no client with this server's key connected within {}",
                    humantime::format_duration(opts.wait)
                )
            } else {
                e
            }
        })?;
        let peer = stream.peer_addr().ok();
        match serve(stream, opts) {
            Err(e) if opts.key.is_some() && is_unauthenticated(&e) => {
                log_client(opts, &format!("refused a client: {e:#}"));
                if let (Some(f), Some(peer)) = (&opts.refusals.0, peer) {
                    f(peer.ip(), &refusal_reason(&e, peer));
                }
            }
            r => return r,
        }
    }
}

/// Why a client was refused, without its address: the [`Unauthenticated`] reason in `e`, less
/// the peer that each such reason starts with.
fn refusal_reason(e: &anyhow::Error, peer: SocketAddr) -> String {
    let why = e
        .downcast_ref::<Unauthenticated>()
        .or_else(|| e.chain().find_map(|c| c.downcast_ref::<Unauthenticated>()))
        .map_or_else(|| format!("{e:#}"), |u| u.0.clone());
    let peer = peer.to_string();
    why.strip_prefix(&peer)
        .map(|w| w.trim_start_matches(':').trim_start())
        .unwrap_or(&why)
        .to_string()
}

/// Run as the server for one client on a listener bound already (`rdmadiag fabric` binds its
/// test port with port 0 before telling its peers), waiting up to the options' `wait`.
pub fn run_server_on<T>(
    l: &TcpListener,
    opts: &SessionOptions,
    serve: impl Fn(TcpStream, &SessionOptions) -> Result<T>,
) -> Result<T> {
    phase::enter(phase::LISTEN, None);
    check_serving_port(opts)?;
    l.set_nonblocking(true)
        .context("making the test listener non-blocking")?;
    serve_first(l, opts, serve)
}

/// The most connections a persistent server holds at once (each a thread until its greeting
/// and request are done, within --timeout in all), shared as [`admit`] says (at most a few per
/// address; when all are taken, one still greeting gives its place to the new one); else the
/// new one is told the server is busy.
pub const MAX_PERSIST_CONNECTIONS: usize = 32;

/// A persistent server's connection: its thread, a handle to close it, when it came, and
/// whether it is still greeting (not yet a client with a request).
struct Visitor {
    thread: std::thread::JoinHandle<()>,
    stream: TcpStream,
    since: Instant,
    greeting: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Make room for one more connection from `from`: drop finished ones, then share the places
/// as [`admit`] says (a connection still greeting gives its place up to a newer one). False:
/// no room.
fn make_room(visitors: &mut Vec<Visitor>, from: Option<IpAddr>, opts: &SessionOptions) -> bool {
    visitors.retain(|v| !v.thread.is_finished());
    let greeting: Vec<_> = visitors
        .iter()
        .enumerate()
        .filter(|(_, v)| v.greeting.load(Ordering::Relaxed))
        .map(|(i, v)| (i, v.since, v.stream.peer_addr().ok().map(|a| a.ip())))
        .collect();
    let i = match admit(visitors.len(), MAX_PERSIST_CONNECTIONS, &greeting, from) {
        Admit::Room => return true,
        Admit::Full | Admit::AddressFull => return false,
        Admit::Evict(i, _) => i,
    };
    let v = visitors.swap_remove(i);
    let _ = v.stream.shutdown(std::net::Shutdown::Both);
    let peer = v
        .stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    log_client(
        opts,
        &format!(
            "closed {peer}: still greeting after {:.1} s, its place given to a newer connection",
            v.since.elapsed().as_secs_f64()
        ),
    );
    true
}

/// `--persist`: serve until Ctrl-C, whatever test each client asks for. Each connection gets
/// its own thread for the greeting (and, with a key, its proof) and request, within --timeout
/// in all, so a silent peer only ties up itself, at most [`MAX_PERSIST_CONNECTIONS`] at once
/// (see [`make_room`]); one test runs at a time, and a client arriving meanwhile is told the
/// server is busy. Every client is logged to the client log; none can take the server down.
/// Ends only with an error (Ctrl-C or a broken listener).
pub fn run_persistent(opts: &SessionOptions) -> Result<std::convert::Infallible> {
    use std::io::Write as _;
    use std::sync::atomic::AtomicBool;
    phase::enter(phase::LISTEN, None);
    check_serving_port(opts)?;
    let l = listen(opts)?;
    let keyed = if opts.key.is_some() {
        "clients with its key"
    } else {
        "any client (no key: see --key-file)"
    };
    status(
        opts,
        &format!("serving {keyed} on {} until Ctrl-C", l.local_addr()?),
    );
    let running: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let mut visitors: Vec<Visitor> = Vec::new();
    loop {
        let stream = match l.accept() {
            Ok((s, _)) => s,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                if STOP.load(Ordering::Relaxed) {
                    for v in visitors {
                        let _ = v.thread.join();
                    }
                    return Err(crate::exit::Interrupted.into());
                }
                visitors.retain(|v| !v.thread.is_finished());
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                // Out of descriptors, or a connection reset in the queue: the server goes on.
                log_client(opts, &format!("could not accept a connection: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        if !make_room(&mut visitors, stream.peer_addr().ok().map(|a| a.ip()), opts) {
            let why = format!("{MAX_PERSIST_CONNECTIONS} clients are being served or set up");
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write_all(&crate::connect::control::busy_greeting(&why));
            log_client(opts, &format!("told {peer} the server is busy ({why})"));
            continue;
        }
        stream.set_nonblocking(false)?;
        let handle = stream.try_clone()?;
        let greeting = std::sync::Arc::new(AtomicBool::new(true));
        let (o, running, still) = (opts.clone(), running.clone(), greeting.clone());
        let thread = std::thread::spawn(move || {
            let outcome = handshake(stream, &o).and_then(|(mut ch, msg)| {
                still.store(false, Ordering::Relaxed);
                let serving = {
                    let mut slot = running.lock().unwrap_or_else(|p| p.into_inner());
                    match slot.as_ref() {
                        Some(other) => Err(other.clone()),
                        None => {
                            *slot = Some(peer.clone());
                            Ok(())
                        }
                    }
                };
                match serving {
                    Err(other) => {
                        ch.send(&Message::Refuse {
                            reason: format!(
                                "{} this server is running a test for {other}; retry in a \
                                 moment",
                                crate::connect::control::BUSY
                            ),
                        })?;
                        Ok(None)
                    }
                    Ok(()) => {
                        let r = dispatch(ch, msg, &o);
                        *running.lock().unwrap_or_else(|p| p.into_inner()) = None;
                        r.map(Some)
                    }
                }
            });
            match outcome {
                Ok(Some(_)) => log_client(&o, &format!("served {peer}")),
                Ok(None) => log_client(&o, &format!("told {peer} the server is busy")),
                Err(e) => log_client(&o, &format!("client {peer} failed: {e:#}")),
            }
        });
        visitors.push(Visitor {
            thread,
            stream: handle,
            since: Instant::now(),
            greeting,
        });
    }
}

/// Run both ends in this process on one device: a server thread and the client.
pub fn run_loopback<S: Send + 'static, T>(
    opts: &SessionOptions,
    serve: impl Fn(TcpStream, &SessionOptions) -> Result<S> + Send + 'static,
    client: impl FnOnce(&SessionOptions) -> Result<T>,
) -> Result<T> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("loopback control socket")?;
    l.set_nonblocking(true)?;
    let port = l.local_addr()?.port();
    // Both ends use the control connection's port number (rdma_cm listens on the same number).
    let server_opts = SessionOptions {
        persist: false,
        port,
        ..opts.clone()
    };
    let wait = opts.timeout;
    let server = std::thread::spawn(move || -> Result<S> {
        let s = accept(&l, Some(wait))?;
        serve(s, &server_opts)
    });
    let client_opts = SessionOptions {
        host: Some(Ipv4Addr::LOCALHOST.to_string()),
        port,
        ..opts.clone()
    };
    let result = client(&client_opts);
    let served = server
        .join()
        .map_err(|_| anyhow!("the loopback server thread panicked"))?;
    // The client's result stands for the run: whatever failed on the server side reached the
    // client through the protocol (a refusal, an error, a mismatch in its report).
    let _ = served;
    result
}

#[cfg(test)]
mod keyed_tests;
