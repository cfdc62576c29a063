//! The parser (tokens to [`Expr`]) and the checking step (function names, arities, keyword
//! arguments, where tuples, strings and `None` may appear).
//!
//! The parser is precedence climbing: one loop per call of [`Parser::binary`] handles all
//! left-associative infix operators, so a flat chain `x+x+...+x` needs constant stack.
//! Prefix operators, `**` and brackets recurse; each of them counts one level of
//! [`MAX_DEPTH`], so pathological nesting is an error instead of a stack overflow.
//!
//! The grammar accepts any name in call position and any number of arguments; the checking
//! step ([`check`]) resolves names with [`Func::from_name`] and validates the arguments, so
//! that its messages can name the function.

use super::ast::{
    BinaryOp, Expr, ExprKind, Func, IndexItem, Keyword, Number, ParseError, Signature, Span,
    UnaryOp,
};
use super::decl::DTYPES;
use super::lexer::{tokenize, Token, TokenKind};

/// The maximum nesting of brackets, prefix operators and `**` right operands.
///
/// Chosen so that parsing at the limit fits in a default 2 MiB thread stack even in a debug
/// build (about 10 KiB per level there, 2 KiB in release); Python 3.8 had the same limit of
/// 100 nested parentheses.
pub const MAX_DEPTH: usize = 100;

/// Parses `src` into a syntax tree without the checking step (see [`check`]).
pub fn parse_syntax(src: &str) -> Result<Expr, ParseError> {
    let mut parser = Parser {
        tokens: tokenize(src)?,
        next: 0,
        depth: 0,
    };
    let expr = parser.expr()?;
    parser.expect_end()?;
    Ok(expr)
}

/// The parser state: the tokens (ending with `Eof`), the index of the next one, the nesting.
struct Parser {
    tokens: Vec<Token>,
    next: usize,
    depth: usize,
}

impl Parser {
    /// The next token, not consumed (the final `Eof` is returned forever).
    fn peek(&self) -> &Token {
        let last = self.tokens.len().saturating_sub(1);
        &self.tokens[self.next.min(last)]
    }

    /// The token after the next one.
    fn peek2(&self) -> &TokenKind {
        let last = self.tokens.len().saturating_sub(1);
        &self.tokens[(self.next + 1).min(last)].kind
    }

    /// Consumes and returns the next token.
    fn bump(&mut self) -> Token {
        let token = self.peek().clone();
        if token.kind != TokenKind::Eof {
            self.next += 1;
        }
        token
    }

    /// Consumes the next token if it is `kind`.
    fn eat(&mut self, kind: &TokenKind) -> Option<Token> {
        if &self.peek().kind == kind {
            Some(self.bump())
        } else {
            None
        }
    }

    /// Consumes the next token, which must be `kind`.
    fn expect(&mut self, kind: &TokenKind) -> Result<Token, ParseError> {
        match self.eat(kind) {
            Some(token) => Ok(token),
            None => Err(self.unexpected(&format!("'{}'", kind_text(kind)))),
        }
    }

    /// The error "expected `what` but found (the next token)" there.
    fn unexpected(&self, what: &str) -> ParseError {
        let token = self.peek();
        let hint = match &token.kind {
            TokenKind::Name(n) if n == "and" => " (use '&' for logical and)",
            TokenKind::Name(n) if n == "or" => " (use '|' for logical or)",
            TokenKind::Name(n) if n == "not" => " (use '~' for logical not)",
            _ => "",
        };
        let found = token.kind.describe();
        ParseError::new(
            token.span.start,
            format!("expected {what} but found {found}{hint}"),
        )
    }

    /// The whole input must have been consumed.
    fn expect_end(&self) -> Result<(), ParseError> {
        match self.peek().kind {
            TokenKind::Eof => Ok(()),
            TokenKind::LParen => Err(ParseError::new(
                self.peek().span.start,
                "unexpected '(': only a function name can be called",
            )),
            _ => Err(self.unexpected("an operator or end of input")),
        }
    }

