//! The `switchboard` command line; see `switchboard --help` and the README.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
