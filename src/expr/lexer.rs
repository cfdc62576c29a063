//! The lexer: source text to a list of tokens, the last one always [`TokenKind::Eof`].
//!
//! Token rules:
//! - whitespace (space, tab, `\r`, `\n`) separates tokens and is otherwise ignored;
//! - names are ASCII `[A-Za-z_][A-Za-z0-9_]*`; `True`, `False` and `None` are keywords;
//! - numbers are `digits [. digits*] [(e|E) [+|-] digits]` or `. digits [exponent]`; a literal
//!   with a `.` or an exponent is a float, otherwise an integer (which must fit in `i64`);
//!   a number immediately followed by a letter or `_` (`2x`, `0x1F`, `1_000`) is an error;
//! - strings are `"..."` or `'...'` on one line, without escape sequences;
//! - operators and punctuation: `+ - * ** / // % @ < <= > >= == != & | ~ ( ) [ ] , : . =`.

use super::ast::{ParseError, Span};

/// The kinds of token.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    /// An integer literal such as `2`.
    Int(i64),
    /// A float literal such as `0.5`, `.5`, `1e-3`.
    Float(f64),
    /// A string literal (contents without the quotes).
    Str(String),
    /// A name: a variable, a function or a keyword argument.
    Name(String),
    /// `True`
    True,
    /// `False`
    False,
    /// `None`
    None,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `**`
    StarStar,
    /// `/`
    Slash,
    /// `//`
    SlashSlash,
    /// `%`
    Percent,
    /// `@`
    At,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    EqEq,
    /// `!=`
    Ne,
    /// `&`
    Amp,
    /// `|`
    Pipe,
    /// `^`
    Caret,
    /// `<<`
    LtLt,
    /// `>>`
    GtGt,
    /// `~`
    Tilde,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// `.`
    Dot,
    /// `...`
    Ellipsis,
    /// `=`
    Assign,
    /// The end of the input.
    Eof,
}

impl TokenKind {
    /// A description for error messages: `')'`, `name 'x'`, `number 2`, `end of input`.
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Int(i) => format!("number {i}"),
            TokenKind::Float(x) => format!("number {x:?}"),
            TokenKind::Str(s) => format!("string {s:?}"),
            TokenKind::Name(n) => format!("name '{n}'"),
            TokenKind::True => "'True'".to_string(),
            TokenKind::False => "'False'".to_string(),
            TokenKind::None => "'None'".to_string(),
            TokenKind::Eof => "end of input".to_string(),
            other => format!("'{}'", other.punct()),
        }
    }

    /// The text of an operator or punctuation token (empty for other tokens).
    fn punct(&self) -> &'static str {
        match self {
            TokenKind::Plus => "+",
            TokenKind::Minus => "-",
            TokenKind::Star => "*",
            TokenKind::StarStar => "**",
            TokenKind::Slash => "/",
            TokenKind::SlashSlash => "//",
            TokenKind::Percent => "%",
            TokenKind::At => "@",
            TokenKind::Lt => "<",
            TokenKind::Le => "<=",
            TokenKind::Gt => ">",
            TokenKind::Ge => ">=",
            TokenKind::EqEq => "==",
            TokenKind::Ne => "!=",
            TokenKind::Amp => "&",
            TokenKind::Pipe => "|",
            TokenKind::Caret => "^",
            TokenKind::LtLt => "<<",
            TokenKind::GtGt => ">>",
            TokenKind::Tilde => "~",
            TokenKind::LParen => "(",
            TokenKind::RParen => ")",
            TokenKind::LBracket => "[",
            TokenKind::RBracket => "]",
            TokenKind::Comma => ",",
            TokenKind::Colon => ":",
            TokenKind::Dot => ".",
            TokenKind::Ellipsis => "...",
            TokenKind::Assign => "=",
            _ => "",
        }
    }
}

/// A token and where it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Its source text (empty, at `src.len()`, for [`TokenKind::Eof`]).
    pub span: Span,
}

/// Splits `src` into tokens, ending with one [`TokenKind::Eof`].
pub fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer { src, pos: 0 };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let done = token.kind == TokenKind::Eof;
        tokens.push(token);
        if done {
            return Ok(tokens);
        }
    }
}

/// The lexer state: the source and the byte offset of the next character.
struct Lexer<'s> {
    src: &'s str,
    pos: usize,
}