    /// Enters one nesting level at `pos`, failing past [`MAX_DEPTH`].
    fn enter(&mut self, pos: usize) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::new(
                pos,
                format!("expression nested too deeply (more than {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    /// Leaves one nesting level.
    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// `expr = binary(1)`, one nesting level.
    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.enter(self.peek().span.start)?;
        let expr = self.binary(1);
        self.leave();
        expr
    }

    /// Precedence climbing over the infix operators of precedence `>= min_prec` (all but
    /// `**`, which [`Parser::power`] handles). Comparisons do not chain.
    fn binary(&mut self, min_prec: u8) -> Result<Expr, ParseError> {
        let mut lhs = self.unary()?;
        let mut after_comparison = false;
        while let Some(op) = infix_op(&self.peek().kind) {
            if op.precedence() < min_prec {
                break;
            }
            let op_token = self.bump();
            if op.is_comparison() && after_comparison {
                return Err(ParseError::new(
                    op_token.span.start,
                    "chained comparisons like 'a < b < c' are not supported; \
                     write '(a < b) & (b < c)'",
                ));
            }
            let rhs = self.binary(op.precedence() + 1)?;
            after_comparison = op.is_comparison();
            lhs = binary_node(op, lhs, rhs);
        }
        Ok(lhs)
    }

    /// `unary = ("-" | "+" | "~") unary | power`.
    fn unary(&mut self) -> Result<Expr, ParseError> {
        let op = match self.peek().kind {
            TokenKind::Minus => UnaryOp::Neg,
            TokenKind::Plus => UnaryOp::Pos,
            TokenKind::Tilde => UnaryOp::Not,
            _ => return self.power(),
        };
        let op_span = self.bump().span;
        self.enter(op_span.start)?;
        let operand = self.unary();
        self.leave();
        let operand = operand?;
        let span = op_span.to(operand.span);
        let kind = ExprKind::Unary {
            op,
            operand: Box::new(operand),
        };
        Ok(Expr::new(kind, span))
    }

    /// `power = postfix ["**" unary]`: right-associative, and the exponent may be signed.
    fn power(&mut self) -> Result<Expr, ParseError> {
        let base = self.postfix()?;
        let Some(op_token) = self.eat(&TokenKind::StarStar) else {
            return Ok(base);
        };
        self.enter(op_token.span.start)?;
        let exponent = self.unary();
        self.leave();
        Ok(binary_node(BinaryOp::Pow, base, exponent?))
    }

    /// `postfix = atom { "[" index "]" | "." "T" }`.
    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let mut expr = self.atom()?;
        loop {
            expr = match self.peek().kind {
                TokenKind::LBracket => self.index(expr)?,
                TokenKind::Dot => self.attribute(expr)?,
                _ => return Ok(expr),
            };
        }
    }

    /// `"[" item {"," item} [","] "]"` after `base`; one nesting level.
    fn index(&mut self, base: Expr) -> Result<Expr, ParseError> {
        let open = self.bump();
        self.enter(open.span.start)?;
        let items = self.index_items();
        self.leave();
        let items = items?;
        let close = self.expect(&TokenKind::RBracket)?;
        let span = base.span.to(close.span);
        let kind = ExprKind::Index {
            base: Box::new(base),
            items,
        };
        Ok(Expr::new(kind, span))
    }

    /// The items of an index, up to (not including) its `]`.
    fn index_items(&mut self) -> Result<Vec<IndexItem>, ParseError> {
        let mut items = Vec::new();
        while self.peek().kind != TokenKind::RBracket || items.is_empty() {
            items.push(self.index_item()?);
            if self.eat(&TokenKind::Comma).is_none() {
                break;
            }
        }
        Ok(items)
    }

