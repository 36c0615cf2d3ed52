//! `mcp-demo-server`: see [`switchboard_cli::demo_server`] (the same code also runs as the
//! hidden `switchboard __demo-server` subcommand).

fn main() {
    switchboard_cli::demo_server::run(std::env::args().skip(1))
}
