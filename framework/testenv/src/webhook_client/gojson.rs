//! Go's `encoding/json` error texts for a webhook answer that is not the JSON it should be:
//! the syntax errors of its scanner (`invalid character 'n' looking for beginning of object key
//! string`, `unexpected end of JSON input`) and the type errors of its decoder (`json: cannot
//! unmarshal string into Go struct field …`), which kube-apiserver passes on word for word.

use serde_json::Value;

/// The syntax error Go's scanner reports first in `data`, if any.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut s = Scanner { data, at: 0 };
    let result = s.value("looking for beginning of value").and_then(|()| {
        s.skip_ws();
        match s.peek() {
            None => Ok(()),
            Some(c) => Err(invalid(c, "after top-level value")),
        }
    });
    result.err()
}

/// Go's `UnmarshalTypeError` text for a field (`path` as Go joins it, e.g. `response.allowed`)
/// of the struct `owner` that holds `got` where Go wants `want`.
pub fn type_error(got: &Value, owner: &str, path: &str, want: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {owner}.{path} of type {want}",
        kind(got)
    )
}

/// How Go's decoder names a JSON value's type.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

struct Scanner<'a> {
    data: &'a [u8],
    at: usize,
}

const EOF: &str = "unexpected end of JSON input";

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// Go's `quoteChar`: the byte as a one-character Go string literal in single quotes.
fn quote_char(c: u8) -> String {
    let inner = match c {
        b'\'' => "\\'".to_string(),
        b'"' => "\"".to_string(),
        b'\\' => "\\\\".to_string(),
        0x07 => "\\a".into(),
        0x08 => "\\b".into(),
        0x0c => "\\f".into(),
        b'\n' => "\\n".into(),
        b'\r' => "\\r".into(),
        b'\t' => "\\t".into(),
        0x0b => "\\v".into(),
        0..=0x1f | 0x7f => format!("\\x{c:02x}"),
        0x80..=0xa0 | 0xad => format!("\\u{c:04x}"),
        _ => char::from(c).to_string(),
    };
    format!("'{inner}'")
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.at).copied()
    }

    fn next(&mut self) -> Result<u8, String> {
        let c = self.peek().ok_or(EOF)?;
        self.at += 1;
        Ok(c)
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.at += 1;
        }
    }

    /// One value, whitespace first; `context` names where a bad first byte was found.
    fn value(&mut self, context: &str) -> Result<(), String> {
        self.skip_ws();
        match self.next()? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' => match self.next()? {
                b'0'..=b'9' => self.number_rest(),
                c => Err(invalid(c, "in numeric literal")),
            },
            b'0'..=b'9' => {
                self.at -= 1;
                self.number_rest()
            }
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            c => Err(invalid(c, context)),
        }
    }

    fn object(&mut self) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            match self.next()? {
                b'"' => self.string()?,
                c => return Err(invalid(c, "looking for beginning of object key string")),
            }
            self.skip_ws();
            match self.next()? {
                b':' => {}
                c => return Err(invalid(c, "after object key")),
            }
            self.value("looking for beginning of value")?;
            self.skip_ws();
            match self.next()? {
                b',' => continue,
                b'}' => return Ok(()),
                c => return Err(invalid(c, "after object key:value pair")),
            }
        }
    }

    fn array(&mut self) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.value("looking for beginning of value")?;
            self.skip_ws();
            match self.next()? {
                b',' => continue,
                b']' => return Ok(()),
                c => return Err(invalid(c, "after array element")),
            }
        }
    }

    fn string(&mut self) -> Result<(), String> {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let c = self.next()?;
                            if !c.is_ascii_hexdigit() {
                                return Err(invalid(c, "in \\u hexadecimal character escape"));
                            }
                        }
                    }
                    c => return Err(invalid(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(invalid(c, "in string literal")),
                _ => {}
            }
        }
    }

    /// The rest of a number whose first digit is at `self.at`.
    fn number_rest(&mut self) -> Result<(), String> {
        if self.next()? != b'0' {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            match self.next()? {
                b'0'..=b'9' => self.digits(),
                c => return Err(invalid(c, "after decimal point in numeric literal")),
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            let mut c = self.next()?;
            if matches!(c, b'+' | b'-') {
                c = self.next()?;
            }
            if !c.is_ascii_digit() {
                return Err(invalid(c, "in exponent of numeric literal"));
            }
            self.digits();
        }
        Ok(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    /// The rest of `word` after its first letter.
    fn literal(&mut self, word: &str) -> Result<(), String> {
        for expected in word.bytes().skip(1) {
            let c = self.next()?;
            if c != expected {
                let context = format!("in literal {word} (expecting {})", quote_char(expected));
                return Err(invalid(c, &context));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        syntax_error(s.as_bytes()).unwrap_or_else(|| "<valid>".into())
    }

    #[test]
    fn valid_json_has_no_syntax_error() {
        for ok in [
            "{}",
            " [1, -2.5e+3, true, false, null, \"a\\u00e9\\n\"] ",
            "{\"a\": {\"b\": []}}",
            "0",
        ] {
            assert_eq!(syntax_error(ok.as_bytes()), None, "{ok}");
        }
    }

    #[test]
    fn errors_are_worded_as_gos_scanner_words_them() {
        // wh-validating-bad-json.txt
        assert_eq!(
            err("{not json"),
            "invalid character 'n' looking for beginning of object key string"
        );
        assert_eq!(err(""), "unexpected end of JSON input");
        assert_eq!(err("{\"a\": 1"), "unexpected end of JSON input");
        assert_eq!(err("{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(
            err("{\"a\": 1 \"b\"}"),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(err("[1 2]"), "invalid character '2' after array element");
        assert_eq!(err("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(
            err("<html>"),
            "invalid character '<' looking for beginning of value"
        );
        assert_eq!(err("tru"), "unexpected end of JSON input");
        assert_eq!(
            err("trux"),
            "invalid character 'x' in literal true (expecting 'e')"
        );
        assert_eq!(err("-x"), "invalid character 'x' in numeric literal");
        assert_eq!(
            err("1.x"),
            "invalid character 'x' after decimal point in numeric literal"
        );
        assert_eq!(
            err("1ex"),
            "invalid character 'x' in exponent of numeric literal"
        );
        assert_eq!(
            err("\"\\q\""),
            "invalid character 'q' in string escape code"
        );
        assert_eq!(err("\"a\nb\""), "invalid character '\\n' in string literal");
        assert_eq!(err("01"), "invalid character '1' after top-level value");
    }

    #[test]
    fn type_errors_name_the_go_field() {
        assert_eq!(
            type_error(
                &Value::from("yes"),
                "AdmissionResponse",
                "response.allowed",
                "bool"
            ),
            "json: cannot unmarshal string into Go struct field AdmissionResponse.response.allowed of type bool"
        );
    }
}
