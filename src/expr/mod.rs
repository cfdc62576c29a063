//! The expression-language front end: numpy / numexpr-like text to a checked syntax tree,
//! plus the `name=dtype[dims]` variable declarations of the CLI.
//!
//! This module owns the text syntax only. It depends on nothing but `std`; turning an
//! [`Expr`] into a graph (types, broadcasting, ops) is the job of the graph builder.
//!
//! Pipeline: [`lexer`](tokenize) → parser ([`parse_syntax`]) → checking step ([`check`]:
//! function names, arities, keyword arguments, where strings / tuples / `None` may appear).
//! [`parse`] runs all three. Errors are [`ParseError`]s carrying a byte offset;
//! [`ParseError::render`] shows the source line with a caret.
//!
//! # Grammar (EBNF)
//!
//! ```text
//! expr     = binary ;                         (* precedence climbing, table below *)
//! binary   = unary { infix unary } ;          (* infix: | ^ & < <= > >= == != << >> + - * / // % @ *)
//! unary    = ( "-" | "+" | "~" ) unary | power ;
//! power    = postfix [ "**" unary ] ;         (* right-assoc; `2**-x` is allowed *)
//! postfix  = atom { "[" index "]" | "." "T" } ;
//! index    = item { "," item } [ "," ] ;
//! item     = "..." | "None" | [ expr ] ":" [ expr ] [ ":" [ expr ] ] | expr ;
//! atom     = number | string | "True" | "False" | "None"
//!          | name [ "(" [ arg { "," arg } [ "," ] ] ")" ]
//!          | "(" [ expr { "," expr } [ "," ] ] ")"    (* a tuple if empty or with a comma *)
//!          | "[" [ expr { "," expr } [ "," ] ] "]" ;  (* a list: concatenate([a, b]) *)
//! arg      = expr | name "=" expr ;           (* keywords after positional arguments *)
//! number   = digits [ "." digits ] [ exponent ] | "." digits [ exponent ] ;
//! exponent = ( "e" | "E" ) [ "+" | "-" ] digits ;
//! string   = '"' { char } '"' | "'" { char } "'" ;   (* one line, no escapes *)
//! name     = ( letter | "_" ) { letter | digit | "_" } ;
//! ```
//!
//! # Precedence, loosest first
//!
//! | level | operators                | associativity                              |
//! |-------|--------------------------|--------------------------------------------|
//! | 1     | `\|`                     | left                                       |
//! | 2     | `^`                      | left                                       |
//! | 3     | `&`                      | left                                       |
//! | 4     | `< <= > >= == !=`        | none: `a < b < c` is an error              |
//! | 5     | `<< >>`                  | left                                       |
//! | 6     | `+ -`                    | left                                       |
//! | 7     | `* / // % @`             | left                                       |
//! | 8     | prefix `- + ~`           | —                                          |
//! | 9     | `**`                     | right; binds tighter than a prefix on its left (`-x**2` is `-(x**2)`) |
//! | 10    | `x[...]`, `x.T`, calls   | left                                       |
//!
//! Unlike Python (where `&` and `|` bind tighter than comparisons), `a < b & c > d` means
//! `(a < b) & (c > d)`: with `&` / `|` used as logical operators on masks this is what one
//! means. Chained comparisons are rejected rather than given Python's `and` meaning.
//! `^` is xor (logical on bools, bitwise on integers), as in numexpr and numpy; powers
//! are written `**`.
//!
//! # Limits
//!
//! Nesting of brackets, prefix operators and `**` exponents is limited to
//! [`MAX_DEPTH`] levels ("expression nested too deeply"), so no input overflows the stack.
//! Flat chains of left-associative operators are not limited: `x+x+...+x` with 100,000
//! terms parses, and the tree can be walked and dropped without recursion
//! ([`Expr::fold`], [`Expr::preorder`]); downstream passes should not recurse on it either.

mod ast;
mod decl;
mod lexer;
mod parser;

pub use ast::{
    free_variables, BinaryOp, Expr, ExprKind, Func, IndexItem, Keyword, Number, ParseError,
    Signature, Span, UnaryOp,
};
pub use decl::{parse_decl, Decl, DTYPES};
pub use lexer::{tokenize, Token, TokenKind};
pub use parser::{
    axis_args, cast_dtype, check, int_list, parse_syntax, reduce_args, tensordot_args, AxisArgs,
    ReduceArgs, TensordotAxes, MAX_DEPTH,
};