    /// One index item: `...`, `None`, `[expr] ":" [expr] [":" [expr]]` or `expr`.
    fn index_item(&mut self) -> Result<IndexItem, ParseError> {
        let ends_item = |k: &TokenKind| matches!(k, TokenKind::Comma | TokenKind::RBracket);
        match self.peek().kind {
            TokenKind::RBracket => {
                return Err(ParseError::new(self.peek().span.start, "empty index '[]'"));
            }
            TokenKind::Ellipsis => {
                self.bump();
                return Ok(IndexItem::Ellipsis);
            }
            TokenKind::None if ends_item(self.peek2()) => {
                self.bump();
                return Ok(IndexItem::NewAxis);
            }
            _ => {}
        }
        let start = if self.peek().kind == TokenKind::Colon {
            None
        } else {
            Some(self.expr()?)
        };
        if self.eat(&TokenKind::Colon).is_none() {
            return Ok(IndexItem::Expr(start.expect("an expression was parsed")));
        }
        let part = |p: &mut Self| -> Result<Option<Box<Expr>>, ParseError> {
            let k = &p.peek().kind;
            if ends_item(k) || *k == TokenKind::Colon {
                Ok(None)
            } else {
                p.expr().map(|e| Some(Box::new(e)))
            }
        };
        let stop = part(self)?;
        let step = if self.eat(&TokenKind::Colon).is_some() {
            part(self)?
        } else {
            None
        };
        if !ends_item(&self.peek().kind) {
            return Err(self.unexpected("',' or ']' after an index item"));
        }
        Ok(match (start, stop, step) {
            (None, None, None) => IndexItem::Full,
            (start, stop, step) => IndexItem::Slice {
                start: start.map(Box::new),
                stop,
                step,
            },
        })
    }

    /// `"." "T"` after `base`.
    fn attribute(&mut self, base: Expr) -> Result<Expr, ParseError> {
        self.bump();
        let token = self.bump();
        match &token.kind {
            TokenKind::Name(n) if n == "T" => {
                let span = base.span.to(token.span);
                Ok(Expr::new(ExprKind::Transpose(Box::new(base)), span))
            }
            TokenKind::Name(n) => Err(ParseError::new(
                token.span.start,
                format!("unknown attribute '{n}': only '.T' is supported"),
            )),
            other => Err(ParseError::new(
                token.span.start,
                format!("expected 'T' after '.' but found {}", other.describe()),
            )),
        }
    }

    /// `atom = number | string | True | False | None | name ["(" args ")"] | "(" ... ")"`.
    fn atom(&mut self) -> Result<Expr, ParseError> {
        match self.peek().kind {
            TokenKind::Name(_) if self.peek2() == &TokenKind::LParen => self.call(),
            TokenKind::LParen => self.parenthesized(),
            TokenKind::LBracket => self.list(),
            _ => self.leaf(),
        }
    }

    /// A literal, a keyword or a variable name.
    fn leaf(&mut self) -> Result<Expr, ParseError> {
        let kind = match &self.peek().kind {
            TokenKind::Int(i) => ExprKind::Number(Number::Int(*i)),
            TokenKind::Float(x) => ExprKind::Number(Number::Float(*x)),
            TokenKind::Str(s) => ExprKind::Str(s.clone()),
            TokenKind::True => ExprKind::Bool(true),
            TokenKind::False => ExprKind::Bool(false),
            TokenKind::None => ExprKind::None,
            TokenKind::Name(name) => ExprKind::Name(name.clone()),
            _ => return Err(self.unexpected("an expression")),
        };
        Ok(Expr::new(kind, self.bump().span))
    }

    /// `"(" [expr {"," expr} [","]] ")"`: a parenthesised expression or a tuple.
    fn parenthesized(&mut self) -> Result<Expr, ParseError> {
        let open = self.bump().span;
        let (mut items, trailing_comma) = self.comma_list(&TokenKind::RParen)?;
        let close = self.expect(&TokenKind::RParen)?;
        let span = open.to(close.span);
        if items.len() == 1 && !trailing_comma {
            let mut inner = items.remove(0);
            inner.span = span;
            return Ok(inner);
        }
        Ok(Expr::new(ExprKind::Tuple(items), span))
    }

    /// `"[" [expr {"," expr} [","]] "]"`: a list literal (the tensors of
    /// `concatenate([a, b])`, the sizes of `split(x, [2, 3])`).
    fn list(&mut self) -> Result<Expr, ParseError> {
        let open = self.bump().span;
        let (items, _) = self.comma_list(&TokenKind::RBracket)?;
        let close = self.expect(&TokenKind::RBracket)?;
        Ok(Expr::new(ExprKind::List(items), open.to(close.span)))
    }

