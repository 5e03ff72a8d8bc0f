//! What the flag structs share beyond clap's derive: two builder methods they name in their
//! attributes, Go's bool flag form (`#[arg(long, go_bool = true)]`) and a `--help` section that
//! ends with its struct (`#[command(next_help_heading = "…", end_help_heading = true)]`); and
//! parsing one flag group alone ([`parse_group`]).
//!
//! clap's derive turns any `name = value` it does not know into a call `.name(value)` on the
//! `Arg` or `Command`, so bringing these traits into scope is all a struct needs. Each flag's
//! doc comment is its upstream help text, kept verbatim (`verbatim_doc_comment`) so `--help`
//! prints it to the letter.

use clap::{Arg, ArgAction, Args, Command, FromArgMatches};

/// Go pflag's bool flag on a clap [`Arg`]: `--x`, `--x=true` and `--x=false` all parse, as
/// upstream's manifests write them.
pub trait GoBoolArg {
    /// `--x` alone means true; without the flag the value is `default`.
    fn go_bool(self, default: bool) -> Self;
}

impl GoBoolArg for Arg {
    fn go_bool(self, default: bool) -> Self {
        self.action(ArgAction::Set)
            .num_args(0..=1)
            .default_value(if default { "true" } else { "false" })
            .default_missing_value("true")
    }
}

/// Scopes a struct's `next_help_heading` to its own flags.
pub trait EndHelpHeading {
    /// Clears the heading again after the struct's flags, so the flags a parent declares after
    /// flattening it stay where they were (clap would otherwise file them under this heading).
    fn end_help_heading(self, end: bool) -> Self;
}

impl EndHelpHeading for Command {
    fn end_help_heading(self, end: bool) -> Self {
        if end {
            self.next_help_heading(None::<&str>)
        } else {
            self
        }
    }
}

/// The flag group `T` alone, as a command named `test`: its `--help`, or its parser.
pub fn group_command<T: Args>() -> Command {
    T::augment_args(Command::new("test"))
}

/// Parses `args` (without a program name) into the flag group `T` alone, e.g.
/// `parse_group::<GenericOptions>(&["--leader-elect=false"])`: for tests of one group and for
/// programs that build their arguments themselves.
pub fn parse_group<T: Args + FromArgMatches>(args: &[&str]) -> Result<T, clap::Error> {
    let argv = std::iter::once("test").chain(args.iter().copied());
    T::from_arg_matches(&group_command::<T>().try_get_matches_from(argv)?)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Args, Debug)]
    #[command(next_help_heading = "Inner flags", end_help_heading = true)]
    struct Inner {
        /// Upstream's text, full stop kept.
        #[arg(long, go_bool = true, verbatim_doc_comment)]
        on: bool,
    }

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        inner: Inner,
        /// After the flatten
        #[arg(long)]
        after: bool,
    }

    fn on(args: &[&str]) -> bool {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .inner
            .on
    }

    #[test]
    fn go_bool_takes_every_go_form() {
        assert!(on(&[]));
        assert!(on(&["--on"]));
        assert!(on(&["--on=true"]));
        assert!(!on(&["--on=false"]));
        assert!(Cli::try_parse_from(["t", "--on=maybe"]).is_err());
    }

    #[test]
    fn heading_ends_with_its_struct() {
        use clap::CommandFactory;
        let help = Cli::command().render_help().to_string();
        let inner = help.find("Inner flags:").unwrap();
        let on = help.find("--on").unwrap();
        let after = help.find("--after").unwrap();
        assert!(inner < on, "{help}");
        assert!(after < inner, "--after must stay under Options:\n{help}");
        assert!(help.contains("Upstream's text, full stop kept."), "{help}");
    }
}
