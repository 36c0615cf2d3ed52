//! `mcp-demo-server`: see [`switchboard::demo_server`] (the same code also runs as the hidden
//! `switchboard __demo-server` subcommand).

fn main() {
    switchboard::demo_server::run(std::env::args().skip(1))
}
