//! The string `format`s apiextensions-apiserver checks on custom resources (its list of supported
//! formats, checked as kube-openapi's `strfmt` registry checks them); any other format is ignored,
//! as upstream ignores it.

use std::net::IpAddr;
use std::sync::LazyLock;

use base64::Engine;
use regex::Regex;

/// Whether the server keeps this `format` (it strips the others from the schema it validates
/// with): the string formats and the numeric ones, which only name the type a number must have.
pub(super) fn is_supported(format: &str) -> bool {
    matches!(format, "int32" | "int64" | "float" | "double") || check(format, "").is_some()
}

/// Whether `s` is a valid `format`; `None` when the server does not check that format.
pub(super) fn check(format: &str, s: &str) -> Option<bool> {
    let ok = match format {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => {
            s.len() <= 255 && s.split('.').all(|l| l.len() <= 63) && matches(&HOSTNAME, s)
        }
        // strfmt takes any IP with a dot as ipv4 (leading zeros tolerated), any with a colon as
        // ipv6.
        "ipv4" => s.contains('.') && parse_ip_sloppy(s).is_some(),
        "ipv6" => s.contains(':') && s.parse::<IpAddr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => matches(&MAC, s),
        "uuid" => uuid_digits(s).is_some(),
        "uuid3" => uuid_digits(s).is_some_and(|d| d[12] == b'3'),
        "uuid4" => uuid_digits(s).is_some_and(|d| d[12] == b'4' && uuid_variant_ok(&d)),
        "uuid5" => uuid_digits(s).is_some_and(|d| d[12] == b'5' && uuid_variant_ok(&d)),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "ssn" => matches(&SSN, s),
        "hexcolor" => matches(&HEXCOLOR, s),
        "rgbcolor" => matches(&RGBCOLOR, s),
        // At least one group of four, as govalidator's base64 check asks.
        "byte" => !s.is_empty() && base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "password" => true,
        // Go's layout `2006-01-02`: two-digit month and day, no more.
        "date" => s.len() == 10 && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "duration" => matches(&GO_DURATION, s) || is_counted_duration(s),
        "datetime" | "date-time" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        _ => return None,
    };
    Some(ok)
}

/// A single label (one hyphen at most, right after its first character), or dotted labels ending in a top-level domain
/// of 2 to 63 letters; letters and symbols of any script count, as in strfmt.
static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let c = r"[a-zA-Z0-9\p{S}\p{L}]";
    let label = format!(r"{c}([a-zA-Z0-9\-\p{{S}}\p{{L}}]{{0,61}}{c})?");
    Regex::new(&format!(
        r"^({c}(-?{c}{{0,62}})?|({label}\.)+[a-zA-Z\p{{L}}]{{2,63}})$"
    ))
    .ok()
});
static MAC: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^([0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){7}|[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){19}|[0-9A-Fa-f]{4}(\.[0-9A-Fa-f]{4}){2}|[0-9A-Fa-f]{4}(\.[0-9A-Fa-f]{4}){3}|[0-9A-Fa-f]{4}(\.[0-9A-Fa-f]{4}){9})$",
    )
    .ok()
});
static SSN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$").ok());
static HEXCOLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").ok());
static RGBCOLOR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let n = r"\s*(0|[1-9]\d?|1\d\d|2[0-4]\d|25[0-5])\s*";
    Regex::new(&format!(r"^rgb\({n},{n},{n}\)$")).ok()
});
/// Go's `time.ParseDuration` syntax.
static GO_DURATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let part = r"(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)";
    Regex::new(&format!(r"^([-+]?0|[-+]?({part})+)$")).ok()
});
/// A count and a unit word anywhere in the string (`3 days`), as strfmt's fallback finds them.
static COUNTED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(-\s?)?(\d+)\s*([A-Za-zµ]+)").ok());

/// strfmt's fallback: valid when some count has a unit it knows (a short name, or a word
/// starting with the unit's long name: `minutes`, `hours`), and every count is an int64.
fn is_counted_duration(s: &str) -> bool {
    let Some(re) = COUNTED.as_ref() else {
        return false;
    };
    let mut known = false;
    for m in re.captures_iter(s) {
        if m[2].parse::<i64>().is_err() {
            return false;
        }
        let unit = m[3].to_lowercase();
        let exact = [
            "ns", "nano", "us", "µs", "micro", "ms", "milli", "s", "sec", "m", "min", "h", "hr",
            "hour", "d", "day", "w", "wk", "week",
        ];
        let long = [
            "nano", "micro", "milli", "sec", "min", "hour", "day", "week",
        ];
        known |= exact.contains(&unit.as_str()) || long.iter().any(|l| unit.starts_with(l));
    }
    known
}

fn matches(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        && !domain.starts_with('.')
        && !domain.ends_with('.')
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let max = match parse_ip_sloppy(ip) {
        Some(IpAddr::V4(_)) => 32,
        Some(IpAddr::V6(_)) => 128,
        None => return false,
    };
    !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// The 32 hex digits of a UUID (hyphens between its groups optional, any case), lowercased.
fn uuid_digits(s: &str) -> Option<Vec<u8>> {
    let mut digits = Vec::with_capacity(32);
    let mut rest = s;
    for (i, n) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix('-').unwrap_or(rest);
        }
        let group = rest.get(..n)?;
        if !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        digits.extend(group.bytes().map(|b| b.to_ascii_lowercase()));
        rest = &rest[n..];
    }
    rest.is_empty().then_some(digits)
}

fn uuid_variant_ok(digits: &[u8]) -> bool {
    matches!(digits[16], b'8' | b'9' | b'a' | b'b')
}

