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
            // One line: clap's first line names the flag and the problem.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid command line");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("rdmadiag: {first} (see 'rdmadiag --help')");
            return ExitCode::from(exit::USAGE);
        }
    };
    if cli.command.talks_to_a_peer() {
        install_ctrl_c();
    }
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("rdmadiag: {e:#}");
            ExitCode::from(exit::code_for(&e))
        }
    }
}

/// First Ctrl-C: ask every wait loop to stop so resources unwind cleanly; second: exit now.
fn install_ctrl_c() {
    use std::sync::atomic::Ordering;
    let _ = ctrlc::set_handler(|| {
        if rdmadiag::session::STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
}
