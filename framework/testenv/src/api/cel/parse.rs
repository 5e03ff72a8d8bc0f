//! CEL source to the AST the checker and the evaluator walk: cel-go's size and nesting limits,
//! the parse itself (on a thread with a large stack, since the ANTLR-generated parser recurses
//! deeply), where each node sits in the source, and errors worded and drawn as cel-go draws them
//! (`ERROR: <input>:1:5: undefined field 'x'`, then the line and a caret).

use std::collections::HashMap;

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use kube_cel::cel::parser::Parser;

/// cel-go's default limit on the length of an expression, in code points.
pub const MAX_CODE_POINTS: usize = 100_000;

/// How deep the AST may nest (cel-go's parser refuses deeper trees the same way).
const MAX_AST_DEPTH: usize = 250;

/// How deep brackets may nest before the parser is even asked (its recursion limit, 96 rule
/// levels, is reached a little above this, after a long search).
const MAX_BRACKET_NESTING: usize = 90;

/// The stack the parser runs on.
const PARSER_STACK: usize = 256 << 20;

/// A parsed expression.
#[derive(Debug)]
pub struct Parsed {
    /// The AST (macros expanded).
    pub expr: IdedExpr,
    /// The source text.
    pub source: String,
}

/// One error at a place in the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    /// 1-based line.
    pub line: usize,
    /// 0-based column, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses each source on one thread with a stack large enough for the parser; an `Err` holds
/// the rendered errors.
pub fn parse_all(sources: &[&str]) -> Vec<Result<Parsed, String>> {
    let run = || sources.iter().map(|s| parse_one(s)).collect::<Vec<_>>();
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("cel-parse".into())
            .stack_size(PARSER_STACK)
            .spawn_scoped(scope, run)
        {
            Ok(handle) => handle.join().unwrap_or_else(|_| {
                sources
                    .iter()
                    .map(|_| Err("the CEL parser failed".to_string()))
                    .collect()
            }),
            Err(e) => sources
                .iter()
                .map(|_| Err(format!("could not start the CEL parser: {e}")))
                .collect(),
        }
    })
}

/// Parses one source (see [`parse_all`]).
#[cfg(test)]
pub fn parse(source: &str) -> Result<Parsed, String> {
    parse_all(&[source])
        .pop()
        .unwrap_or_else(|| Err("no parse result".into()))
}

fn parse_one(source: &str) -> Result<Parsed, String> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        ));
    }
    if let Some(at) = too_deeply_nested(source) {
        let issue = issue_at(source, at, "expression recursion limit exceeded: 96".into());
        return Err(render(source, vec![issue]));
    }
    let expr = Parser::new()
        .enable_optional_syntax(true)
        .parse(source)
        .map_err(|errs| {
            let issues = errs
                .errors
                .iter()
                .map(|e| Issue {
                    line: e.pos.0.max(1) as usize,
                    column: (e.pos.1.max(1) - 1) as usize,
                    message: parse_message(&e.msg),
                })
                .collect();
            render(source, issues)
        })?;
    if depth(&expr) > MAX_AST_DEPTH {
        return Err(render(
            source,
            vec![Issue {
                line: 1,
                column: 0,
                message: "max recursion depth exceeded".into(),
            }],
        ));
    }
    Ok(Parsed {
        expr,
        source: source.to_string(),
    })
}

/// The parser reports its recursion limit inside a debug dump; say it as cel-go does.
fn parse_message(msg: &str) -> String {
    if msg.contains("Recursion limit") {
        "expression recursion limit exceeded: 96".into()
    } else {
        msg.to_string()
    }
}

/// The byte offset where bracket nesting first goes past the limit (string literals skipped).
fn too_deeply_nested(source: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in source.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_BRACKET_NESTING {
                    return Some(i);
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The children of a node, in source order as far as the AST keeps it.
pub fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.iter().map(|t| &**t).chain(c.args.iter()).collect(),
        Expr::Select(s) => vec![&*s.operand],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        _ => Vec::new(),
    }
}

