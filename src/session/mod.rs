//! Roles every test subcommand shares: client, one-shot or persistent server, and loopback.

pub mod perf;
pub mod pingpong;

use crate::connect::control::{ControlChannel, Message};
use crate::connect::endpoint::PortChoice;
use anyhow::{Context as _, Result, anyhow, bail};
use std::io::{ErrorKind, IsTerminal};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by Ctrl-C: every wait loop checks it and unwinds, releasing resources on the way.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// Connection options common to every test subcommand.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The server to connect to; None makes this side the server.
    pub host: Option<String>,
    pub port: u16,
    pub bind: Option<IpAddr>,
    pub persist: bool,
    pub loopback: bool,
    /// Bound on every wait for the peer.
    pub timeout: Duration,
    /// How long a one-shot server waits for its client.
    pub wait: Duration,
    pub choice: PortChoice,
    pub mtu: Option<u32>,
    pub cm: bool,
    pub compat_ibv: bool,
    pub verbose: bool,
}

/// Status lines for the operator: stderr, and only when stderr is a terminal or `verbose`.
pub fn status(opts: &SessionOptions, msg: &str) {
    if opts.verbose || std::io::stderr().is_terminal() {
        eprintln!("rdmadiag: {msg}");
    }
}

/// Connect to the server's control port, bounded by the timeout.
pub fn dial(opts: &SessionOptions) -> Result<TcpStream> {
    let host = opts.host.as_deref().unwrap_or("127.0.0.1");
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
        ErrorKind::ConnectionRefused => " (is an rdmadiag server running there on that port?)",
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

/// Listen on the control port (`--bind` or every address).
pub fn listen(opts: &SessionOptions) -> Result<TcpListener> {
    let ip = opts.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let addr = SocketAddr::new(ip, opts.port);
    let l = TcpListener::bind(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Wait for one client, up to `wait` (None: until Ctrl-C).
pub fn accept(l: &TcpListener, wait: Option<Duration>) -> Result<TcpStream> {
    let start = Instant::now();
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => bail!("accepting a client: {e}"),
        }
        if STOP.load(Ordering::Relaxed) {
            bail!("interrupted while waiting for a client");
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

/// Serve one rdmadiag client: greet, read its request, run the test it asks for.
/// Returns the run's summary (the client's report).
pub fn serve_client(stream: TcpStream, opts: &SessionOptions) -> Result<serde_json::Value> {
    let mut ch = ControlChannel::new(stream, opts.timeout)?;
    let peer = ch.peer().to_string();
    let software = ch.greet()?;
    status(opts, &format!("client {peer} ({software}) connected"));
    let (spec, endpoint) = match ch.recv("the test request")? {
        Message::Request { spec, endpoint } => (spec, endpoint),
        Message::PerfRequest { spec, endpoints } => {
            return perf::serve(&mut ch, opts, &spec, &endpoints);
        }
        _ => bail!("{peer} did not send a test request"),
    };
    match spec.test.as_str() {
        "pingpong" => pingpong::serve(&mut ch, opts, &spec, &endpoint),
        other => {
            let reason = format!("this server does not know the test '{other}'");
            let _ = ch.send(&Message::Refuse {
                reason: reason.clone(),
            });
            bail!("{peer}: {reason}")
        }
    }
}

/// Run as the server: one client (or, with `--persist`, one after another until Ctrl-C).
/// `serve` handles one accepted connection. Returns the last run's summary.
pub fn run_server(
    opts: &SessionOptions,
    serve: impl Fn(TcpStream, &SessionOptions) -> Result<serde_json::Value>,
) -> Result<serde_json::Value> {
    let l = listen(opts)?;
    let addr = l.local_addr()?;
    status(opts, &format!("waiting for a client on {addr}"));
    loop {
        let stream = accept(&l, (!opts.persist).then_some(opts.wait))?;
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let result = serve(stream, opts);
        if !opts.persist {
            return result;
        }
        // A persistent server logs each client and keeps serving, whatever the client did.
        match result {
            Ok(_) => eprintln!("rdmadiag: served {peer}"),
            Err(e) => eprintln!("rdmadiag: client {peer} failed: {e:#}"),
        }
        if STOP.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
    }
}

/// Run both ends in this process on one device: a server thread and the client.
pub fn run_loopback<T>(
    opts: &SessionOptions,
    serve: impl Fn(TcpStream, &SessionOptions) -> Result<serde_json::Value> + Send + 'static,
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
    let server = std::thread::spawn(move || -> Result<serde_json::Value> {
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
    match (result, served) {
        (Ok(r), Ok(_)) => Ok(r),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e.context("loopback server side")),
    }
}