impl Lexer<'_> {
    /// The byte at `pos + ahead`, or 0 past the end (0 never starts a valid token).
    fn byte(&self, ahead: usize) -> u8 {
        self.src
            .as_bytes()
            .get(self.pos + ahead)
            .copied()
            .unwrap_or(0)
    }

    /// Advances `pos` while `pred` holds for the current byte.
    fn skip_while(&mut self, pred: impl Fn(u8) -> bool) {
        while self.pos < self.src.len() && pred(self.byte(0)) {
            self.pos += 1;
        }
    }

    /// Lexes the next token (after skipping whitespace).
    fn next_token(&mut self) -> Result<Token, ParseError> {
        self.skip_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
        let start = self.pos;
        if start >= self.src.len() {
            return Ok(self.token(TokenKind::Eof, start));
        }
        let b = self.byte(0);
        if b.is_ascii_digit() || (b == b'.' && self.byte(1).is_ascii_digit()) {
            return self.number();
        }
        if is_name_start(b) {
            return Ok(self.name());
        }
        if b == b'"' || b == b'\'' {
            return self.string();
        }
        self.punct()
    }

    /// A token of `kind` from `start` to the current position.
    fn token(&self, kind: TokenKind, start: usize) -> Token {
        Token {
            kind,
            span: Span::new(start, self.pos),
        }
    }

    /// A name or one of the keywords `True`, `False`, `None`.
    fn name(&mut self) -> Token {
        let start = self.pos;
        self.skip_while(is_name_char);
        let kind = match &self.src[start..self.pos] {
            "True" => TokenKind::True,
            "False" => TokenKind::False,
            "None" => TokenKind::None,
            name => TokenKind::Name(name.to_string()),
        };
        self.token(kind, start)
    }

    /// An integer or float literal.
    fn number(&mut self) -> Result<Token, ParseError> {
        let start = self.pos;
        self.skip_while(|b| b.is_ascii_digit());
        let mut is_float = false;
        if self.byte(0) == b'.' {
            is_float = true;
            self.pos += 1;
            self.skip_while(|b| b.is_ascii_digit());
        }
        if matches!(self.byte(0), b'e' | b'E') {
            is_float = true;
            self.exponent(start)?;
        }
        if is_name_char(self.byte(0)) {
            self.skip_while(is_name_char);
            let text = &self.src[start..self.pos];
            return Err(ParseError::new(
                start,
                format!("invalid number literal '{text}'"),
            ));
        }
        let text = &self.src[start..self.pos];
        let kind = if is_float {
            let value = text
                .parse::<f64>()
                .map_err(|_| ParseError::new(start, format!("invalid number literal '{text}'")))?;
            TokenKind::Float(value)
        } else {
            let value = text.parse::<i64>().map_err(|_| {
                ParseError::new(start, format!("integer literal '{text}' is too large"))
            })?;
            TokenKind::Int(value)
        };
        Ok(self.token(kind, start))
    }

    /// The exponent part `e[+-]digits` of a float starting at `start` (`pos` is on the `e`).
    fn exponent(&mut self, start: usize) -> Result<(), ParseError> {
        let sign = usize::from(matches!(self.byte(1), b'+' | b'-'));
        if !self.byte(1 + sign).is_ascii_digit() {
            self.pos += 1 + sign;
            let text = &self.src[start..self.pos];
            return Err(ParseError::new(
                start,
                format!("invalid number literal '{text}': expected digits after the exponent"),
            ));
        }
        self.pos += 1 + sign;
        self.skip_while(|b| b.is_ascii_digit());
        Ok(())
    }

    /// A string literal in single or double quotes, on one line.
    fn string(&mut self) -> Result<Token, ParseError> {
        let start = self.pos;
        let quote = self.byte(0);
        self.pos += 1;
        self.skip_while(|b| b != quote && b != b'\n');
        if self.byte(0) != quote {
            return Err(ParseError::new(start, "unterminated string literal"));
        }
        let contents = self.src[start + 1..self.pos].to_string();
        self.pos += 1;
        Ok(self.token(TokenKind::Str(contents), start))
    }

    /// An operator or punctuation token, longest match first.
    fn punct(&mut self) -> Result<Token, ParseError> {
        let start = self.pos;
        let (kind, len) = match (self.byte(0), self.byte(1)) {
            (b'.', b'.') if self.byte(2) == b'.' => (TokenKind::Ellipsis, 3),
            (b'*', b'*') => (TokenKind::StarStar, 2),
            (b'/', b'/') => (TokenKind::SlashSlash, 2),
            (b'<', b'=') => (TokenKind::Le, 2),
            (b'<', b'<') => (TokenKind::LtLt, 2),
            (b'>', b'>') => (TokenKind::GtGt, 2),
            (b'>', b'=') => (TokenKind::Ge, 2),
            (b'=', b'=') => (TokenKind::EqEq, 2),
            (b'!', b'=') => (TokenKind::Ne, 2),
            (b'+', _) => (TokenKind::Plus, 1),
            (b'-', _) => (TokenKind::Minus, 1),
            (b'*', _) => (TokenKind::Star, 1),
            (b'/', _) => (TokenKind::Slash, 1),
            (b'%', _) => (TokenKind::Percent, 1),
            (b'@', _) => (TokenKind::At, 1),
            (b'<', _) => (TokenKind::Lt, 1),
            (b'>', _) => (TokenKind::Gt, 1),
            (b'&', _) => (TokenKind::Amp, 1),
            (b'|', _) => (TokenKind::Pipe, 1),
            (b'^', _) => (TokenKind::Caret, 1),
            (b'~', _) => (TokenKind::Tilde, 1),
            (b'(', _) => (TokenKind::LParen, 1),
            (b')', _) => (TokenKind::RParen, 1),
            (b'[', _) => (TokenKind::LBracket, 1),
            (b']', _) => (TokenKind::RBracket, 1),
            (b',', _) => (TokenKind::Comma, 1),
            (b':', _) => (TokenKind::Colon, 1),
            (b'.', _) => (TokenKind::Dot, 1),
            (b'=', _) => (TokenKind::Assign, 1),
            _ => return Err(self.unexpected_char()),
        };
        self.pos += len;
        Ok(self.token(kind, start))
    }

    /// The error for a character that starts no token (`pos` is on a char boundary).
    fn unexpected_char(&self) -> ParseError {
        let c = self.src[self.pos..].chars().next().unwrap_or('\0');
        let hint = match c {
            '!' => " (use '~' for logical not)",
            _ => "",
        };
        ParseError::new(self.pos, format!("unexpected character {c:?}{hint}"))
    }
}