    /// Expressions separated by commas up to (not including) `close`; also returns whether
    /// the list ended with a comma.
    fn comma_list(&mut self, close: &TokenKind) -> Result<(Vec<Expr>, bool), ParseError> {
        let mut items = Vec::new();
        let mut trailing_comma = false;
        while &self.peek().kind != close {
            items.push(self.expr()?);
            trailing_comma = self.eat(&TokenKind::Comma).is_some();
            if !trailing_comma {
                break;
            }
        }
        if &self.peek().kind != close {
            let what = format!("',' or '{}'", kind_text(close));
            return Err(self.unexpected(&what));
        }
        Ok((items, trailing_comma))
    }

    /// `name "(" [arg {"," arg} [","]] ")"` with `arg = expr | name "=" expr`; keyword
    /// arguments must follow the positional ones.
    fn call(&mut self) -> Result<Expr, ParseError> {
        let name_token = self.bump();
        let name = match name_token.kind {
            TokenKind::Name(name) => name,
            _ => String::new(),
        };
        self.bump();
        let (args, kwargs) = self.call_args()?;
        let close = self.expect(&TokenKind::RParen)?;
        let kind = ExprKind::Call {
            name,
            name_span: name_token.span,
            args,
            kwargs,
        };
        Ok(Expr::new(kind, name_token.span.to(close.span)))
    }

    /// The arguments of a call, up to (not including) the closing parenthesis.
    fn call_args(&mut self) -> Result<(Vec<Expr>, Vec<Keyword>), ParseError> {
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        while self.peek().kind != TokenKind::RParen {
            if let Some(keyword) = self.keyword()? {
                kwargs.push(keyword);
            } else if let Some(first) = kwargs.first() {
                let pos = self.peek().span.start;
                let msg = format!(
                    "positional argument follows keyword argument '{}'",
                    first.name
                );
                return Err(ParseError::new(pos, msg));
            } else {
                args.push(self.expr()?);
            }
            if self.eat(&TokenKind::Comma).is_none() {
                break;
            }
        }
        if self.peek().kind != TokenKind::RParen {
            return Err(self.unexpected("',' or ')'"));
        }
        Ok((args, kwargs))
    }

    /// `name "=" expr` if the next tokens start a keyword argument.
    fn keyword(&mut self) -> Result<Option<Keyword>, ParseError> {
        let TokenKind::Name(name) = &self.peek().kind else {
            return Ok(None);
        };
        if self.peek2() != &TokenKind::Assign {
            return Ok(None);
        }
        let name = name.clone();
        let name_span = self.bump().span;
        self.bump();
        let value = self.expr()?;
        Ok(Some(Keyword {
            name,
            name_span,
            value,
        }))
    }
}

/// The infix operator a token stands for, if any (`**` excluded: see [`Parser::power`]).
fn infix_op(kind: &TokenKind) -> Option<BinaryOp> {
    Some(match kind {
        TokenKind::Plus => BinaryOp::Add,
        TokenKind::Minus => BinaryOp::Sub,
        TokenKind::Star => BinaryOp::Mul,
        TokenKind::Slash => BinaryOp::Div,
        TokenKind::SlashSlash => BinaryOp::FloorDiv,
        TokenKind::Percent => BinaryOp::Mod,
        TokenKind::At => BinaryOp::MatMul,
        TokenKind::Lt => BinaryOp::Lt,
        TokenKind::Le => BinaryOp::Le,
        TokenKind::Gt => BinaryOp::Gt,
        TokenKind::Ge => BinaryOp::Ge,
        TokenKind::EqEq => BinaryOp::Eq,
        TokenKind::Ne => BinaryOp::Ne,
        TokenKind::Amp => BinaryOp::And,
        TokenKind::Pipe => BinaryOp::Or,
        TokenKind::Caret => BinaryOp::Xor,
        TokenKind::LtLt => BinaryOp::LeftShift,
        TokenKind::GtGt => BinaryOp::RightShift,
        _ => return None,
    })
}

