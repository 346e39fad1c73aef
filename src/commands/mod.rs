//! One module per subcommand: parse options, call the core, hand the result to a renderer.

mod check;
mod devices;
mod fabric;
pub mod perf;
pub mod pingpong;
mod ports;

use crate::Role;
use crate::cli::{Cli, Command, ConnectArgs};
use crate::connect::endpoint::Endpoint;
use crate::connect::key::TestKey;
use crate::counters::{Before, CounterDeltas};
use crate::exit::UsageError;
use crate::session::{ServerLimits, SessionOptions, StatusSink};
use anyhow::Result;
use std::io::IsTerminal;

/// Run the parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Devices(args) => devices::run(&args),
        Command::Ports(args) => ports::run(&args),
        Command::Pingpong(args) => pingpong::run(&args),
        Command::Bw(args) => perf::run_bw(&args),
        Command::Lat(args) => perf::run_lat(&args),
        Command::Write(args) => perf::run_xfer(&args, crate::perf::Op::Write),
        Command::Read(args) => perf::run_xfer(&args, crate::perf::Op::Read),
        Command::Check(args) => check::run(&args),
        Command::Fabric(args) => fabric::run(&args),
    }
}

/// Turn the shared connection flags into session options and this process's role.
pub fn session_options(c: &ConnectArgs) -> Result<(SessionOptions, Role)> {
    if c.port_choice
        .device
        .as_deref()
        .is_some_and(|d| d.trim().is_empty())
    {
        return Err(UsageError("-d/--device needs a device name".into()).into());
    }
    let role = match (&c.host, c.loopback) {
        (_, true) => Role::Loopback,
        (Some(h), false) => Role::Client { host: h.clone() },
        (None, false) => Role::Server,
    };
    for (flag, given) in [
        ("--tclass", c.priority.tclass.is_some()),
        ("--sl", c.priority.sl.is_some()),
    ] {
        if given {
            refuse_on_server(
                &role,
                flag,
                "is the client's to choose (the client sends the whole test)",
                ", with the priority each client asks for",
            )?;
        }
    }
    // Status lines on stderr when it is a terminal or -v asks for them; a persistent server
    // always logs its clients (served, busy, failed): that log is what its operator reads.
    let stderr_sink = || StatusSink::new(|msg| eprintln!("rdmadiag: {msg}"));
    let client_log = stderr_sink();
    let status = if c.verbose || std::io::stderr().is_terminal() {
        stderr_sink()
    } else {
        StatusSink::default()
    };
    let opts = SessionOptions {
        host: c.host.clone(),
        port: c.port,
        bind: c.bind,
        persist: c.persist,
        timeout: c.timeout,
        wait: c.wait,
        choice: c.port_choice.choice(),
        compat: None,
        status,
        client_log,
        refusals: Default::default(),
        limits: ServerLimits {
            max_size: c.max_size,
            max_qps: c.max_qps,
            ..Default::default()
        },
        key: test_key(c.key_file.as_deref(), &|k| std::env::var(k).ok())?,
    };
    Ok((opts, role))
}

/// The environment variable that holds the test-port key when no --key-file is given.
pub const TEST_KEY_ENV: &str = "RDMADIAG_KEY";

/// The test-port key: `--key-file`, else RDMADIAG_KEY, else none (an open server).
pub fn test_key(
    key_file: Option<&std::path::Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TestKey>> {
    if let Some(path) = key_file {
        return Ok(Some(TestKey::new(&crate::fabric::auth::read_key_file(
            path,
        )?)));
    }
    match env(TEST_KEY_ENV).filter(|k| !k.is_empty()) {
        Some(k) => {
            crate::fabric::auth::check_key(k.as_bytes(), TEST_KEY_ENV, "and export it")?;
            Ok(Some(TestKey::new(k.as_bytes())))
        }
        None => Ok(None),
    }
}

/// Refuse `flag` on a server, before anything waits: what it asks for (`why`) needs the figures
/// or the report, which only the client (and --loopback) has. The one rule for every such flag.
pub fn refuse_on_server(role: &Role, flag: &str, why: &str, hint: &str) -> Result<()> {
    if *role == Role::Server {
        return Err(UsageError(format!(
            "{flag} {why}: on the client (give the server's HOST) or with --loopback; a server \
             only serves{hint}"
        ))
        .into());
    }
    Ok(())
}

/// With `--counters`: read this host's port counters before the test, on every port it may use
/// (it picks its port itself). A server prints no report of its side: refused there.
pub fn counters_before(on: bool, opts: &SessionOptions, role: &Role) -> Result<Option<Before>> {
    if !on {
        return Ok(None);
    }
    refuse_on_server(
        role,
        "--counters",
        "joins the port's counters to the test's report",
        " (watch a server's port with `rdmadiag ports --counters --interval DURATION`)",
    )?;
    let root = crate::sysfs::class_root();
    let choice = &opts.choice;
    Ok(Some(Before::read(
        &root,
        choice.device.as_deref(),
        choice.port,
    )))
}

/// What changed on the test's port (`local`) since `before`; a warning when it was not read.
pub fn counters_since(before: Option<&Before>, local: &Endpoint) -> Option<CounterDeltas> {
    let deltas = before?.since(&local.device, local.port);
    if deltas.is_none() {
        eprintln!(
            "rdmadiag: no counters of {} port {}: the port was not found under {} before the test",
            local.device,
            local.port,
            crate::sysfs::class_root().display()
        );
    }
    deltas
}
