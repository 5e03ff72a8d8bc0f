//! Finding single-value flags given more than once, so the process can say which value it took
//! (the last, as pflag does) instead of taking it silently.

use clap::{ArgAction, Command};

/// One flag given more than once: its long name, how many times, and the value that won.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepeatedFlag {
    /// The long name, without dashes.
    pub name: String,
    /// How many times it was given.
    pub times: usize,
    /// The value taken (the last one), as written; empty for a bare boolean `--flag`.
    pub taken: String,
}

impl std::fmt::Display for RepeatedFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--{} was given {} times; the last value ({:?}) is used, as kube-controller-manager does",
            self.name, self.times, self.taken
        )
    }
}

/// The single-value flags of `command` that `args` (without the program name) gives more than
/// once, in the order of their first appearance. List flags (`ArgAction::Append`) accumulate
/// by design and are not reported; nothing after a bare `--` is a flag.
pub fn repeated_flags(command: &Command, args: &[String]) -> Vec<RepeatedFlag> {
    let single: Vec<&str> = command
        .get_arguments()
        .filter(|a| matches!(a.get_action(), ArgAction::Set))
        .filter_map(|a| a.get_long())
        .collect();
    let mut seen: Vec<RepeatedFlag> = Vec::new();
    let mut args = args.iter().peekable();
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        let Some(flag) = arg.strip_prefix("--") else {
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let Some(&name) = single.iter().find(|s| **s == name) else {
            continue;
        };
        let taken = match inline {
            Some(v) => v,
            // `--flag value`, unless the next word is another flag (a bare boolean).
            None => match args.peek() {
                Some(next) if !next.starts_with("--") => args.next().cloned().unwrap_or_default(),
                _ => String::new(),
            },
        };
        match seen.iter_mut().find(|r| r.name == name) {
            Some(r) => {
                r.times += 1;
                r.taken = taken;
            }
            None => seen.push(RepeatedFlag {
                name: name.to_string(),
                times: 1,
                taken,
            }),
        }
    }
    seen.retain(|r| r.times > 1);
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Arg;

    fn command() -> Command {
        Command::new("t")
            .arg(Arg::new("cluster-name").long("cluster-name"))
            .arg(
                Arg::new("controllers")
                    .long("controllers")
                    .action(ArgAction::Append),
            )
            .arg(
                Arg::new("leader-elect")
                    .long("leader-elect")
                    .num_args(0..=1)
                    .action(ArgAction::Set),
            )
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_repeated_single_value_flag_is_reported_with_the_value_taken() {
        let found = repeated_flags(
            &command(),
            &args(&["--cluster-name=a", "--controllers=x", "--cluster-name", "b"]),
        );
        assert_eq!(
            found,
            [RepeatedFlag {
                name: "cluster-name".into(),
                times: 2,
                taken: "b".into()
            }]
        );
        assert_eq!(
            found[0].to_string(),
            "--cluster-name was given 2 times; the last value (\"b\") is used, as kube-controller-manager does"
        );
    }

    #[test]
    fn list_flags_once_given_flags_and_what_follows_a_double_dash_are_not_reported() {
        let found = repeated_flags(
            &command(),
            &args(&[
                "--controllers=a",
                "--controllers=b",
                "--cluster-name=a",
                "--leader-elect",
                "--",
                "--cluster-name=b",
            ]),
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_bare_boolean_repeated_before_another_flag_takes_no_value() {
        let found = repeated_flags(
            &command(),
            &args(&["--leader-elect=false", "--leader-elect", "--cluster-name=a"]),
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].taken, "");
        assert_eq!(found[0].times, 2);
    }
}