/// The depth of an AST, without recursion.
fn depth(root: &IdedExpr) -> usize {
    let mut max = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, d)) = stack.pop() {
        max = max.max(d);
        if d > MAX_AST_DEPTH {
            break;
        }
        stack.extend(children(e).into_iter().map(|c| (c, d + 1)));
    }
    max
}

/// Where each node of `parsed` starts in its source (byte offsets by node id). The parser keeps
/// them only when it fails, so the source is parsed again with a token that cannot follow it:
/// the parser reports that token after building the same tree, with the same ids.
pub fn offsets(parsed: &Parsed) -> HashMap<u64, usize> {
    let source = format!("{}\n)", parsed.source);
    let Some(info) = parse_all_raw(&source) else {
        return HashMap::new();
    };
    let mut out = HashMap::new();
    let mut stack = vec![&parsed.expr];
    while let Some(e) = stack.pop() {
        if let Some((start, _)) = info.offset_for(e.id) {
            out.insert(e.id, start as usize);
        }
        stack.extend(children(e));
    }
    out
}

fn parse_all_raw(source: &str) -> Option<std::sync::Arc<kube_cel::cel::common::ast::SourceInfo>> {
    let source = source.to_string();
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(PARSER_STACK)
            .spawn_scoped(scope, move || {
                let errs = Parser::new()
                    .enable_optional_syntax(true)
                    .parse(&source)
                    .err()?;
                errs.errors.into_iter().find_map(|e| e.source_info)
            })
            .ok()?
            .join()
            .ok()?
    })
}

/// The issue at a byte offset of the source.
pub fn issue_at(source: &str, offset: usize, message: String) -> Issue {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    Issue {
        line,
        column: before[line_start..].chars().count(),
        message,
    }
}

/// Errors as cel-go prints a compilation's issues: sorted by place, one `ERROR:` block each.
pub fn render(source: &str, mut issues: Vec<Issue>) -> String {
    issues.sort_by_key(|i| (i.line, i.column));
    issues
        .iter()
        .map(|i| {
            let mut out = format!("ERROR: <input>:{}:{}: {}", i.line, i.column + 1, i.message);
            if let Some(line) = source.split('\n').nth(i.line.saturating_sub(1)) {
                let line = line.replace('\t', " ");
                out.push_str("\n | ");
                out.push_str(&line);
                out.push_str("\n | ");
                let mut chars = line.chars();
                for _ in 0..i.column {
                    match chars.next() {
                        Some(c) if c.len_utf8() > 1 => out.push('\u{ff0e}'),
                        Some(_) => out.push('.'),
                        None => break,
                    }
                }
                match chars.next() {
                    Some(c) if c.len_utf8() > 1 => out.push('\u{ff3e}'),
                    _ => out.push('^'),
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_are_drawn_as_cel_go_draws_them() {
        let err = parse("self.a +").unwrap_err();
        assert_eq!(
            err,
            "ERROR: <input>:1:9: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | self.a +\n | ........^"
        );
    }

    #[test]
    fn nodes_know_where_they_are() {
        let p = parse("self.nosuchfield > 1").unwrap();
        let at = offsets(&p);
        let Expr::Call(c) = &p.expr.expr else {
            panic!()
        };
        assert_eq!(at[&c.args[0].id], 4);
    }

    #[test]
    fn hostile_sources_are_refused_before_the_parser_sees_them() {
        let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
        assert!(parse(&deep).unwrap_err().contains("recursion limit"));
        let long = "1".repeat(MAX_CODE_POINTS + 1);
        assert!(
            parse(&long)
                .unwrap_err()
                .contains("code point size exceeds limit")
        );
        let chain = vec!["1"; 300].join(" + ");
        assert!(
            parse(&chain)
                .unwrap_err()
                .contains("max recursion depth exceeded")
        );
    }
}
