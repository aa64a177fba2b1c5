//! `io-harness completions bash|zsh|fish|…` and `io-harness man`: generated from the
//! clap definition itself, so they cannot fall behind the commands.

use clap::CommandFactory;

use super::{Cli, CliError, CompletionsArgs};

pub fn completions(args: CompletionsArgs) -> Result<i32, CliError> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "io-harness", &mut buf);
    super::output::out(format_args!("{}", String::from_utf8_lossy(&buf)));
    Ok(0)
}

pub fn man() -> Result<i32, CliError> {
    let cmd = Cli::command();
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut buf)
        .map_err(|e| CliError::Internal(format!("cannot render the manual page: {e}")))?;
    super::output::out(format_args!("{}", String::from_utf8_lossy(&buf)));
    Ok(0)
}