/// The text of a punctuation token kind, for "expected ..." messages.
fn kind_text(kind: &TokenKind) -> String {
    let described = kind.describe();
    described.trim_matches('\'').to_string()
}

/// The node `lhs op rhs`, spanning both operands.
fn binary_node(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    let span = lhs.span.to(rhs.span);
    let kind = ExprKind::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    };
    Expr::new(kind, span)
}

// ---------------------------------------------------------------------------------------------
// The checking step.
// ---------------------------------------------------------------------------------------------

/// The arguments of a reduction call, read from its keywords.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceArgs {
    /// `None` to reduce over all axes (no `axis=` or `axis=None`), else the axes as written
    /// (possibly negative, possibly empty for `axis=()`).
    pub axes: Option<Vec<i64>>,
    /// `keepdims=True`.
    pub keepdims: bool,
    /// `ddof=` of `var` and `std` (numpy's delta degrees of freedom: the
    /// squared deviations are divided by the count minus `ddof`), else 0.
    pub ddof: u64,
}

/// Validates a parsed expression: every call names a known [`Func`] with the right
/// arguments, and strings, tuples and `None` appear only where they mean something
/// (`cast(x, "f32")`, `axis=(0, 1)`, `axis=None`). Walks the tree without recursion.
pub fn check(expr: &Expr) -> Result<(), ParseError> {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Name(_) => {}
            ExprKind::Str(_) => {
                let msg = "a string is only allowed as the dtype of cast(), e.g. cast(x, \"f32\")";
                return Err(ParseError::new(e.span.start, msg));
            }
            ExprKind::None => {
                let msg = "'None' is only allowed in an index (x[None]) or as axis=None";
                return Err(ParseError::new(e.span.start, msg));
            }
            ExprKind::Tuple(_) => {
                let msg = "a tuple is only allowed as the value of axis=, e.g. axis=(0, 1)";
                return Err(ParseError::new(e.span.start, msg));
            }
            ExprKind::List(_) => {
                let msg = "a list is only allowed as the tensors of concatenate() / stack() \
                           or the sizes of split(), e.g. concatenate([a, b])";
                return Err(ParseError::new(e.span.start, msg));
            }
            ExprKind::Call {
                name,
                name_span,
                args,
                kwargs,
            } => {
                let func = resolve(name, *name_span)?;
                stack.extend(check_call(func, e.span, args, kwargs)?);
            }
            ExprKind::Unary { .. }
            | ExprKind::Binary { .. }
            | ExprKind::Index { .. }
            | ExprKind::Transpose(_) => stack.extend(e.children()),
        }
    }
    Ok(())
}

/// The function called `name`, or an "unknown function" error with a suggestion.
fn resolve(name: &str, span: Span) -> Result<Func, ParseError> {
    if let Some(func) = Func::from_name(name) {
        return Ok(func);
    }
    let close = Func::ALL
        .iter()
        .map(|f| (edit_distance(name, f.name()), f.name()))
        .filter(|(d, _)| *d <= 1 || (*d == 2 && name.len() >= 5))
        .min();
    let hint = close.map_or(String::new(), |(_, n)| format!(" (did you mean '{n}'?)"));
    Err(ParseError::new(
        span.start,
        format!("unknown function '{name}'{hint}"),
    ))
}

