//! Parsing the process arguments with upstream's (pflag's) rules: the last of a repeated flag
//! wins, and the `--controllers` and `--webhooks` help lists the known controllers and webhooks:
//! those of the maps the process runs, so [`parse_args`] leaves `--help` to the
//! [`CloudControllerManager`] that knows them.
//!
//! [`CloudControllerManager`]: super::CloudControllerManager

use std::sync::Mutex;

use clap::error::ErrorKind;
use clap::{Command, Parser};
use controller_manager::manager::KnownControllers;

use super::repeated::repeated_flags;
use crate::cloud_initializers;
use crate::webhooks::{cloud_webhooks, known_webhooks};

/// Parses the process arguments into `P` as `P::parse()` does, with upstream's (pflag's) rule
/// that a flag given twice takes its last value (clap would refuse it), so overlays that append
/// arguments keep working, and upstream's `--controllers` help listing the known controllers.
/// List flags such as `--controllers` still accumulate, as pflag's string slices do. Like
/// `P::parse()`, prints the error and exits with status 2 on bad input.
///
/// `-h`/`--help` is not printed here when `P` has `--controllers` (it flattens
/// [`CloudManagerOptions`](super::CloudManagerOptions)): the other arguments are parsed, and
/// [`CloudControllerManager::validate`](super::CloudControllerManager::validate) (or `run`),
/// which knows every controller the binary adds, prints the help and exits 0. A `main` that
/// needs no other change so lists its own controllers; it should build the manager before doing
/// work of its own. Should the other arguments not parse, the help lists the stock controllers
/// at once, as before.
pub fn parse_args<P: Parser>() -> P {
    // Lossy, so a non-UTF-8 argument becomes a clap error instead of a panic in `env::args`.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match try_parse_args_from(args.clone()) {
        Ok(parsed) => {
            warn_repeated::<P>(&args);
            parsed
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelp => match defer_help(&args) {
            Some((parsed, help)) => {
                *PENDING_HELP.lock().unwrap_or_else(|p| p.into_inner()) = Some(help);
                parsed
            }
            None => e.exit(),
        },
        Err(e) => e.exit(),
    }
}

/// Says on stderr which value a single-value flag given more than once took (the last, as
/// pflag), so an overlay that overrides a flag the base sets is visible, not silent.
fn warn_repeated<P: Parser>(args: &[String]) {
    for repeated in repeated_flags(&P::command(), args.get(1..).unwrap_or_default()) {
        eprintln!("warning: {repeated}");
    }
}

/// A `--help` that [`parse_args`] left for the manager to print once its maps are known.
struct PendingHelp {
    command: Command,
    long: bool,
}

static PENDING_HELP: Mutex<Option<PendingHelp>> = Mutex::new(None);

/// `args` parsed without their help flags, and the help to print later; `None` when `P` has no
/// `--controllers` or the rest does not parse.
fn defer_help<P: Parser>(args: &[String]) -> Option<(P, PendingHelp)> {
    let (rest, long) = without_help_flags(args)?;
    let known = Known {
        controllers: &cloud_initializers().known(),
        webhooks: &known_webhooks(&cloud_webhooks()),
    };
    let (parsed, command) = parse_with::<P>(rest, known).ok()?;
    let has_controllers = command.get_arguments().any(|a| a.get_id() == "controllers");
    has_controllers.then_some((parsed, PendingHelp { command, long }))
}

/// `args` without `-h`/`--help` (before a `--`), and whether the first was the long one (clap
/// prints the long help for `--help`); `None` if there was none.
fn without_help_flags(args: &[String]) -> Option<(Vec<String>, bool)> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let is_help = |a: &String| a == "-h" || a == "--help";
    let first = args[..end].iter().find(|a| is_help(a))?;
    let long = first == "--help";
    let rest = args[..end]
        .iter()
        .filter(|a| !is_help(a))
        .chain(&args[end..])
        .cloned()
        .collect();
    Some((rest, long))
}

/// The controllers and webhooks the help lists.
#[derive(Clone, Copy)]
pub(super) struct Known<'a> {
    pub controllers: &'a KnownControllers,
    pub webhooks: &'a KnownControllers,
}

/// Prints the help [`parse_args`] deferred, with `--controllers` and `--webhooks` listing
/// `known` (in colour when stdout is a terminal, as clap does); `false` if none was asked for.
/// Taken once.
pub(super) fn print_deferred_help(known: Known<'_>) -> bool {
    let pending = PENDING_HELP
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let Some(pending) = pending else {
        return false;
    };
    let long = pending.long;
    let mut command = help_command(pending, known);
    // Nothing to do if stdout is closed: the process exits either way.
    let _ = match long {
        true => command.print_long_help(),
        false => command.print_help(),
    };
    true
}

fn help_command(pending: PendingHelp, known: Known<'_>) -> Command {
    with_lists(pending.command, known)
}

/// `command` with the `--controllers` and `--webhooks` help (those it has) listing `known`.
fn with_lists(mut command: Command, known: Known<'_>) -> Command {
    let has = |command: &Command, id: &str| command.get_arguments().any(|a| a.get_id() == id);
    if has(&command, "controllers") {
        let help = controllers_help(known.controllers);
        command = command.mut_arg("controllers", |a| a.help(help));
    }
    if has(&command, "webhooks") {
        let help = webhooks_help(known.webhooks);
        command = command.mut_arg("webhooks", |a| a.help(help));
    }
    command
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
    let webhooks = known_webhooks(&cloud_webhooks());
    let known = Known {
        controllers: known,
        webhooks: &webhooks,
    };
    parse_with(args, known).map(|(parsed, _)| parsed)
}

