//! JSON as deep as kube-apiserver reads it: Go's `encoding/json` scanner accepts 10,000 levels
//! of nesting and refuses the next with `invalid character '{' exceeded max depth`, where
//! serde_json stops at 128. Bodies within 128 levels take serde_json's path unchanged; deeper
//! ones are depth-checked, then built without recursion (their scalars still read by serde_json).

use serde::de::Error as _;
use serde_json::{Map, Value};

/// Go's `maxNestingDepth`.
pub const MAX_DEPTH: usize = 10_000;

/// Stack for a thread that handles or drops a value [`MAX_DEPTH`] deep: decoding, admission,
/// field tracking, encoding and dropping a `Value` all recurse (debug builds' frames included).
/// It is reserved, not committed: a thread uses what its values' depth needs.
pub const STACK_BYTES: usize = 512 << 20;

/// Why a body is no JSON value.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Nested deeper than [`MAX_DEPTH`]; the character that opened the level too many.
    #[error("invalid character '{0}' exceeded max depth")]
    TooDeep(char),
    /// Not JSON.
    #[error("{0}")]
    Syntax(#[from] serde_json::Error),
}

/// The JSON value of `body`, up to [`MAX_DEPTH`] levels deep.
pub fn parse(body: &[u8]) -> Result<Value, JsonError> {
    match serde_json::from_slice(body) {
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
            check_depth(body)?;
            Ok(Deep { b: body, i: 0 }.value()?)
        }
        parsed => Ok(parsed?),
    }
}

/// Refuses the first bracket that opens level `MAX_DEPTH + 1` (strings skipped).
fn check_depth(body: &[u8]) -> Result<(), JsonError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &c in body {
        match (in_string, c) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (false, b'{' | b'[') => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(JsonError::TooDeep(char::from(c)));
                }
            }
            (false, b'}' | b']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// An open container while a deep body is built.
enum Open {
    Array(Vec<Value>),
    /// The object so far and the key whose value comes next.
    Object(Map<String, Value>, String),
}

/// A parser with its own stack instead of the call stack's.
struct Deep<'a> {
    b: &'a [u8],
    i: usize,
}

impl Deep<'_> {
    fn error(&self, what: &str) -> serde_json::Error {
        serde_json::Error::custom(format!("{what} at byte {}", self.i))
    }

    fn skip_ws(&mut self) {
        while self.b.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    /// Consumes `c` after optional whitespace.
    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        let here = self.b.get(self.i) == Some(&c);
        self.i += usize::from(here);
        here
    }

    fn string(&mut self) -> Result<String, serde_json::Error> {
        self.skip_ws();
        if self.b.get(self.i) != Some(&b'"') {
            return Err(self.error("expected a string"));
        }
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i += 1;
            match self.b.get(self.i) {
                None => return Err(self.error("EOF while parsing a string")),
                Some(_) if escaped => escaped = false,
                Some(b'\\') => escaped = true,
                Some(b'"') => break,
                Some(_) => {}
            }
        }
        self.i += 1;
        serde_json::from_slice(&self.b[start..self.i])
    }

    fn key(&mut self) -> Result<String, serde_json::Error> {
        let k = self.string()?;
        match self.eat(b':') {
            true => Ok(k),
            false => Err(self.error("expected `:`")),
        }
    }

    /// A number, `true`, `false` or `null`.
    fn scalar(&mut self) -> Result<Value, serde_json::Error> {
        let start = self.i;
        while self
            .b
            .get(self.i)
            .is_some_and(|c| !matches!(c, b',' | b']' | b'}') && !c.is_ascii_whitespace())
        {
            self.i += 1;
        }
        serde_json::from_slice(&self.b[start..self.i])
    }

    fn value(mut self) -> Result<Value, serde_json::Error> {
        let mut open: Vec<Open> = Vec::new();
        loop {
            self.skip_ws();
            // A value: either a container opens, or a complete value is ready.
            let mut done = match self.b.get(self.i) {
                Some(b'{') => {
                    self.i += 1;
                    if self.eat(b'}') {
                        Value::Object(Map::new())
                    } else {
                        let key = self.key()?;
                        open.push(Open::Object(Map::new(), key));
                        continue;
                    }
                }
                Some(b'[') => {
                    self.i += 1;
                    if self.eat(b']') {
                        Value::Array(Vec::new())
                    } else {
                        open.push(Open::Array(Vec::new()));
                        continue;
                    }
                }
                Some(b'"') => Value::String(self.string()?),
                Some(_) => self.scalar()?,
                None => return Err(self.error("EOF while parsing a value")),
            };
            // Place it, closing every container it completes.
            loop {
                match open.last_mut() {
                    None => {
                        self.skip_ws();
                        return match self.i == self.b.len() {
                            true => Ok(done),
                            false => Err(self.error("trailing characters")),
                        };
                    }
                    Some(Open::Array(items)) => {
                        items.push(done);
                        if self.eat(b',') {
                            break;
                        }
                        if !self.eat(b']') {
                            return Err(self.error("expected `,` or `]`"));
                        }
                    }
                    Some(Open::Object(m, key)) => {
                        m.insert(std::mem::take(key), done);
                        if self.eat(b',') {
                            *key = self.key()?;
                            break;
                        }
                        if !self.eat(b'}') {
                            return Err(self.error("expected `,` or `}`"));
                        }
                    }
                }
                done = match open.pop() {
                    Some(Open::Array(items)) => Value::Array(items),
                    Some(Open::Object(m, _)) => Value::Object(m),
                    None => return Err(self.error("unbalanced")),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `depth` levels around `inner`: objects and lists in turn, with brackets in strings.
    fn nested(depth: usize, inner: &str) -> String {
        let mut s = String::new();
        for i in 0..depth {
            s.push_str(if i % 2 == 0 {
                r#"{"a": "#
            } else {
                r#"[1, "x\"]{", "#
            });
        }
        s.push_str(inner);
        for i in (0..depth).rev() {
            s.push(if i % 2 == 0 { '}' } else { ']' });
        }
        s
    }

    #[test]
    fn deep_bodies_parse_as_serde_json_parses_shallow_ones() {
        let shallow = nested(
            20,
            r#"{"k": true, "n": -1.5e3, "s": "\u00e9", "e": {}, "l": []}"#,
        );
        let want: Value = serde_json::from_str(&shallow).unwrap();
        assert_eq!(
            Deep {
                b: shallow.as_bytes(),
                i: 0
            }
            .value()
            .unwrap(),
            want
        );
        // 10,000 levels: accepted; one more: Go's words.
        let deep = nested(MAX_DEPTH - 1, "{}");
        let v = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || parse(deep.as_bytes()).map(|v| v.is_object()).unwrap())
            .unwrap()
            .join()
            .unwrap();
        assert!(v);
        let err = parse(nested(MAX_DEPTH, "{}").as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), "invalid character '{' exceeded max depth");
        let err = parse(nested(MAX_DEPTH, "[]").as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), "invalid character '[' exceeded max depth");
        for broken in [
            nested(200, "{"),
            nested(200, "{}") + "x",
            nested(200, "[1,]"),
        ] {
            assert!(
                matches!(parse(broken.as_bytes()), Err(JsonError::Syntax(_))),
                "{broken}"
            );
        }
    }
}
