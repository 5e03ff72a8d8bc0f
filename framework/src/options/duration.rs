//! Go-style durations (`15s`, `5m`, `1h30m`, `500ms`), because every upstream duration flag is written
//! that way and operators copy their manifests over unchanged.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration flag value that parses and prints like Go's `time.Duration`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(pub Duration);

/// Why a duration flag did not parse; the text says what a valid value looks like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: {reason} (expected e.g. \"15s\", \"5m\", \"1h30m\", \"500ms\")"
)]
pub struct DurationParseError {
    input: String,
    reason: &'static str,
}

impl GoDuration {
    /// The duration as std's type, for timers.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        GoDuration(d)
    }
}

impl FromStr for GoDuration {
    type Err = DurationParseError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason| DurationParseError {
            input: input.to_string(),
            reason,
        };
        let s = input.trim();
        let s = s.strip_prefix('+').unwrap_or(s);
        if s.starts_with('-') {
            return Err(err("negative durations are not allowed"));
        }
        if s == "0" {
            return Ok(GoDuration(Duration::ZERO));
        }
        if s.is_empty() {
            return Err(err("empty value"));
        }
        let mut rest = s;
        let mut total_nanos: u128 = 0;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            if num_len == 0 {
                return Err(err("missing number before unit"));
            }
            let (num, tail) = rest.split_at(num_len);
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let nanos_per_unit: u128 = match unit {
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60 * 1_000_000_000,
                "h" => 3_600 * 1_000_000_000,
                "" => return Err(err("missing unit")),
                _ => return Err(err("unknown unit")),
            };
            let (int_part, frac_part) = match num.split_once('.') {
                Some((i, f)) => (i, f),
                None => (num, ""),
            };
            if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
                return Err(err("malformed number"));
            }
            let int: u128 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| err("number too large"))?
            };
            let mut frac_nanos: u128 = 0;
            let mut scale = nanos_per_unit;
            for digit in frac_part.chars().take(18) {
                scale /= 10;
                frac_nanos += u128::from(digit.to_digit(10).unwrap_or(0)) * scale;
            }
            total_nanos = int
                .checked_mul(nanos_per_unit)
                .and_then(|n| n.checked_add(frac_nanos))
                .and_then(|n| n.checked_add(total_nanos))
                .ok_or_else(|| err("number too large"))?;
            rest = tail;
        }
        // Go's time.Duration is an int64 of nanoseconds (at most ~292 years); larger values are
        // rejected as upstream does, and so never reach `Instant + Duration` arithmetic.
        if total_nanos > i64::MAX as u128 {
            return Err(err("number too large"));
        }
        let secs =
            u64::try_from(total_nanos / 1_000_000_000).map_err(|_| err("number too large"))?;
        // The remainder of a division by 1e9 always fits in u32.
        let nanos = (total_nanos % 1_000_000_000) as u32;
        Ok(GoDuration(Duration::new(secs, nanos)))
    }
}

impl fmt::Display for GoDuration {
    /// Prints as Go does (`15s`, `5m0s`, `12h0m0s`, `500ms`), so `--help` shows upstream defaults verbatim.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d < Duration::from_secs(1) {
            let n = d.as_nanos();
            return if n < 1_000 {
                write!(f, "{n}ns")
            } else if n < 1_000_000 {
                write!(f, "{}µs", trim_frac(n, 1_000))
            } else {
                write!(f, "{}ms", trim_frac(n, 1_000_000))
            };
        }
        let total = d.as_secs();
        let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
        let secs = trim_frac(
            u128::from(s) * 1_000_000_000 + u128::from(d.subsec_nanos()),
            1_000_000_000,
        );
        if h > 0 {
            write!(f, "{h}h{m}m{secs}s")
        } else if m > 0 {
            write!(f, "{m}m{secs}s")
        } else {
            write!(f, "{secs}s")
        }
    }
}

fn trim_frac(value: u128, unit: u128) -> String {
    let int = value / unit;
    let frac = value % unit;
    if frac == 0 {
        return int.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Duration {
        s.parse::<GoDuration>().unwrap().0
    }

    #[test]
    fn parses_go_forms() {
        assert_eq!(parse("15s"), Duration::from_secs(15));
        assert_eq!(parse("5m"), Duration::from_secs(300));
        assert_eq!(parse("12h0m0s"), Duration::from_secs(12 * 3600));
        assert_eq!(parse("1h30m"), Duration::from_secs(5400));
        assert_eq!(parse("500ms"), Duration::from_millis(500));
        assert_eq!(parse("1.5s"), Duration::from_millis(1500));
        assert_eq!(parse(".5m"), Duration::from_secs(30));
        assert_eq!(parse("0"), Duration::ZERO);
        assert_eq!(parse("10us"), Duration::from_micros(10));
        assert_eq!(parse("10µs"), Duration::from_micros(10));
        assert_eq!(parse("7ns"), Duration::from_nanos(7));
    }

    #[test]
    fn rejects_bad_forms_with_a_hint() {
        for bad in [
            "",
            "15",
            "s",
            "-1s",
            "1x",
            "1..5s",
            "1.2.3s",
            "99999999999999999999999h",
        ] {
            let e = bad.parse::<GoDuration>().unwrap_err().to_string();
            assert!(e.contains("expected e.g."), "{bad}: {e}");
        }
    }

    #[test]
    fn prints_like_go() {
        let show = |d: Duration| GoDuration(d).to_string();
        assert_eq!(show(Duration::from_secs(15)), "15s");
        assert_eq!(show(Duration::from_secs(300)), "5m0s");
        assert_eq!(show(Duration::from_secs(12 * 3600)), "12h0m0s");
        assert_eq!(show(Duration::from_millis(1500)), "1.5s");
        assert_eq!(show(Duration::from_millis(500)), "500ms");
        assert_eq!(show(Duration::ZERO), "0s");
    }

    #[test]
    fn round_trips() {
        for s in ["15s", "5m0s", "12h0m0s", "1.5s", "500ms", "2h3m4.5s"] {
            assert_eq!(s.parse::<GoDuration>().unwrap().to_string(), s);
        }
    }
}