/// Checks the arguments of a call of `func`; returns the arguments that are ordinary
/// expressions, still to be checked.
fn check_call<'a>(
    func: Func,
    call_span: Span,
    args: &'a [Expr],
    kwargs: &'a [Keyword],
) -> Result<Vec<&'a Expr>, ParseError> {
    check_arity(func, call_span, args)?;
    match func.signature() {
        Signature::Fixed(_) => {
            if let Some(k) = kwargs.first() {
                let msg = format!("{}() takes no keyword arguments", func.name());
                return Err(ParseError::new(k.name_span.start, msg));
            }
            Ok(args.iter().collect())
        }
        Signature::Reduction => {
            reduce_args(func, kwargs)?;
            Ok(args.iter().collect())
        }
        Signature::Cast => {
            if let Some(k) = kwargs.first() {
                let msg = "cast() takes no keyword arguments";
                return Err(ParseError::new(k.name_span.start, msg));
            }
            cast_dtype(&args[1])?;
            Ok(vec![&args[0]])
        }
        Signature::Update => {
            if let Some(k) = kwargs.first() {
                let msg = format!("{}() takes no keyword arguments", func.name());
                return Err(ParseError::new(k.name_span.start, msg));
            }
            if !matches!(args[0].kind, ExprKind::Index { .. }) {
                let msg = format!(
                    "the first argument of {}() must be an indexed expression such as x[1:-1]",
                    func.name()
                );
                return Err(ParseError::new(args[0].span.start, msg));
            }
            Ok(args.iter().collect())
        }
        Signature::Axis(_) => {
            axis_args(func, kwargs)?;
            // The index may be a list of integer literals: take(x, [0, -1]).
            let mut rest = vec![&args[0]];
            if int_list(&args[1])?.is_none() {
                rest.push(&args[1]);
            }
            rest.extend(&args[2..]);
            Ok(rest)
        }
        Signature::Join => {
            axis_args(func, kwargs)?;
            let ExprKind::List(items) = &args[0].kind else {
                let msg = format!(
                    "{}() takes a list of tensors, e.g. {}([a, b], axis=0)",
                    func.name(),
                    func.name()
                );
                return Err(ParseError::new(args[0].span.start, msg));
            };
            if items.is_empty() {
                let msg = format!("{}() needs at least one tensor", func.name());
                return Err(ParseError::new(args[0].span.start, msg));
            }
            Ok(items.iter().collect())
        }
        Signature::Tensordot => {
            tensordot_args(kwargs)?;
            Ok(args.iter().collect())
        }
        Signature::Alloc => {
            if let Some(k) = kwargs.first() {
                let msg = "alloc() takes no keyword arguments";
                return Err(ParseError::new(k.name_span.start, msg));
            }
            Ok(args.iter().collect())
        }
        Signature::Split => {
            let a = axis_args(func, kwargs)?;
            if a.output.is_none() {
                let msg = "split() needs output= to pick its part, e.g. split(x, [2, 3], output=1)";
                return Err(ParseError::new(call_span.start, msg));
            }
            let mut rest = vec![&args[0]];
            if int_list(&args[1])?.is_none() {
                rest.push(&args[1]);
            }
            Ok(rest)
        }
    }
}