/// Parses and checks an expression: the syntax ([`parse_syntax`]) then the function names,
/// arities and keyword arguments ([`check`]).
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    let expr = parse_syntax(src)?;
    check(&expr)?;
    Ok(expr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The fully parenthesised form of a valid expression.
    fn show(src: &str) -> String {
        match parse(src) {
            Ok(e) => e.to_string(),
            Err(e) => panic!("{}", e.render(src)),
        }
    }

    /// The error of an invalid expression, as (position, message).
    fn err(src: &str) -> (usize, String) {
        match parse(src) {
            Ok(e) => panic!("{src:?} parsed to {e}"),
            Err(e) => (e.pos, e.message),
        }
    }

    fn ok(src: &str) -> Expr {
        match parse(src) {
            Ok(e) => e,
            Err(e) => panic!("{}", e.render(src)),
        }
    }

    #[test]
    fn power_binds_tighter_than_prefix_minus() {
        assert_eq!(show("-x**2"), "(-(x ** 2))");
        assert_eq!(show("2**-x"), "(2 ** (-x))");
        assert_eq!(show("x**-y**z"), "(x ** (-(y ** z)))");
        assert_eq!(show("-2**2"), "(-(2 ** 2))");
        assert_eq!(show("(-x)**2"), "((-x) ** 2)");
        assert_eq!(show("~-+x"), "(~(-(+x)))");
        assert_eq!(show("--x"), "(-(-x))");
    }

    #[test]
    fn power_is_right_associative() {
        assert_eq!(show("x**y**z"), "(x ** (y ** z))");
        assert_eq!(show("(x**y)**z"), "((x ** y) ** z)");
    }

    #[test]
    fn arithmetic_precedence_and_left_associativity() {
        assert_eq!(show("a+b*c"), "(a + (b * c))");
        assert_eq!(show("a*b@c"), "((a * b) @ c)");
        assert_eq!(show("a@b*c"), "((a @ b) * c)");
        assert_eq!(show("a - b - c"), "((a - b) - c)");
        assert_eq!(show("a / b // c % d"), "(((a / b) // c) % d)");
        assert_eq!(show("-a + b"), "((-a) + b)");
        assert_eq!(show("a * -b"), "(a * (-b))");
        assert_eq!(show("a + b < c * d"), "((a + b) < (c * d))");
    }

    #[test]
    fn logical_operators_bind_looser_than_comparisons() {
        assert_eq!(show("a < b & c"), "((a < b) & c)");
        assert_eq!(show("a < b & c >= d"), "((a < b) & (c >= d))");
        assert_eq!(show("a | b & c"), "(a | (b & c))");
        assert_eq!(show("a & b | c"), "((a & b) | c)");
        assert_eq!(show("~a | b == c"), "((~a) | (b == c))");
        assert_eq!(show("(a < b) < c"), "((a < b) < c)");
        assert_eq!(show("a != (b <= c)"), "(a != (b <= c))");
        assert_eq!(show("x > 0"), "(x > 0)");
    }

    #[test]
    fn chained_comparisons_are_rejected() {
        let (pos, msg) = err("a < b < c");
        assert_eq!(pos, 6);
        assert!(msg.starts_with("chained comparisons like 'a < b < c' are not supported"));
        assert_eq!(err("a == b + 1 != c").0, 11);
    }

    #[test]
    fn literal_forms() {
        let number = |src: &str| match ok(src).kind {
            ExprKind::Number(n) => n,
            ref other => panic!("{other:?}"),
        };
        assert_eq!(number("2"), Number::Int(2));
        assert_eq!(number("2.0"), Number::Float(2.0));
        assert_eq!(number("0.5"), Number::Float(0.5));
        assert_eq!(number("1e-3"), Number::Float(1e-3));
        assert_eq!(number(".5"), Number::Float(0.5));
        assert_eq!(number("3."), Number::Float(3.0));
        assert_eq!(number("(7)"), Number::Int(7));
        assert_eq!(Number::Int(2).as_f64(), 2.0);
        assert_eq!(ok("True").kind, ExprKind::Bool(true));
        assert_eq!(ok("False").kind, ExprKind::Bool(false));
        assert_eq!(show("2 * 1.5 + 1e-07"), "((2 * 1.5) + 1e-7)");
        // The syntax alone accepts None, strings and tuples; the checking step places them.
        let syntax = |src: &str| parse_syntax(src).map(|e| e.kind.clone());
        assert_eq!(syntax("None"), Ok(ExprKind::None));
        assert_eq!(syntax("'f32'"), Ok(ExprKind::Str("f32".into())));
        assert_eq!(syntax("()"), Ok(ExprKind::Tuple(vec![])));
    }

    #[test]
    fn spans_cover_the_source_text() {
        let e = ok("a + b*c");
        assert_eq!(e.span, Span::new(0, 7));
        let ExprKind::Binary { lhs, rhs, .. } = &e.kind else {
            panic!("{e:?}")
        };
        assert_eq!((lhs.span, rhs.span), (Span::new(0, 1), Span::new(4, 7)));
        // Parentheses belong to the node they enclose.
        let e = ok(" (a+b) * c");
        assert_eq!(e.span, Span::new(1, 10));
        assert_eq!(e.children()[0].span, Span::new(1, 6));
        assert_eq!(ok("-x**2").span, Span::new(0, 5));
        assert_eq!(ok("sum(X, axis=1)").span, Span::new(0, 14));
        assert_eq!(ok("u[:, None]").span, Span::new(0, 10));
        assert_eq!(ok("x.T").span, Span::new(0, 3));
    }

    #[test]
    fn calls_with_keywords() {
        let e = ok("sum(X, axis=1)");
        let ExprKind::Call {
            name,
            name_span,
            args,
            kwargs,
        } = &e.kind
        else {
            panic!("{e:?}")
        };
        assert_eq!((name.as_str(), *name_span), ("sum", Span::new(0, 3)));
        assert_eq!(args.len(), 1);
        assert_eq!(kwargs[0].name, "axis");
        assert_eq!(kwargs[0].name_span, Span::new(7, 11));
        assert_eq!(kwargs[0].value.kind, ExprKind::Number(Number::Int(1)));
        let reduce = |src: &str| match &ok(src).kind {
            ExprKind::Call { name, kwargs, .. } => {
                let func = Func::from_name(name).expect("a known function");
                reduce_args(func, kwargs).expect("valid keywords")
            }
            other => panic!("{other:?}"),
        };
        let args = |axes: Option<Vec<i64>>, keepdims| ReduceArgs {
            axes,
            keepdims,
            ddof: 0,
        };
        assert_eq!(reduce("sum(X, axis=1)"), args(Some(vec![1]), false));
        assert_eq!(
            reduce("sum(X, axis=(0, 1), keepdims=True)"),
            args(Some(vec![0, 1]), true)
        );
        assert_eq!(reduce("max(X, axis=None)"), args(None, false));
        assert_eq!(reduce("mean(X, axis=-1)"), args(Some(vec![-1]), false));
        assert_eq!(reduce("min(X, axis=(-2,))"), args(Some(vec![-2]), false));
        assert_eq!(reduce("prod(X, axis=())"), args(Some(vec![]), false));
        assert_eq!(reduce("all(X > 0, keepdims=False,)"), args(None, false));
        assert_eq!(reduce("any(X)"), args(None, false));
        assert_eq!(
            reduce("var(X, ddof=1, axis=0)"),
            ReduceArgs {
                ddof: 1,
                ..args(Some(vec![0]), false)
            }
        );
        assert_eq!(
            show("sum(X, axis=(0, 1), keepdims=True)"),
            "sum(X, axis=(0, 1), keepdims=True)"
        );
        assert_eq!(show("max(X, axis=None)"), "max(X, axis=None)");
        assert_eq!(show("sum(X, axis=(0,))"), "sum(X, axis=(0,))");
    }

    #[test]
    fn every_function_with_its_arity() {
        for f in Func::ALL {
            let args = vec!["x"; f.arity()].join(", ");
            let src = match f.signature() {
                Signature::Cast => "cast(x, \"f32\")".to_string(),
                Signature::Update => format!("{}(x[1:], x)", f.name()),
                Signature::Join => format!("{}([x, y])", f.name()),
                Signature::Split => "split(x, [1, 2], output=0)".to_string(),
                _ => format!("{}({args})", f.name()),
            };
            assert_eq!(show(&src), src);
        }
        assert_eq!(show("where(x > 0, x, 0)"), "where((x > 0), x, 0)");
        assert_eq!(show("clip(x, 0, 1)"), "clip(x, 0, 1)");
        assert_eq!(show("dot(a, b) @ c"), "(dot(a, b) @ c)");
        assert_eq!(show("log(1 + exp(x),)"), "log((1 + exp(x)))");
    }

    #[test]
    fn function_table_is_consistent() {
        assert_eq!(Func::ALL.len(), 77);
        for f in Func::ALL {
            assert_eq!(Func::from_name(f.name()), Some(*f));
        }
        assert_eq!(Func::from_name("frobnicate"), None);
        assert!(Func::Sum.is_reduction() && !Func::Exp.is_reduction());
        assert_eq!(
            [
                Func::Where,
                Func::Clip,
                Func::Maximum,
                Func::Exp,
                Func::Sum,
                Func::Cast
            ]
            .map(Func::arity),
            [3, 3, 2, 1, 1, 2]
        );
    }

    #[test]
    fn indexing_transpose_and_cast() {
        let items = |src: &str| match &ok(src).kind {
            ExprKind::Index { items, .. } => items.clone(),
            other => panic!("{other:?}"),
        };
        use IndexItem::{Full, NewAxis};
        assert_eq!(items("u[:, None]"), [Full, NewAxis]);
        assert_eq!(items("v[None, :]"), [NewAxis, Full]);
        assert_eq!(items("x[None]"), [NewAxis]);
        assert_eq!(items("x[:,]"), [Full]);
        assert_eq!(show("u[:, None] + v[None, :]"), "(u[:, None] + v[None, :])");
        assert_eq!(show("x.T"), "x.T");
        assert_eq!(show("-x.T**2"), "(-(x.T ** 2))");
        assert_eq!(show("(a + b).T[None]"), "(a + b).T[None]");
        assert_eq!(show("transpose(x)"), "transpose(x)");
        assert!(matches!(ok("x.T").kind, ExprKind::Transpose(_)));
        assert_eq!(show("cast(x, \"f32\")"), "cast(x, \"f32\")");
        assert_eq!(show("cast(x, 'i8') + 1"), "(cast(x, \"i8\") + 1)");
        let e = ok("cast(x, 'bool')");
        let ExprKind::Call { args, .. } = &e.kind else {
            panic!("{e:?}")
        };
        assert_eq!(cast_dtype(&args[1]), Ok("bool"));
    }

    #[test]
    fn benchmark_workloads_parse() {
        let cases: [(&str, &[&str]); 8] = [
            ("log(1 + exp(x))", &["x"]),
            ("2*x**3 - 3*x**2 + x - 1", &["x"]),
            (
                "exp(-((x - 0.5)**2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002)",
                &["x"],
            ),
            (
                "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))",
                &["t", "z"],
            ),
            ("log(sum(exp(X), axis=1))", &["X"]),
            ("tanh(u[:, None] + v[None, :])", &["u", "v"]),
            ("tanh(A @ W + b)", &["A", "W", "b"]),
            ("(a*b)/(b*c)*(c/a)*x", &["a", "b", "c", "x"]),
        ];
        for (src, vars) in cases {
            assert_eq!(free_variables(&ok(src)), vars, "{src}");
            // The printed form parses back to the same tree.
            assert_eq!(show(&show(src)), show(src));
        }
        assert_eq!(show("2*x**3 - 3*x**2"), "((2 * (x ** 3)) - (3 * (x ** 2)))");
    }

    #[test]
    fn free_variables_in_order_of_first_appearance() {
        assert_eq!(free_variables(&ok("b*a + c*b - a")), ["b", "a", "c"]);
        assert_eq!(free_variables(&ok("sum(X, axis=1) + exp(y)")), ["X", "y"]);
        assert_eq!(free_variables(&ok("where(m, x, 0).T")), ["m", "x"]);
        assert!(free_variables(&ok("2 + 3")).is_empty());
    }

    #[test]
    fn fold_evaluates_bottom_up() {
        let e = ok("1 + 2 * (3 - 4) ** 2");
        let value = e.fold(|node, args: Vec<f64>| match &node.kind {
            ExprKind::Number(n) => Ok(n.as_f64()),
            ExprKind::Binary { op, .. } => Ok(match op {
                BinaryOp::Add => args[0] + args[1],
                BinaryOp::Sub => args[0] - args[1],
                BinaryOp::Mul => args[0] * args[1],
                BinaryOp::Pow => args[0].powf(args[1]),
                _ => return Err(()),
            }),
            _ => Err(()),
        });
        assert_eq!(value, Ok(3.0));
        assert_eq!(
            ok("a + f").fold(|_, _: Vec<()>| Err::<(), _>("stop")),
            Err("stop")
        );
        assert_eq!(ok("exp(x) + y[None]").preorder().len(), 5);
    }

    #[test]
    fn syntax_errors_with_positions() {
        let cases = [
            ("", 0, "expected an expression but found end of input"),
            ("   ", 3, "expected an expression but found end of input"),
            ("x +", 3, "expected an expression but found end of input"),
            ("x + (y", 6, "expected ',' or ')' but found end of input"),
            ("exp((x)", 7, "expected ',' or ')' but found end of input"),
            ("exp(x y)", 6, "expected ',' or ')' but found name 'y'"),
            (")", 0, "expected an expression but found ')'"),
            ("x y", 2, "expected an operator or end of input but found name 'y'"),
            ("a and b", 2, "expected an operator or end of input but found name 'and' (use '&' for logical and)"),
            ("x * * y", 4, "expected an expression but found '*'"),
            ("x = 2", 2, "expected an operator or end of input but found '='"),
            ("(,)", 1, "expected an expression but found ','"),
            ("f(x)(y)", 4, "unexpected '(': only a function name can be called"),
            ("(f)(x)", 3, "unexpected '(': only a function name can be called"),
            ("sum(axis=1, x)", 12, "positional argument follows keyword argument 'axis'"),
            ("x.foo", 2, "unknown attribute 'foo': only '.T' is supported"),
            ("x.", 2, "expected 'T' after '.' but found end of input"),
            ("x..T", 2, "expected 'T' after '.' but found '.'"),
            ("cast(x, \"f32)", 8, "unterminated string literal"),
            ("x * 1e", 4, "invalid number literal '1e': expected digits after the exponent"),
            ("x * 1e+", 4, "invalid number literal '1e+': expected digits after the exponent"),
            ("x # y", 2, "unexpected character '#'"),
        ];
        for (src, pos, message) in cases {
            assert_eq!(err(src), (pos, message.to_string()), "{src:?}");
        }
    }

    #[test]
    fn index_items_and_errors_with_positions() {
        let items = |src: &str| match &ok(src).kind {
            ExprKind::Index { items, .. } => items.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            show("x[1:-1, ::2, 0, None, ...]"),
            "x[1:(-1), ::2, 0, None, ...]"
        );
        assert_eq!(show("x[a:b, :c:, k + 1]"), "x[a:b, :c, (k + 1)]");
        assert_eq!(show("x[::]"), "x[:]");
        assert_eq!(items("x[::-1]").len(), 1);
        assert!(matches!(items("x[i]")[0], IndexItem::Expr(_)));
        assert!(matches!(items("x[...]")[0], IndexItem::Ellipsis));
        assert!(matches!(
            items("x[:2]")[0],
            IndexItem::Slice {
                start: None,
                stop: Some(_),
                step: None
            }
        ));
        assert_eq!(show("set_subtensor(x[1:], y)"), "set_subtensor(x[1:], y)");
        let cases = [
            ("x[]", 2, "empty index '[]'"),
            ("x[1 2]", 4, "expected ']'"),
            ("x[1:2:3:4]", 7, "expected ',' or ']' after an index item"),
            ("x[None", 6, "expected ']'"),
            ("x[:,,]", 4, "expected"),
            ("set_subtensor(x, 1)", 14, "must be an indexed expression"),
        ];
        for (src, pos, message) in cases {
            let (p, m) = err(src);
            assert_eq!(p, pos, "{src:?}: {m}");
            assert!(m.contains(message), "{src:?}: {m}");
        }
    }

    #[test]
    fn check_errors_with_positions() {
        let cases = [
            ("foo(x)", 0, "unknown function 'foo'"),
            (
                "sigmod(x)",
                0,
                "unknown function 'sigmod' (did you mean 'sigmoid'?)",
            ),
            (
                "1 + ex(x)",
                4,
                "unknown function 'ex' (did you mean 'exp'?)",
            ),
            ("x(1)", 0, "unknown function 'x'"),
            ("exp(x, y)", 7, "exp() takes 1 argument but 2 were given"),
            ("exp()", 0, "exp() takes 1 argument but 0 were given"),
            (
                "where(c, x)",
                0,
                "where() takes 3 arguments but 2 were given",
            ),
            (
                "clip(x, 0, 1, 2)",
                14,
                "clip() takes 3 arguments but 4 were given",
            ),
            (
                "maximum(x)",
                0,
                "maximum() takes 2 arguments but 1 was given",
            ),
            (
                "sum(x, 1)",
                7,
                "sum() takes 1 positional argument (plus axis= and keepdims=) but 2 were given",
            ),
            (
                "sum()",
                0,
                "sum() takes 1 positional argument (plus axis= and keepdims=) but 0 were given",
            ),
            ("exp(x, axis=1)", 7, "exp() takes no keyword arguments"),
            (
                "cast(x, 'f32', d=1)",
                15,
                "cast() takes no keyword arguments",
            ),
            (
                "sum(x, axs=1)",
                7,
                "sum() got an unexpected keyword argument 'axs'; expected axis= or keepdims=",
            ),
            (
                "sum(x, axis=1, axis=2)",
                15,
                "sum() got keyword argument 'axis' twice",
            ),
            (
                "sum(x, axis=1.5)",
                12,
                "axis= must be an integer, a tuple of integers, or None",
            ),
            (
                "sum(x, axis=(0, y))",
                16,
                "axis= must be an integer, a tuple of integers, or None",
            ),
            (
                "sum(x, axis=--1)",
                12,
                "axis= must be an integer, a tuple of integers, or None",
            ),
            ("sum(x, keepdims=1)", 16, "keepdims= must be True or False"),
            ("cast(x)", 0, "cast() takes 2 arguments but 1 was given"),
            (
                "cast(x, f32)",
                8,
                "the dtype of cast() must be a string literal such as \"f32\"",
            ),
            (
                "cast(x, \"f16\")",
                8,
                "unknown dtype 'f16'; expected one of bool, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64",
            ),
            (
                "x + \"a\"",
                4,
                "a string is only allowed as the dtype of cast(), e.g. cast(x, \"f32\")",
            ),
            (
                "x + None",
                4,
                "'None' is only allowed in an index (x[None]) or as axis=None",
            ),
            (
                "exp((1, 2))",
                4,
                "a tuple is only allowed as the value of axis=, e.g. axis=(0, 1)",
            ),
            ("exp(foo(x))", 4, "unknown function 'foo'"),
            ("cast(bar(x), 'f32')", 5, "unknown function 'bar' (did you mean 'var'?)"),
        ];
        for (src, pos, message) in cases {
            assert_eq!(err(src), (pos, message.to_string()), "{src:?}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let n = 100_000;
        let parens = format!("{}x{}", "(".repeat(n), ")".repeat(n));
        let message = format!("expression nested too deeply (more than {MAX_DEPTH} levels)");
        assert_eq!(err(&parens), (MAX_DEPTH, message.clone()));
        assert_eq!(
            err(&format!("{}x", "-".repeat(n))),
            (MAX_DEPTH - 1, message.clone())
        );
        assert_eq!(err(&format!("{}x", "exp(".repeat(n))).1, message);
        assert_eq!(err(&format!("x{}", "**x".repeat(n))).1, message);
        assert_eq!(err(&format!("x{}", "+(x".repeat(n))).1, message);
        assert_eq!(
            parse(&parens).unwrap_err().to_string(),
            format!("parse error at position {MAX_DEPTH}: {message}")
        );
        // Just under the limit is fine.
        let depth = MAX_DEPTH - 1;
        assert!(parse(&format!("{}x{}", "(".repeat(depth), ")".repeat(depth))).is_ok());
    }

    #[test]
    fn nesting_at_the_limit_fits_in_a_default_thread_stack() {
        let depth = MAX_DEPTH - 1;
        // (prefix, suffix, nesting levels per repetition)
        let shapes = [
            ("(", ")", 1),
            ("sum(x, axis=", ")", 1),
            ("x**(", ")", 2),
            ("-(", ")", 2),
            ("(x,", ")", 1),
            ("exp(", ")[None].T", 1),
        ];
        for (open, close, levels) in shapes {
            let n = depth / levels;
            let src = format!("{}x{}", open.repeat(n), close.repeat(n));
            let handle = std::thread::Builder::new()
                .stack_size(2 << 20)
                .spawn(move || parse_syntax(&src).map(|e| e.preorder().len()));
            let result = handle.map(|h| h.join());
            assert!(matches!(result, Ok(Ok(Ok(_)))), "{open}: {result:?}");
        }
    }

    #[test]
    fn long_flat_chains_parse_and_drop_without_recursion() {
        let n = 100_000;
        for op in ["+", "*", "<= 1 |", "&"] {
            let src = vec!["x"; n].join(op);
            let e = ok(&src);
            assert_eq!(free_variables(&e), ["x"]);
            check(&e).expect("checked");
            assert_eq!(e.span, Span::new(0, src.len()));
        }
        let chain = ok(&format!("x{}", ".T".repeat(n)));
        assert_eq!(chain.preorder().len(), n + 1);
        let count = chain.fold(|_, c: Vec<usize>| Ok::<_, ()>(1 + c.iter().sum::<usize>()));
        assert_eq!(count, Ok(n + 1));
        let e = ok(&format!("x{}", "[None]".repeat(n)));
        assert_eq!(e.to_string().len(), 1 + 6 * n);
        let cloned = ok(&vec!["y"; 1000].join("-"));
        assert_eq!(cloned.clone(), cloned);
    }

    #[test]
    fn render_points_at_the_error() {
        let src = "exp((x)";
        let e = parse(src).unwrap_err();
        assert_eq!(
            e.render(src),
            "parse error at position 7: expected ',' or ')' but found end of input\n  exp((x)\n         ^"
        );
        let src = "a +\n\tb $ c";
        let e = parse(src).unwrap_err();
        assert_eq!(e.pos, 7);
        assert_eq!(e.line_col(src), (2, 4));
        assert_eq!(
            e.render(src),
            "parse error at position 7: unexpected character '$'\n  \tb $ c\n  \t  ^"
        );
        let e = ParseError::new(99, "past the end");
        assert_eq!(e.line_col("é"), (1, 2));
        assert!(e.render("é\nx").ends_with("  x\n   ^"));
    }

    #[test]
    fn transpose_of_a_number_prints_parenthesised() {
        assert_eq!(show("(2).T + (3)[None]"), "((2).T + (3)[None])");
        assert_eq!(show(&show("(2).T")), "(2).T");
    }

    /// Text made of expression tokens (to reach deeper into the parser than random bytes).
    fn token_soup() -> impl Strategy<Value = String> {
        const TOKENS: &[&str] = &[
            "x", "y", "2", "0.5", "1e-3", ".5", "+", "-", "*", "**", "/", "//", "%", "@", "<",
            "<=", "==", "!=", "&", "|", "~", "(", ")", "[", "]", ",", ":", ".", "T", "None",
            "True", "=", "exp", "sum", "axis", "keepdims", "where", "cast", "'f32'", "\"i8\"", " ",
            "1e", "\"",
        ];
        prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let src = String::from_utf8_lossy(&bytes);
            if let Err(e) = parse(&src) {
                prop_assert!(e.pos <= src.len());
                let _ = e.render(&src);
            }
            let _ = parse_decl(&src);
        }

        #[test]
        fn random_strings_never_panic(src in any::<String>()) {
            if let Err(e) = parse(&src) {
                prop_assert!(e.pos <= src.len());
                let _ = e.render(&src);
                let _ = e.line_col(&src);
            }
        }

        #[test]
        fn token_soup_never_panics_and_round_trips(src in token_soup()) {
            match parse_syntax(&src) {
                Ok(e) => {
                    let printed = e.to_string();
                    let reparsed = parse_syntax(&printed).map(|r| r.to_string());
                    prop_assert_eq!(reparsed, Ok(printed));
                    let _ = check(&e);
                    let _ = free_variables(&e);
                }
                Err(e) => prop_assert!(e.pos <= src.len()),
            }
        }

        #[test]
        fn declaration_soup_never_panics(
            parts in prop::collection::vec(
                prop::sample::select(&["x", "=", "f64", "f16", "[", "]", ":", ",", "3", "-", " "][..]),
                0..12,
            )
        ) {
            let src = parts.concat();
            match parse_decl(&src) {
                Ok(d) => prop_assert_eq!(parse_decl(&d.to_string()), Ok(d)),
                Err(e) => prop_assert!(e.pos <= src.len()),
            }
        }
    }
}