/// An IPv4 address whose parts may have leading zeros (k8s.io/utils' sloppy parsing), or any
/// IPv6 one.
fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let parts: Vec<&str> = s.split('.').collect();
    let ok = parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        });
    if !ok {
        return None;
    }
    let octets: Vec<u8> = parts.iter().filter_map(|p| p.parse().ok()).collect();
    let v4: [u8; 4] = octets.try_into().ok()?;
    Some(IpAddr::from(v4))
}

/// An absolute URI or an absolute path, without spaces or control characters (Go's
/// `url.ParseRequestURI`, as govalidator's request-URI check uses it).
fn is_request_uri(s: &str) -> bool {
    let scheme = s.split_once(':').is_some_and(|(scheme, _)| {
        let mut chars = scheme.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    (scheme || s.starts_with('/')) && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn isbn_chars(s: &str) -> Vec<char> {
    s.chars().filter(|c| !matches!(c, '-' | ' ')).collect()
}

fn is_isbn10(s: &str) -> bool {
    let c = isbn_chars(s);
    if c.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, ch) in c.iter().enumerate() {
        let d = match ch {
            'X' if i == 9 => 10,
            _ => match ch.to_digit(10) {
                Some(d) => d,
                None => return false,
            },
        };
        sum += (10 - i as u32) * d;
    }
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let c = isbn_chars(s);
    let digits: Option<Vec<u32>> = c.iter().map(|ch| ch.to_digit(10)).collect();
    let Some(d) = digits.filter(|d| d.len() == 13) else {
        return false;
    };
    let sum: u32 = d
        .iter()
        .enumerate()
        .map(|(i, x)| if i % 2 == 0 { *x } else { 3 * x })
        .sum();
    sum.is_multiple_of(10)
}

/// 13 to 19 digits (spaces and hyphens aside) passing the Luhn check.
fn is_credit_card(s: &str) -> bool {
    let c: Vec<char> = s.chars().filter(|c| !matches!(c, '-' | ' ')).collect();
    let digits: Option<Vec<u32>> = c.iter().map(|ch| ch.to_digit(10)).collect();
    let Some(d) = digits.filter(|d| (13..=19).contains(&d.len())) else {
        return false;
    };
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, x)| {
            if i % 2 == 1 {
                let y = 2 * x;
                if y > 9 { y - 9 } else { y }
            } else {
                *x
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn each_supported_format_takes_a_good_value_and_refuses_a_bad_one() {
        let table = [
            ("bsonobjectid", "507f1f77bcf86cd799439011", "507f"),
            ("uri", "https://example.com/x", "example.com/x"),
            ("email", "a@example.com", "nope"),
            ("hostname", "gateway.example.com", "a.example.c0m"),
            ("ipv4", "010.0.0.1", "abc"),
            ("ipv6", "fd00::1", "10.0.0.1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "00:1a:2b:3c:4d:5e", "00:1a:2b"),
            ("uuid", "123E4567E89B12D3A456426614174000", "123e4567"),
            (
                "uuid3",
                "a3bb189e-8bf9-3888-9912-ace4e6543002",
                "123e4567-e89b-12d3-a456-426614174000",
            ),
            (
                "uuid4",
                "9b2d4c1e-3f5a-4b6c-8d7e-1f2a3b4c5d6e",
                "9b2d4c1e-3f5a-4b6c-1d7e-1f2a3b4c5d6e",
            ),
            (
                "uuid5",
                "886313e1-3b8a-5372-9b90-0c9aee199e5d",
                "886313e1-3b8a-4372-9b90-0c9aee199e5d",
            ),
            ("isbn", "978-3-16-148410-0", "978-3-16-148410-1"),
            ("isbn10", "0-306-40615-2", "0-306-40615-3"),
            ("isbn13", "9780306406157", "9780306406158"),
            ("creditcard", "4111 1111 1111 1111", "4111 1111 1111 1112"),
            ("ssn", "123-45-6789", "123-456-789"),
            ("hexcolor", "#1a2B3c", "#12345"),
            ("rgbcolor", "rgb(0, 128, 255)", "rgb(0,128,256)"),
            ("byte", "aGVsbG8=", ""),
            ("date", "2024-02-29", "2023-02-29"),
            ("duration", "1h30m", "ten minutes"),
            ("date-time", "2024-01-02T03:04:05Z", "2024-01-02"),
            ("datetime", "2024-01-02T03:04:05+01:00", "yesterday"),
        ];
        for (format, good, bad) in table {
            assert_eq!(check(format, good), Some(true), "{format} {good}");
            assert_eq!(check(format, bad), Some(false), "{format} {bad}");
        }
        assert_eq!(check("password", ""), Some(true));
        assert_eq!(check("uri", "/just/a/path"), Some(true));
        // strfmt's single label takes one hyphen, only right after its first character.
        assert_eq!(check("hostname", "a-bc"), Some(true));
        assert_eq!(check("hostname", "ab-c"), Some(false));
        assert_eq!(check("hostname", "ab-c.example.com"), Some(true));
        assert_eq!(check("byte", "not base64!"), Some(false));
        assert_eq!(check("date", "2024-1-2"), Some(false));
        assert_eq!(check("duration", "3 days"), Some(true));
        assert_eq!(check("duration", "every 10 Minutes"), Some(true));
        assert_eq!(check("duration", "10 parsecs"), Some(false));
        assert_eq!(check("int-or-string-ish", "x"), None);
        assert!(super::is_supported("int32") && super::is_supported("ipv4"));
        assert!(!super::is_supported("int-or-string"));
    }
}
