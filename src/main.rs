//! rdmadiag's entry point: parse, run, turn errors into one line and an exit code.

use clap::Parser;
use clap::error::ErrorKind;
use rdmadiag::{cli::Cli, commands, exit};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::from(exit::OK);
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(exit::USAGE);
        }
        Err(e) => {
            let line = usage_line(&e.render().to_string());
            eprintln!("rdmadiag: {line}");
            // A script that asked for JSON gets its one document even for a bad command line.
            if std::env::args().skip(1).any(|a| a == "--json") {
                let _ = rdmadiag::report::emit_error_json(rdmadiag::report::ErrorBody {
                    message: &line,
                    exit_code: exit::USAGE,
                    phase: None,
                    peer: None,
                });
            }
            return ExitCode::from(exit::USAGE);
        }
    };
    if cli.command.talks_to_a_peer() {
        // Without the handlers the signals' default action (the process ends) stays.
        let _ = exit::stop_on_signals();
    }
    let json = cli.command.json();
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Whatever gave way once a signal asked the run to stop, the signal ended it.
            let signal = exit::stop_signal();
            let code = signal.map_or_else(|| exit::code_for(&e), exit::code_for_signal);
            match signal {
                Some(s) if !e.chain().any(|c| c.is::<exit::Interrupted>()) => {
                    eprintln!("rdmadiag: stopped by {}: {e:#}", exit::signal_name(s))
                }
                _ => eprintln!("rdmadiag: {e:#}"),
            }
            // A report printed before the error (data not as sent, a signal): that is the
            // document. Otherwise, data not as sent included, the error is.
            if json && !exit::after_report(&e) {
                let at = rdmadiag::session::phase::current();
                let _ = rdmadiag::report::emit_error_json(rdmadiag::report::ErrorBody {
                    message: &format!("{e:#}"),
                    exit_code: code,
                    phase: at.as_ref().map(|p| p.phase),
                    peer: at.as_ref().and_then(|p| p.peer.as_deref()),
                });
            }
            ExitCode::from(code)
        }
    }
}

/// clap's error as one line: its first line, the indented lines that continue it (the names of
/// missing arguments), and where to read more.
fn usage_line(rendered: &str) -> String {
    let mut lines = rendered.lines();
    let first = lines.next().unwrap_or("invalid command line");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    let more: Vec<&str> = lines
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    if !more.is_empty() {
        line = format!(
            "{} {}",
            line.trim_end_matches(':').trim_end(),
            more.join(", ")
        );
    }
    let sub = std::env::args()
        .nth(1)
        .filter(|a| rdmadiag::cli::SUBCOMMANDS.contains(&a.as_str()));
    match sub {
        Some(s) => format!("{line} (see 'rdmadiag {s} --help')"),
        None => format!("{line} (see 'rdmadiag --help')"),
    }
}
