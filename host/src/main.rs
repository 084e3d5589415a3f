fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(jig::cli::main())
}
