use super::*;
use crate::api::cel::parse::parse;

fn run(src: &str) -> Result<Cel, Error> {
    run_with(src, u64::MAX).value
}

fn run_with(src: &str, limit: u64) -> Outcome {
    let p = parse(src).unwrap();
    let vars = [
        ("x", Cel::Int(3)),
        ("s", Cel::String(Arc::new("héllo".into()))),
    ];
    evaluate(&p.expr, &vars, limit)
}

fn yes(src: &str) {
    assert_eq!(run(src), Ok(Cel::Bool(true)), "{src}");
}

#[test]
fn the_language() {
    yes("x + 1 == 4");
    yes("size(s) == 5 && s.size() == 5");
    yes("type(x) == int && type(s) == string && type(type(x)) == type");
    yes("dyn(1) == 1.0");
    yes("[1, 2, 3].all(v, v > 0) && [1, 2].exists(v, v == 2) && [1, 2].exists_one(v, v == 2)");
    yes("[1, 2, 3].map(v, v * 2) == [2, 4, 6] && [1, 2, 3].filter(v, v > 1) == [2, 3]");
    yes("{'a': 1}.all(k, k == 'a') && 'a' in {'a': 1} && 2 in [1, 2]");
    yes("cel.bind(y, x * 2, y + y) == 12");
    yes("optional.of(1).hasValue() && !optional.none().hasValue() && {'a': 1}.?a.orValue(0) == 1");
    yes("{'a': 1}.?b.orValue(7) == 7 && [1][?5].orValue(9) == 9");
    yes("1 < 2.5 && 'a' < 'b' && b'a' + b'b' == b'ab'");
    yes("true || 1 / 0 == 1");
    yes("1 / 0 == 1 || true");
    yes("!(false && 1 / 0 == 1) && [1, 2, 3].all(v, v == 1 || (v == 2 && 1 / 0 == 1)) == false");
}

#[test]
fn the_kubernetes_libraries() {
    yes("quantity('1Gi').isGreaterThan(quantity('500Mi')) && isQuantity('1k')");
    yes("isURL('https://example.com/a') && url('https://example.com:8443/p').getPort() == '8443'");
    yes(
        "isIP('10.0.0.1') && ip('10.0.0.1').family() == 4 && cidr('10.0.0.0/8').containsIP('10.1.2.3')",
    );
    yes("isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33')");
    yes("isSemver('1.2.3') && semver('1.2.3').isLessThan(semver('1.10.0'))");
    yes("'%s-%d'.format(['a', 1]) == 'a-1'");
    yes("!format.dns1123Label().validate('a_b') .hasValue() == false");
    yes(
        "sets.contains([1, 2], [1]) && sets.intersects([1], [1, 3]) && sets.equivalent([1, 2], [2, 1])",
    );
    yes(
        "[3, 1, 2].isSorted() == false && [1, 2].sum() == 3 && [4, 1].min() == 1 && [1, 2].indexOf(2) == 1",
    );
    yes("'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b' && ' a '.trim() == 'a'");
    yes("'abc'.matches('^a') && matches('abc', 'c$') && 'abcabc'.find('b+c') == 'bc'");
    yes(
        "'ABC'.lowerAscii() == 'abc' && 'abc'.replace('b', 'x') == 'axc' && 'abc'.substring(1) == 'bc'",
    );
    yes(
        "timestamp('2024-01-02T00:00:00Z').getFullYear() == 2024 && duration('1h') > duration('30m')",
    );
    yes("math.greatest(1, 5, 3) == 5 && base64.encode(b'a') == 'YQ=='");
}

#[test]
fn errors_are_cel_go_s() {
    let err = |src: &str| match run(src) {
        Err(Error::Runtime(m)) => m,
        other => panic!("{src}: {other:?}"),
    };
    assert_eq!(err("{'a': 1}.b == 1"), "no such key: b");
    assert_eq!(err("{'a': 1}['b'] == 1"), "no such key: b");
    assert_eq!(err("100 / 0 > 1"), "division by zero");
    assert_eq!(err("5 % 0 > 1"), "modulus by zero");
    assert_eq!(err("9223372036854775807 + 1 > 0"), "integer overflow");
    assert_eq!(
        err("[1][3] == 1"),
        "index '3' out of range in list size '1'"
    );
    assert_eq!(
        err("'a'.matches('(')"),
        "error parsing regexp: unclosed group"
    );
}

#[test]
fn cost_is_counted_and_limited() {
    let small = run_with("x + 1 == 4", 1_000);
    assert!(small.cost > 0 && small.cost < 10, "{}", small.cost);
    let big = run_with(
        "[1, 2, 3, 4, 5, 6, 7, 8].all(a, [1, 2, 3, 4, 5, 6, 7, 8].all(b, a + b > 0))",
        50,
    );
    assert_eq!(big.value, Err(Error::CostLimit));
    assert!(big.cost > 50);
    let strings = run_with(
        "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'.startsWith('a')",
        1_000,
    );
    assert!(strings.cost >= 8, "{}", strings.cost);
}

#[test]
fn map_over_a_long_list_is_linear() {
    let p = parse("self.map(v, v + 1).size() == 200000").unwrap();
    let list = Cel::List(Arc::new((0..200_000).map(Cel::Int).collect()));
    let t = std::time::Instant::now();
    let out = evaluate(&p.expr, &[("self", list)], u64::MAX);
    assert_eq!(out.value, Ok(Cel::Bool(true)));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        t.elapsed()
    );
}
