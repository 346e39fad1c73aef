//! The library's entry point: run one test in one role, in this process, and get its typed
//! report. The subcommands call it, and so will `check` and `fabric`; it never prints.

use crate::connect::control::{Test, TestSpec};
use crate::exit::UsageError;
use crate::perf::Observer;
use crate::report::perf::PerfReport;
use crate::report::pingpong::PingpongReport;
use crate::session::{self, Compat, Served, SessionOptions, perf, pingpong};
use anyhow::Result;

/// Which end of the test this process plays. Inside the test each end is a
/// [`crate::perf::Side`]: the client initiates, the server responds, a loopback runs both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Connect to the rdmadiag server (or, with a [`Compat`], ibv_*_pingpong's or perftest's) at
    /// `host`.
    Client { host: String },
    /// Wait for one client (or serve clients until interrupted with `persist`).
    Server,
    /// Both ends in this process on one device.
    Loopback,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub enum TestReport {
    /// A client's (or loopback run's) ping-pong.
    Pingpong(Box<PingpongReport>),
    /// A client's (or loopback run's) bw, lat, write or read test.
    Perf(Box<PerfReport>),
    /// What a server did for its client.
    Served(Served),
}

/// Serve one rdmadiag client (any test it asks for) on `listener`, a port bound already: the
/// server role of [`run`] for callers that must know the port before the client dials.
pub fn serve_on(listener: &std::net::TcpListener, opts: &SessionOptions) -> Result<TestReport> {
    session::phase::reset();
    let opts = SessionOptions {
        host: None,
        persist: false,
        port: listener.local_addr()?.port(),
        ..opts.clone()
    };
    Ok(TestReport::Served(session::run_server_on(
        listener,
        &opts,
        session::serve_client,
    )?))
}

/// Run `spec` in `role`. Errors are complete sentences; a mistake in the spec or the options is
/// a [`UsageError`], data that did not arrive as sent a [`crate::exit::DataMismatch`].
pub fn run(
    spec: &TestSpec,
    opts: &SessionOptions,
    role: Role,
    observer: &dyn Observer,
) -> Result<TestReport> {
    session::phase::reset();
    spec.check_combination().map_err(UsageError)?;
    let pingpong = matches!(spec.test, Test::Pingpong(_));
    if pingpong {
        pingpong::validate(spec).map_err(UsageError)?;
        if opts.compat == Some(Compat::Ibv) && opts.persist {
            return Err(UsageError("--compat ibv serves one ibv_rc_pingpong client".into()).into());
        }
        if opts.compat == Some(Compat::Perftest) {
            return Err(UsageError("--compat perftest applies to bw and lat".into()).into());
        }
    } else {
        perf::validate(spec).map_err(UsageError)?;
        if opts.compat == Some(Compat::Ibv) {
            return Err(UsageError("--compat ibv applies to pingpong only".into()).into());
        }
    }
    let mut opts = opts.clone();
    opts.host = match &role {
        Role::Client { host } => Some(host.clone()),
        _ => None,
    };
    let opts = &opts;
    let compat = pingpong && opts.compat == Some(Compat::Ibv);
    if opts.compat == Some(Compat::Perftest) {
        return match role {
            Role::Client { .. } => Ok(TestReport::Perf(Box::new(perf::perftest_client(
                opts, spec, observer,
            )?))),
            _ => Err(UsageError(
                "--compat perftest connects to a perftest server: give its HOST".into(),
            )
            .into()),
        };
    }
    let client = |o: &SessionOptions| -> Result<TestReport> {
        Ok(if pingpong {
            TestReport::Pingpong(Box::new(pingpong::client(o, spec, observer)?))
        } else {
            TestReport::Perf(Box::new(perf::client(o, spec, observer)?))
        })
    };
    match role {
        Role::Client { .. } => client(opts),
        Role::Loopback if compat => {
            let s = spec.clone();
            session::run_loopback(opts, move |st, o| pingpong::compat_serve(st, o, &s), client)
        }
        Role::Loopback => session::run_loopback(opts, session::serve_client, client),
        Role::Server if opts.persist => match session::run_persistent(opts)? {},
        Role::Server if compat => {
            let r = session::run_server(opts, |st, o| pingpong::compat_serve(st, o, spec))?;
            Ok(TestReport::Served(Served::Pingpong(Box::new(r))))
        }
        Role::Server if pingpong => Ok(TestReport::Served(session::run_server(
            opts,
            session::serve_client,
        )?)),
        // A bw or lat server serves perftest clients too, with its own flags' test.
        Role::Server => Ok(TestReport::Served(session::run_server(opts, |st, o| {
            session::serve_client_or_perftest(st, o, spec)
        })?)),
    }
}