/// The integer literals of a list `[2, -3]` (the sizes of `split`, the
/// index of `take`), or `None` when `e` is not a list literal (then it is
/// an integer tensor expression).
pub fn int_list(e: &Expr) -> Result<Option<Vec<i64>>, ParseError> {
    let ExprKind::List(items) = &e.kind else {
        return Ok(None);
    };
    if items.is_empty() {
        let msg = "an empty list has no dtype: use an integer tensor";
        return Err(ParseError::new(e.span.start, msg));
    }
    items
        .iter()
        .map(|item| match &item.kind {
            ExprKind::Number(Number::Int(i)) => Ok(*i),
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand,
            } if matches!(operand.kind, ExprKind::Number(Number::Int(_))) => match operand.kind {
                ExprKind::Number(Number::Int(i)) => Ok(-i),
                _ => unreachable!("matched above"),
            },
            _ => Err(ParseError::new(
                item.span.start,
                "a list here must hold integer literals, e.g. [2, -3]; else use an integer tensor",
            )),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// The keyword arguments of `take`, the indexed updates, `concatenate`,
/// `stack` and `split`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisArgs {
    /// `axis=` (default 0; negative counts from the end).
    pub axis: i64,
    /// `output=` (only `split`): which part.
    pub output: Option<i64>,
}

/// Reads and validates the keyword arguments of `func` (signature
/// [`Signature::Axis`], [`Signature::Join`] or [`Signature::Split`]):
/// `axis=` an integer, and for `split` `output=` an integer; each at most once.
pub fn axis_args(func: Func, kwargs: &[Keyword]) -> Result<AxisArgs, ParseError> {
    let mut out = AxisArgs {
        axis: 0,
        output: None,
    };
    let allowed = if func.signature() == Signature::Split {
        "axis= or output="
    } else {
        "axis="
    };
    let mut seen: Vec<&str> = Vec::new();
    for k in kwargs {
        let pos = k.name_span.start;
        if seen.contains(&k.name.as_str()) {
            let msg = format!("{}() got keyword argument '{}' twice", func.name(), k.name);
            return Err(ParseError::new(pos, msg));
        }
        seen.push(&k.name);
        match k.name.as_str() {
            "axis" => out.axis = axis_int(&k.value)?,
            "output" if func.signature() == Signature::Split => {
                out.output = Some(match &k.value.kind {
                    ExprKind::Number(Number::Int(i)) => *i,
                    _ => {
                        let msg = "output= must be a non-negative integer";
                        return Err(ParseError::new(k.value.span.start, msg));
                    }
                })
            }
            other => {
                let msg = format!(
                    "{}() got an unexpected keyword argument '{other}'; expected {allowed}",
                    func.name()
                );
                return Err(ParseError::new(pos, msg));
            }
        }
    }
    Ok(out)
}

/// The `axes=` of `tensordot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TensordotAxes {
    /// `axes=n`: the last `n` axes of `a` with the first `n` of `b`.
    Count(i64),
    /// `axes=([..], [..])`: the paired axes of `a` and `b`.
    Pairs(Vec<i64>, Vec<i64>),
}

/// Reads and validates the keyword arguments of `tensordot`: at most one
/// `axes=`, a non-negative integer or a pair of integer lists (default 2).
pub fn tensordot_args(kwargs: &[Keyword]) -> Result<TensordotAxes, ParseError> {
    let shape = "axes= must be a non-negative integer or a pair of integer lists, \
                 e.g. axes=2 or axes=([1, 0], [0, 1])";
    let mut out = TensordotAxes::Count(2);
    for (i, k) in kwargs.iter().enumerate() {
        if k.name != "axes" {
            let msg = format!(
                "tensordot() got an unexpected keyword argument '{}'; expected axes=",
                k.name
            );
            return Err(ParseError::new(k.name_span.start, msg));
        }
        if i > 0 {
            let msg = "tensordot() got keyword argument 'axes' twice";
            return Err(ParseError::new(k.name_span.start, msg));
        }
        let bad = || ParseError::new(k.value.span.start, shape);
        out = match &k.value.kind {
            ExprKind::Number(Number::Int(n)) if *n >= 0 => TensordotAxes::Count(*n),
            ExprKind::Tuple(items) | ExprKind::List(items) if items.len() == 2 => {
                let list = |e: &Expr| -> Result<Vec<i64>, ParseError> {
                    match &e.kind {
                        ExprKind::List(l) if l.is_empty() => Ok(Vec::new()),
                        ExprKind::List(_) => Ok(int_list(e)?.expect("a list")),
                        _ => Err(bad()),
                    }
                };
                TensordotAxes::Pairs(list(&items[0])?, list(&items[1])?)
            }
            _ => return Err(bad()),
        };
    }
    Ok(out)
}

/// Checks the number of positional arguments of a call of `func`.
fn check_arity(func: Func, call_span: Span, args: &[Expr]) -> Result<(), ParseError> {
    let expected = func.arity();
    if args.len() == expected || (func.signature() == Signature::Alloc && args.len() > expected) {
        return Ok(());
    }
    let plural = if expected == 1 { "" } else { "s" };
    let positional = if func.is_reduction() {
        " positional"
    } else {
        ""
    };
    let keywords = if func.is_reduction() {
        " (plus axis= and keepdims=)"
    } else {
        ""
    };
    let given = match args.len() {
        1 => "1 was given".to_string(),
        n => format!("{n} were given"),
    };
    let message = format!(
        "{}() takes {expected}{positional} argument{plural}{keywords} but {given}",
        func.name()
    );
    // Point at the first extra argument, or at the function name if some are missing.
    let pos = args.get(expected).map_or(call_span.start, |a| a.span.start);
    Err(ParseError::new(pos, message))
}

