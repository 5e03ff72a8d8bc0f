//! What a run found: one entry per check (passed, skipped with a reason, or failed with what the
//! provider returned against what the rule expects), and the assertion a provider's test ends with.

use std::fmt;

/// What the provider returned, against what the rule expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What the rule expects.
    pub expected: String,
    /// What the provider returned.
    pub got: String,
}

impl Failure {
    /// A failure: `expected`, but the provider gave `got`.
    pub fn new(expected: impl Into<String>, got: impl Into<String>) -> Self {
        Failure {
            expected: expected.into(),
            got: got.into(),
        }
    }
}

/// How one check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The provider honours the rule.
    Passed,
    /// Not checked, and why (the facet is missing, or the fixture lacks what the check needs).
    Skipped(String),
    /// The provider breaks the rule.
    Failed(Failure),
}

/// One check's entry in a [`Report`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// The check's name, which says what it checks.
    pub name: &'static str,
    /// The upstream rule it enforces.
    pub rule: &'static str,
    /// How it ended.
    pub outcome: Outcome,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Passed => write!(f, "ok      {}", self.name),
            Outcome::Skipped(why) => write!(f, "skipped {}: {why}", self.name),
            Outcome::Failed(failure) => write!(
                f,
                "FAILED  {}\n    rule:     {}\n    expected: {}\n    got:      {}",
                self.name, self.rule, failure.expected, failure.got
            ),
        }
    }
}

/// The outcome of every check run on a provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The provider's `provider_name()`.
    pub provider: String,
    /// One entry per check, in the order they ran.
    pub checks: Vec<CheckReport>,
}

impl Report {
    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &CheckReport> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed(_)))
    }

    /// The checks that were skipped.
    pub fn skipped(&self) -> impl Iterator<Item = &CheckReport> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Skipped(_)))
    }

    /// Whether no check failed.
    pub fn passed(&self) -> bool {
        self.failed().next().is_none()
    }

    /// The entry of the check called `name`.
    pub fn check(&self, name: &str) -> Option<&CheckReport> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// Panics with every failure (rule, expected, got) unless all checks passed or were skipped;
    /// prints the skipped ones either way, so a skip is seen in the test's output.
    #[track_caller]
    pub fn assert_passed(&self) {
        for skipped in self.skipped() {
            println!("{skipped}");
        }
        if !self.passed() {
            panic!("{self}");
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed = self.failed().count();
        writeln!(
            f,
            "provider {:?}: {} checks, {failed} failed, {} skipped",
            self.provider,
            self.checks.len(),
            self.skipped().count()
        )?;
        for check in &self.checks {
            writeln!(f, "{check}")?;
        }
        Ok(())
    }
}
