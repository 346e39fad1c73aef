//! `rdmadiag pingpong`: SEND/RECV round trips as client, server or loopback.

use crate::cli::{Compat, ConnectArgs, PingpongArgs};
use crate::connect::control::TestSpec;
use crate::connect::endpoint::PortChoice;
use crate::exit::{self, UsageError};
use crate::output;
use crate::render::{self, Style};
use crate::session::{self, SessionOptions, pingpong};
use anyhow::Result;

/// Turn the shared connection flags into session options.
pub fn session_options(c: &ConnectArgs) -> Result<SessionOptions> {
    if c.cm && c.compat.is_some() {
        return Err(UsageError("--cm and --compat cannot be combined".into()).into());
    }
    if c.device.as_deref().is_some_and(|d| d.trim().is_empty()) {
        return Err(UsageError("-d/--device needs a device name".into()).into());
    }
    Ok(SessionOptions {
        host: c.host.clone(),
        port: c.port,
        bind: c.bind,
        persist: c.persist,
        loopback: c.loopback,
        timeout: c.timeout,
        wait: c.wait,
        choice: PortChoice {
            device: c.device.clone(),
            port: c.ib_port,
            gid_index: c.gid_index,
        },
        mtu: c.mtu,
        cm: c.cm,
        compat_ibv: c.compat == Some(Compat::Ibv),
        verbose: c.verbose,
        limits: crate::session::ServerLimits {
            max_size: c.max_size,
            max_qps: c.max_qps,
            ..Default::default()
        },
    })
}

pub fn run(args: &PingpongArgs) -> Result<u8> {
    let opts = session_options(&args.connect)?;
    let spec = TestSpec {
        test: "pingpong".into(),
        transport: args.transport,
        size: args.size,
        iterations: args.iterations,
        rx_depth: args.rx_depth,
        events: args.events,
        mtu: opts.mtu,
        cm: opts.cm,
        perf: None,
    };
    pingpong::validate(&spec).map_err(UsageError)?;
    if opts.cm && spec.transport != crate::connect::control::Transport::Rc {
        return Err(
            UsageError("--cm connects RC queue pairs only: drop -c or use -c RC".into()).into(),
        );
    }
    if opts.compat_ibv && opts.persist {
        return Err(UsageError("--compat ibv serves one ibv_rc_pingpong client".into()).into());
    }
    let report: pingpong::PingpongReport = if opts.loopback {
        let s = spec.clone();
        if opts.compat_ibv {
            session::run_loopback(
                &opts,
                move |st, o| Ok(serde_json::to_value(pingpong::compat_serve(st, o, &s)?)?),
                |o| pingpong::client(o, &spec),
            )?
        } else {
            session::run_loopback(&opts, session::serve_client, |o| pingpong::client(o, &spec))?
        }
    } else if opts.host.is_some() {
        pingpong::client(&opts, &spec)?
    } else if opts.compat_ibv {
        let s = spec.clone();
        let v = session::run_server(&opts, move |st, o| {
            Ok(serde_json::to_value(pingpong::compat_serve(st, o, &s)?)?)
        })?;
        serde_json::from_value(v)?
    } else {
        let v = session::run_server(&opts, session::serve_client)?;
        serde_json::from_value(v)?
    };
    if args.output.json {
        output::emit_json(&report)?;
    } else {
        output::emit(&render::pingpong_text(&report, Style::detect()))?;
    }
    Ok(exit::OK)
}
