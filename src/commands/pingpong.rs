//! `rdmadiag pingpong`: SEND/RECV round trips as client, server or loopback.

use super::{counters_before, counters_since, session_options};
use crate::TestReport;
use crate::cli::PingpongArgs;
use crate::connect::control::{PingpongSpec, Test, TestSpec};
use crate::exit;
use crate::report::export::{self, Format};
use crate::report::progress::{ProgressLine, Span, Watched};
use crate::report::{self, Style};
use crate::session::Served;
use anyhow::{Result, bail};

pub fn run(args: &PingpongArgs) -> Result<u8> {
    let (mut opts, role) = session_options(&args.connect)?;
    opts.compat = args.compat.map(Into::into);
    let spec = TestSpec {
        link: args.connect.link(args.connection.transport.into()),
        test: Test::Pingpong(PingpongSpec {
            size: args.size,
            iterations: args.iterations,
            rx_depth: args.rx_depth,
            events: args.events,
        }),
    };
    let before = counters_before(args.counters, &opts, &role)?;
    // A line on a terminal for a long client run (a server's round trips are the client's).
    let watched = std::sync::Arc::new(Watched::default());
    let span = Span::Messages(if role == crate::Role::Server {
        0
    } else {
        args.iterations
    });
    let line = ProgressLine::start(args.output.json, watched.clone(), span);
    // A server prints the client's measurement, the same document the client prints.
    let outcome = crate::run(&spec, &opts, role, watched.as_ref());
    drop(line);
    let r = match outcome? {
        TestReport::Pingpong(mut r) => {
            r.counter_deltas = counters_since(before.as_ref(), &r.local);
            r
        }
        TestReport::Served(Served::Pingpong(r)) => r,
        other => bail!("a ping-pong run produced {other:?}"),
    };
    let format = if args.output.json {
        Format::Json
    } else {
        Format::Text
    };
    report::emit(&export::render(
        r.as_ref(),
        format,
        &export::Context::now(Style::detect()),
    )?)?;
    Ok(exit::OK)
}