/// Reads and validates the keyword arguments of a reduction `func` (`axis=` an integer, a
/// tuple of integers or `None`; `keepdims=` `True` or `False`; for `var` and `std` also
/// `ddof=` a non-negative integer; each at most once).
pub fn reduce_args(func: Func, kwargs: &[Keyword]) -> Result<ReduceArgs, ParseError> {
    let mut out = ReduceArgs {
        axes: None,
        keepdims: false,
        ddof: 0,
    };
    let takes_ddof = matches!(func, Func::Var | Func::Std);
    let mut seen: Vec<&str> = Vec::new();
    for k in kwargs {
        let pos = k.name_span.start;
        if seen.contains(&k.name.as_str()) {
            let msg = format!("{}() got keyword argument '{}' twice", func.name(), k.name);
            return Err(ParseError::new(pos, msg));
        }
        seen.push(&k.name);
        match k.name.as_str() {
            "axis" => out.axes = axis_value(&k.value)?,
            "keepdims" => out.keepdims = keepdims_value(&k.value)?,
            "ddof" if takes_ddof => out.ddof = ddof_value(&k.value)?,
            other => {
                let expected = if takes_ddof {
                    "axis=, keepdims= or ddof="
                } else {
                    "axis= or keepdims="
                };
                let msg = format!(
                    "{}() got an unexpected keyword argument '{other}'; expected {expected}",
                    func.name()
                );
                return Err(ParseError::new(pos, msg));
            }
        }
    }
    Ok(out)
}

/// The value of `axis=`: `None`, an integer or a tuple of integers.
fn axis_value(value: &Expr) -> Result<Option<Vec<i64>>, ParseError> {
    match &value.kind {
        ExprKind::None => Ok(None),
        ExprKind::Tuple(items) => items
            .iter()
            .map(axis_int)
            .collect::<Result<_, _>>()
            .map(Some),
        _ => Ok(Some(vec![axis_int(value)?])),
    }
}

/// One axis: an integer literal, possibly negated.
fn axis_int(value: &Expr) -> Result<i64, ParseError> {
    match &value.kind {
        ExprKind::Number(Number::Int(i)) => return Ok(*i),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => {
            if let ExprKind::Number(Number::Int(i)) = operand.kind {
                return Ok(-i);
            }
        }
        _ => {}
    }
    let msg = "axis= must be an integer, a tuple of integers, or None";
    Err(ParseError::new(value.span.start, msg))
}

/// The value of `ddof=`: a non-negative integer literal.
fn ddof_value(value: &Expr) -> Result<u64, ParseError> {
    match value.kind {
        ExprKind::Number(Number::Int(i)) if i >= 0 => Ok(i as u64),
        _ => Err(ParseError::new(
            value.span.start,
            "ddof= must be a non-negative integer",
        )),
    }
}

/// The value of `keepdims=`: `True` or `False`.
fn keepdims_value(value: &Expr) -> Result<bool, ParseError> {
    match value.kind {
        ExprKind::Bool(b) => Ok(b),
        _ => Err(ParseError::new(
            value.span.start,
            "keepdims= must be True or False",
        )),
    }
}

/// The dtype argument of `cast`: a string literal naming one of [`DTYPES`].
pub fn cast_dtype(value: &Expr) -> Result<&str, ParseError> {
    let pos = value.span.start;
    let ExprKind::Str(dtype) = &value.kind else {
        let msg = "the dtype of cast() must be a string literal such as \"f32\"";
        return Err(ParseError::new(pos, msg));
    };
    if !DTYPES.contains(&dtype.as_str()) {
        let msg = format!(
            "unknown dtype '{dtype}'; expected one of {}",
            DTYPES.join(", ")
        );
        return Err(ParseError::new(pos, msg));
    }
    Ok(dtype)
}

/// The Levenshtein distance between two short ASCII-ish strings (for suggestions).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}