/// Whether `b` can start a name.
fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// Whether `b` can continue a name.
fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        match tokenize(src) {
            Ok(tokens) => tokens.into_iter().map(|t| t.kind).collect(),
            Err(e) => panic!("{src:?}: {e}"),
        }
    }

    fn err(src: &str) -> ParseError {
        match tokenize(src) {
            Ok(tokens) => panic!("{src:?} lexed to {tokens:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn integer_and_float_literals() {
        use TokenKind::*;
        assert_eq!(kinds("2"), [Int(2), Eof]);
        assert_eq!(kinds("0.5"), [Float(0.5), Eof]);
        assert_eq!(kinds("1e-3"), [Float(1e-3), Eof]);
        assert_eq!(kinds("1E+3"), [Float(1e3), Eof]);
        assert_eq!(kinds(".5"), [Float(0.5), Eof]);
        assert_eq!(kinds("2."), [Float(2.0), Eof]);
        assert_eq!(kinds("2.e1"), [Float(20.0), Eof]);
        assert_eq!(kinds("2.0"), [Float(2.0), Eof]);
        assert_eq!(kinds("007"), [Int(7), Eof]);
    }

    #[test]
    fn operators_longest_match() {
        use TokenKind::*;
        assert_eq!(
            kinds("a**b//c<=d>=e==f!=g<h>i=j"),
            [
                Name("a".into()),
                StarStar,
                Name("b".into()),
                SlashSlash,
                Name("c".into()),
                Le,
                Name("d".into()),
                Ge,
                Name("e".into()),
                EqEq,
                Name("f".into()),
                Ne,
                Name("g".into()),
                Lt,
                Name("h".into()),
                Gt,
                Name("i".into()),
                Assign,
                Name("j".into()),
                Eof
            ]
        );
        assert_eq!(
            kinds("+-*/%@&|~()[],:."),
            [
                Plus, Minus, Star, Slash, Percent, At, Amp, Pipe, Tilde, LParen, RParen, LBracket,
                RBracket, Comma, Colon, Dot, Eof
            ]
        );
        assert_eq!(
            kinds("a^b<<c>>d<=e"),
            [
                Name("a".into()),
                Caret,
                Name("b".into()),
                LtLt,
                Name("c".into()),
                GtGt,
                Name("d".into()),
                Le,
                Name("e".into()),
                Eof
            ]
        );
    }

    #[test]
    fn keywords_strings_and_spans() {
        let tokens = tokenize(" True False None 'f32' \"i8\" x_1").unwrap_or_default();
        let kinds: Vec<_> = tokens.iter().map(|t| t.kind.clone()).collect();
        assert_eq!(
            kinds,
            [
                TokenKind::True,
                TokenKind::False,
                TokenKind::None,
                TokenKind::Str("f32".into()),
                TokenKind::Str("i8".into()),
                TokenKind::Name("x_1".into()),
                TokenKind::Eof
            ]
        );
        assert_eq!(tokens[0].span, Span::new(1, 5));
        assert_eq!(tokens[3].span, Span::new(17, 22));
        assert_eq!(tokens[6].span, Span::new(31, 31));
    }

    #[test]
    fn dot_attribute_is_not_a_number() {
        use TokenKind::*;
        assert_eq!(kinds("x.T"), [Name("x".into()), Dot, Name("T".into()), Eof]);
    }

    #[test]
    fn lexical_errors_with_positions() {
        let e = err("x + 1e");
        assert_eq!(e.pos, 4);
        assert_eq!(
            e.message,
            "invalid number literal '1e': expected digits after the exponent"
        );
        assert_eq!(err("1e+").pos, 0);
        assert_eq!(err("y*2x").pos, 2);
        assert_eq!(err("y*2x").message, "invalid number literal '2x'");
        assert_eq!(err("0x1F").message, "invalid number literal '0x1F'");
        let e = err("cast(x, \"f32)");
        assert_eq!(
            (e.pos, e.message.as_str()),
            (8, "unterminated string literal")
        );
        assert_eq!(err("'ab\ncd'").pos, 0);
        let e = err("a $ b");
        assert_eq!((e.pos, e.message.as_str()), (2, "unexpected character '$'"));
        assert_eq!(err("é").pos, 0);
        assert_eq!(err("x + é").pos, 4);
        let e = err("99999999999999999999");
        assert_eq!(
            e.message,
            "integer literal '99999999999999999999' is too large"
        );
    }
}
