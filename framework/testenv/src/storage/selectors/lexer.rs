//! The tokens of a label selector, split as apimachinery's `labels` lexer splits them: runs of
//! the special symbols `=`, `!`, `(`, `)`, `,`, `>`, `<` into the longest operator they start
//! with, anything else up to whitespace or a symbol into an identifier (`in`/`notin` keywords).

/// One token and its literal text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Ident,
    In,
    NotIn,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
    End,
}

fn special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn symbol(s: &str) -> Option<Tok> {
    Some(match s {
        "!" => Tok::Not,
        "=" => Tok::Eq,
        "==" => Tok::DoubleEq,
        "!=" => Tok::NotEq,
        ">" => Tok::Gt,
        "<" => Tok::Lt,
        "(" => Tok::Open,
        ")" => Tok::Close,
        "," => Tok::Comma,
        _ => return None,
    })
}

/// Every token of `s`, ending with `End`.
pub(super) fn lex(s: &str) -> Vec<(Tok, String)> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i == chars.len() {
            out.push((Tok::End, String::new()));
            return out;
        }
        if special(chars[i]) {
            // Every symbol alone is a token; grow while the run still names one.
            let mut lit = chars[i].to_string();
            i += 1;
            while i < chars.len() && special(chars[i]) {
                let longer = format!("{lit}{}", chars[i]);
                if symbol(&longer).is_none() {
                    break;
                }
                lit = longer;
                i += 1;
            }
            let tok = symbol(&lit).unwrap_or(Tok::Ident);
            out.push((tok, lit));
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() && !special(chars[i]) {
                i += 1;
            }
            let lit: String = chars[start..i].iter().collect();
            let tok = match lit.as_str() {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Ident,
            };
            out.push((tok, lit));
        }
    }
}