/// [`try_parse_args_with`], and the command as parsing left it (its binary name set).
fn parse_with<P: Parser>(
    args: impl IntoIterator<Item = String>,
    known: Known<'_>,
) -> Result<(P, Command), clap::Error> {
    let args: Vec<String> = args.into_iter().collect();
    let mut command = with_lists(P::command().args_override_self(true), known);
    let mut matches = command.try_get_matches_from_mut(&args)?;
    let parsed = P::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))?;
    Ok((parsed, command))
}

/// Upstream's `--controllers` help: the syntax, then every canonical name and the
/// disabled-by-default ones, each sorted and comma separated.
pub fn controllers_help(known: &KnownControllers) -> String {
    list_help("controller", known)
}

/// Upstream's `--webhooks` help, worded as `--controllers`' over the webhook map.
pub fn webhooks_help(known: &KnownControllers) -> String {
    list_help("webhook", known)
}

/// The help of a selection flag over `known` entries of `kind`.
fn list_help(kind: &str, known: &KnownControllers) -> String {
    let mut all: Vec<&str> = known.iter().map(|c| c.name.as_str()).collect();
    let mut off: Vec<&str> = known
        .iter()
        .filter(|c| c.disabled_by_default)
        .map(|c| c.name.as_str())
        .collect();
    all.sort_unstable();
    off.sort_unstable();
    format!(
        "A list of {kind}s to enable. '*' enables all on-by-default {kind}s, 'foo' enables the {kind} named 'foo', '-foo' disables the {kind} named 'foo'.\nAll {kind}s: {}\nDisabled-by-default {kind}s: {}",
        all.join(", "),
        off.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use controller_manager::manager::Initializer;
    use controller_manager::webhook::WebhookInitializer;
    use kube::core::DynamicObject;
    use kube::core::admission::{AdmissionRequest, AdmissionResponse};

    use super::*;
    use crate::CloudContext;
    use crate::app::CloudManagerOptions;

    #[derive(Parser)]
    #[command(name = "distro")]
    struct Cli {
        #[command(flatten)]
        ccm: CloudManagerOptions,
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn help_flags_are_taken_out_before_a_double_dash_only() {
        assert_eq!(without_help_flags(&args(&["p", "--v=2"])), None);
        assert_eq!(
            without_help_flags(&args(&["p", "-h", "--v=2", "--help", "--", "-h"])),
            Some((args(&["p", "--v=2", "--", "-h"]), false))
        );
        assert_eq!(
            without_help_flags(&args(&["p", "--help"])),
            Some((args(&["p"]), true))
        );
    }

    /// The help `parse_args` defers lists the controllers and webhooks of the maps it is
    /// rendered with, a distro's disabled-by-default ones included, and keeps the other flags
    /// parsed.
    #[test]
    fn deferred_help_lists_the_map_it_is_rendered_with() {
        let (cli, pending) =
            defer_help::<Cli>(&args(&["distro", "--help", "--cloud-provider=mine"])).unwrap();
        assert_eq!(cli.ccm.cloud.cloud_provider, "mine");
        let known = cloud_initializers()
            .with(
                Initializer::new("my-extra", |_ctx| async { unreachable!() }).disabled_by_default(),
            )
            .known();
        let webhooks = known_webhooks(
            &cloud_webhooks()
                .with(allow("my-webhook", "/a"))
                .with(allow("my-off-webhook", "/b").disabled_by_default()),
        );
        let known = Known {
            controllers: &known,
            webhooks: &webhooks,
        };
        let help = help_command(pending, known).render_long_help().to_string();
        assert!(help.contains("Usage: distro"), "{help}");
        assert!(
            help.contains("cloud-node-lifecycle-controller, my-extra, node-route-controller"),
            "{help}"
        );
        assert!(
            help.contains("Disabled-by-default controllers: my-extra"),
            "{help}"
        );
        assert!(
            help.contains("All webhooks: my-off-webhook, my-webhook"),
            "{help}"
        );
        assert!(
            help.contains("Disabled-by-default webhooks: my-off-webhook"),
            "{help}"
        );
    }

    /// A webhook that allows everything.
    fn allow(name: &str, path: &str) -> WebhookInitializer<CloudContext> {
        WebhookInitializer::raw(name, path, |_| async {
            Ok(tower::service_fn(
                |r: AdmissionRequest<DynamicObject>| async move {
                    Ok::<_, std::convert::Infallible>(AdmissionResponse::from(&r))
                },
            ))
        })
    }

    #[test]
    fn webhooks_help_lists_known_and_disabled_by_default_names() {
        let known = known_webhooks(
            &cloud_webhooks()
                .with(allow("b-hook", "/b"))
                .with(allow("a-hook", "/a").disabled_by_default()),
        );
        assert_eq!(
            webhooks_help(&known),
            "A list of webhooks to enable. '*' enables all on-by-default webhooks, 'foo' enables the webhook named 'foo', '-foo' disables the webhook named 'foo'.\nAll webhooks: a-hook, b-hook\nDisabled-by-default webhooks: a-hook"
        );
    }
}
