//! Parsing the process arguments with upstream's (pflag's) rules: the last of a repeated flag
//! wins, and `--controllers` help lists the known controllers.

use clap::Parser;
use controller_manager::manager::KnownControllers;

use crate::cloud_initializers;

/// Parses the process arguments into `P` as `P::parse()` does, with upstream's (pflag's) rule
/// that a flag given twice takes its last value (clap would refuse it), so overlays that append
/// arguments keep working, and upstream's `--controllers` help listing the known controllers. List flags such as
/// `--controllers` still accumulate, as pflag's string slices do. Like `P::parse()`, prints the
/// error and exits with status 2 on bad input.
pub fn parse_args<P: Parser>() -> P {
    // Lossy, so a non-UTF-8 argument becomes a clap error instead of a panic in `env::args`.
    let args = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    match try_parse_args_from(args) {
        Ok(parsed) => parsed,
        Err(e) => e.exit(),
    }
}

/// [`parse_args`] over explicit arguments (the first is the program name), returning the error.
pub fn try_parse_args_from<P: Parser>(
    args: impl IntoIterator<Item = String>,
) -> Result<P, clap::Error> {
    try_parse_args_with(args, &cloud_initializers().known())
}

/// [`try_parse_args_from`] for a distro whose initializer map is not the stock one: `--help`
/// for `--controllers` then lists `known` (see [`controllers_help`]).
pub fn try_parse_args_with<P: Parser>(
    args: impl IntoIterator<Item = String>,
    known: &KnownControllers,
) -> Result<P, clap::Error> {
    let args: Vec<String> = args.into_iter().collect();
    let mut command = P::command().args_override_self(true);
    if command.get_arguments().any(|a| a.get_id() == "controllers") {
        let help = controllers_help(known);
        command = command.mut_arg("controllers", |a| a.help(help));
    }
    let mut matches = command.try_get_matches_from_mut(&args)?;
    P::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))
}

/// Upstream's `--controllers` help: the syntax, then every canonical name and the
/// disabled-by-default ones, each sorted and comma separated.
pub fn controllers_help(known: &KnownControllers) -> String {
    let mut all: Vec<&str> = known.iter().map(|c| c.name.as_str()).collect();
    let mut off: Vec<&str> = known
        .iter()
        .filter(|c| c.disabled_by_default)
        .map(|c| c.name.as_str())
        .collect();
    all.sort_unstable();
    off.sort_unstable();
    format!(
        "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'.\nAll controllers: {}\nDisabled-by-default controllers: {}",
        all.join(", "),
        off.join(", ")
    )
}
