//! Variable declarations `name=dtype[dims]` given on the command line, e.g. `x=f64[:]`,
//! `X=f32[:, :]`, `s=f64[]`, `A=f64[512, 512]`.
//!
//! Grammar: `decl = name "=" dtype "[" [dim {"," dim} [","]] "]"` with `dim = integer | ":"`
//! (`:` is a size unknown until run time); whitespace is allowed between tokens. It reuses
//! the expression lexer, so positions and messages look the same as for expressions.

use std::fmt;

use super::ast::ParseError;
use super::lexer::{tokenize, Token, TokenKind};

/// The dtype names accepted in declarations and by `cast(x, "...")`.
pub const DTYPES: &[&str] = &[
    "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64",
];

/// A declared input variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Decl {
    /// The variable name.
    pub name: String,
    /// The dtype, one of [`DTYPES`].
    pub dtype: String,
    /// One entry per dimension: `Some(size)`, or `None` for `:` (unknown size).
    pub dims: Vec<Option<usize>>,
}

/// Prints the declaration in the syntax [`parse_decl`] reads, e.g. `X=f32[:, 3]`.
impl fmt::Display for Decl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}[", self.name, self.dtype)?;
        for (i, dim) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match dim {
                Some(size) => write!(f, "{size}")?,
                None => f.write_str(":")?,
            }
        }
        f.write_str("]")
    }
}

/// Parses a declaration `name=dtype[dims]`.
pub fn parse_decl(s: &str) -> Result<Decl, ParseError> {
    let tokens = tokenize(s)?;
    let mut tokens = tokens.iter();
    // `tokenize` always ends with `Eof`, which `next` then returns forever.
    let eof = Token {
        kind: TokenKind::Eof,
        span: super::ast::Span::new(s.len(), s.len()),
    };
    let mut next = || tokens.next().unwrap_or(&eof).clone();

    let name = match next() {
        Token {
            kind: TokenKind::Name(name),
            ..
        } => name,
        t => return Err(expected("a variable name", &t)),
    };
    expect(next(), &TokenKind::Assign, "'=' after the variable name")?;
    let dtype = dtype(next())?;
    expect(next(), &TokenKind::LBracket, "'[' after the dtype")?;
    let dims = dims(&mut next)?;
    expect(next(), &TokenKind::Eof, "end of input after ']'")?;
    Ok(Decl { name, dtype, dims })
}

/// The error "expected `what` but found `token`" at `token`.
fn expected(what: &str, token: &Token) -> ParseError {
    ParseError::new(
        token.span.start,
        format!("expected {what} but found {}", token.kind.describe()),
    )
}

/// `token` must be `kind`.
fn expect(token: Token, kind: &TokenKind, what: &str) -> Result<(), ParseError> {
    if &token.kind == kind {
        Ok(())
    } else {
        Err(expected(what, &token))
    }
}

/// A dtype name, one of [`DTYPES`].
fn dtype(token: Token) -> Result<String, ParseError> {
    match token.kind {
        TokenKind::Name(d) if DTYPES.contains(&d.as_str()) => Ok(d),
        TokenKind::Name(d) => Err(ParseError::new(
            token.span.start,
            format!("unknown dtype '{d}'; expected one of {}", DTYPES.join(", ")),
        )),
        _ => Err(expected("a dtype", &token)),
    }
}

/// The dimensions after `[`, up to and including `]`.
fn dims(next: &mut impl FnMut() -> Token) -> Result<Vec<Option<usize>>, ParseError> {
    let mut dims = Vec::new();
    loop {
        let token = next();
        let dim = match token.kind {
            TokenKind::RBracket => return Ok(dims),
            TokenKind::Colon => None,
            TokenKind::Int(n) => Some(usize::try_from(n).map_err(|_| size_error(&token))?),
            _ => return Err(size_error(&token)),
        };
        dims.push(dim);
        let sep = next();
        match sep.kind {
            TokenKind::Comma => {}
            TokenKind::RBracket => return Ok(dims),
            _ => return Err(expected("',' or ']'", &sep)),
        }
    }
}

/// The error for a dimension that is neither a size nor `:`.
fn size_error(token: &Token) -> ParseError {
    expected("a dimension (a non-negative integer size or ':')", token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Decl {
        match parse_decl(s) {
            Ok(d) => d,
            Err(e) => panic!("{s:?}: {e}"),
        }
    }

    fn err(s: &str) -> ParseError {
        match parse_decl(s) {
            Ok(d) => panic!("{s:?} parsed to {d:?}"),
            Err(e) => e,
        }
    }

    fn decl(name: &str, dtype: &str, dims: &[Option<usize>]) -> Decl {
        Decl {
            name: name.into(),
            dtype: dtype.into(),
            dims: dims.to_vec(),
        }
    }

    #[test]
    fn examples_from_the_spec() {
        assert_eq!(ok("x=f64[:]"), decl("x", "f64", &[None]));
        assert_eq!(ok("X=f32[:, :]"), decl("X", "f32", &[None, None]));
        assert_eq!(ok("s=f64[]"), decl("s", "f64", &[]));
        assert_eq!(
            ok("A=f64[512, 512]"),
            decl("A", "f64", &[Some(512), Some(512)])
        );
    }

    #[test]
    fn all_dtypes_whitespace_and_trailing_comma() {
        for dtype in DTYPES {
            assert_eq!(ok(&format!("v={dtype}[3]")).dtype, *dtype);
        }
        assert_eq!(
            ok("  my_var = i32 [ 0 , : , ] "),
            decl("my_var", "i32", &[Some(0), None])
        );
    }

    #[test]
    fn display_round_trips() {
        for s in ["x=f64[:]", "X=f32[:, 3]", "s=bool[]"] {
            assert_eq!(ok(s).to_string(), s);
        }
    }

    #[test]
    fn errors_with_positions() {
        let e = err("x=f16[:]");
        assert_eq!(e.pos, 2);
        assert!(e
            .message
            .starts_with("unknown dtype 'f16'; expected one of bool, i8"));
        let cases = [
            ("=f64[:]", 0, "expected a variable name but found '='"),
            (
                "x f64[:]",
                2,
                "expected '=' after the variable name but found name 'f64'",
            ),
            ("x=[:]", 2, "expected a dtype but found '['"),
            (
                "x=f64",
                5,
                "expected '[' after the dtype but found end of input",
            ),
            ("x=f64(3)", 5, "expected '[' after the dtype but found '('"),
            (
                "x=f64[-1]",
                6,
                "expected a dimension (a non-negative integer size or ':') but found '-'",
            ),
            (
                "x=f64[2.5]",
                6,
                "expected a dimension (a non-negative integer size or ':') but found number 2.5",
            ),
            ("x=f64[3 4]", 8, "expected ',' or ']' but found number 4"),
            (
                "x=f64[3,",
                8,
                "expected a dimension (a non-negative integer size or ':') but found end of input",
            ),
            (
                "x=f64[3] y",
                9,
                "expected end of input after ']' but found name 'y'",
            ),
            ("True=f64[]", 0, "expected a variable name but found 'True'"),
        ];
        for (src, pos, message) in cases {
            let e = err(src);
            assert_eq!((e.pos, e.message.as_str()), (pos, message), "{src:?}");
        }
        assert_eq!(err("x=f64[1e]").pos, 6);
    }
}
