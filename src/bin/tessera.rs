//! The `tessera` command line.
fn main() -> std::process::ExitCode {
    tessera::cli::main()
}
