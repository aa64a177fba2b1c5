//! The `io-harness` command: a thin layer over the library. Parsing and rendering live
//! in `cli/`; everything that does work is in `io_harness`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
