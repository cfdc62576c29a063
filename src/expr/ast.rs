//! The syntax tree of the expression language, source positions and the error type.
//!
//! Invariants:
//! - every [`Expr`] carries the byte range ([`Span`]) of its source text; parentheses written
//!   around a node are included in its span;
//! - trees may be very deep (a flat chain `x+x+...+x` is a left-leaning tree with one level per
//!   operator), so everything here that walks a tree ([`Drop`], [`Expr::fold`],
//!   [`Expr::preorder`], [`Display`](fmt::Display), [`free_variables`]) uses an explicit stack,
//!   never recursion. The derived `Clone`, `PartialEq` and `Debug` do recurse: use them on
//!   small trees only (tests).
//!
//! The function vocabulary ([`Func`]) lives here too: the parser accepts any name in call
//! position, and the checking step ([`check`](super::check)) resolves it with
//! [`Func::from_name`].

use std::fmt;

/// A byte range `start..end` in the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset just past the last character.
    pub end: usize,
}

impl Span {
    /// The span `start..end`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// An error in the expression or declaration text, at a byte offset of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the error in the source text (`src.len()` for "end of input").
    pub pos: usize,
    /// What went wrong, without the position (e.g. "expected ')' but found end of input").
    pub message: String,
}

impl ParseError {
    /// An error at byte offset `pos`.
    pub fn new(pos: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            pos,
            message: message.into(),
        }
    }

    /// The 1-based line and column (counted in characters) of the error in `src`.
    pub fn line_col(&self, src: &str) -> (usize, usize) {
        let pos = floor_char_boundary(src, self.pos);
        let before = &src[..pos];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[line_start..].chars().count() + 1)
    }

    /// The error message followed by the offending source line and a caret under the position:
    ///
    /// ```text
    /// parse error at position 7: expected ')' but found end of input
    ///   exp((x)
    ///          ^
    /// ```
    pub fn render(&self, src: &str) -> String {
        let pos = floor_char_boundary(src, self.pos);
        let line_start = src[..pos].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[pos..].find('\n').map_or(src.len(), |i| pos + i);
        let line = &src[line_start..line_end];
        // Keep tabs so that the caret lines up with the source line in a terminal.
        let pad: String = src[line_start..pos]
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{self}\n  {line}\n  {pad}^")
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parse error at position {}: {}", self.pos, self.message)
    }
}

impl std::error::Error for ParseError {}

/// The largest char boundary of `s` that is `<= pos` (positions past the end clamp to the end).
fn floor_char_boundary(s: &str, pos: usize) -> usize {
    let mut pos = pos.min(s.len());
    while !s.is_char_boundary(pos) {
        pos -= 1;
    }
    pos
}

/// A number literal, remembering whether it was written as an integer or as a float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// Written without `.` or exponent, e.g. `2`: the type system gives it an integer type.
    Int(i64),
    /// Written with `.` or an exponent, e.g. `2.0`, `.5`, `1e-3`.
    Float(f64),
}

impl Number {
    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(x) => x,
        }
    }
}

/// A prefix operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Pos,
    /// `~x` (logical / bitwise not)
    Not,
}

impl UnaryOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Pos => "+",
            UnaryOp::Not => "~",
        }
    }
}

/// An infix operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (true division)
    Div,
    /// `//` (floor division)
    FloorDiv,
    /// `%`
    Mod,
    /// `**` (right-associative)
    Pow,
    /// `@` (matrix product)
    MatMul,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `&` (logical / bitwise and)
    And,
    /// `|` (logical / bitwise or)
    Or,
    /// `^` (logical / bitwise xor, as in numexpr and numpy; powers are `**`)
    Xor,
    /// `<<` (integer left shift)
    LeftShift,
    /// `>>` (integer arithmetic right shift)
    RightShift,
}

impl BinaryOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::FloorDiv => "//",
            BinaryOp::Mod => "%",
            BinaryOp::Pow => "**",
            BinaryOp::MatMul => "@",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::And => "&",
            BinaryOp::Or => "|",
            BinaryOp::Xor => "^",
            BinaryOp::LeftShift => "<<",
            BinaryOp::RightShift => ">>",
        }
    }

    /// Binding strength, higher binds tighter: `|` 1, `^` 2, `&` 3, comparisons 4,
    /// `<< >>` 5, `+ -` 6, `* / // % @` 7, `**` 9 (prefix operators sit at 8).
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::Xor => 2,
            BinaryOp::And => 3,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 4,
            BinaryOp::Eq | BinaryOp::Ne => 4,
            BinaryOp::LeftShift | BinaryOp::RightShift => 5,
            BinaryOp::Add | BinaryOp::Sub => 6,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::FloorDiv | BinaryOp::Mod => 7,
            BinaryOp::MatMul => 7,
            BinaryOp::Pow => 9,
        }
    }

    /// Whether this is one of `< <= > >= == !=`.
    pub fn is_comparison(self) -> bool {
        self.precedence() == 4
    }
}

/// A keyword argument `name=value` of a call.
#[derive(Clone, Debug, PartialEq)]
pub struct Keyword {
    /// The keyword, e.g. `axis`.
    pub name: String,
    /// Where the keyword name is written.
    pub name_span: Span,
    /// The value after `=`.
    pub value: Expr,
}

/// One item of an index expression `x[...]`.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexItem {
    /// `:` (also `::`) keeps an existing dimension whole.
    Full,
    /// `None` inserts a new broadcast dimension of size 1.
    NewAxis,
    /// `...` stands for as many `:` as the other items leave dimensions.
    Ellipsis,
    /// `start:stop:step` with at least one part written (a missing part takes
    /// numpy's default).
    Slice {
        /// The expression before the first `:`.
        start: Option<Box<Expr>>,
        /// The expression between the colons.
        stop: Option<Box<Expr>>,
        /// The expression after the second `:`.
        step: Option<Box<Expr>>,
    },
    /// A single expression: an integer (literal or 0-d integer tensor) picks
    /// one position and drops the dimension; an integer tensor of one or
    /// more dimensions (`x[idx]`) or a boolean one (`x[mask]`) is advanced
    /// indexing (built by `tensor::from_expr` as a gather or a mask).
    Expr(Expr),
}

impl IndexItem {
    /// The expressions written in this item, in source order.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            IndexItem::Full | IndexItem::NewAxis | IndexItem::Ellipsis => Vec::new(),
            IndexItem::Slice { start, stop, step } => [start, stop, step]
                .into_iter()
                .flatten()
                .map(|b| &**b)
                .collect(),
            IndexItem::Expr(e) => vec![e],
        }
    }
}

/// An expression node: what it is and where it is written.
///
/// Dropping is iterative (no stack overflow on deep trees); because of that `Drop`
/// implementation, match on `&expr.kind` rather than moving fields out of an `Expr`.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// The node itself.
    pub kind: ExprKind,
    /// Its source text, including any parentheses written around it.
    pub span: Span,
}

/// The kinds of expression node.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A number literal.
    Number(Number),
    /// A string literal (without quotes), e.g. the dtype in `cast(x, "f32")`.
    Str(String),
    /// `True` or `False`.
    Bool(bool),
    /// The keyword `None` (meaningful only as `axis=None`; in an index it becomes
    /// [`IndexItem::NewAxis`]).
    None,
    /// An input variable.
    Name(String),
    /// A parenthesised tuple `(a, b)`, `(a,)` or `()` (meaningful only as `axis=`).
    Tuple(Vec<Expr>),
    /// A list literal `[a, b, c]` (meaningful only as the tensors of
    /// `concatenate` / `stack` and the sizes of `split`).
    List(Vec<Expr>),
    /// A prefix operation.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// Its operand.
        operand: Box<Expr>,
    },
    /// An infix operation.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
    },
    /// A call `name(args..., key=value...)`; the name is resolved by [`Func::from_name`].
    Call {
        /// The function name as written.
        name: String,
        /// Where the function name is written.
        name_span: Span,
        /// Positional arguments, in order.
        args: Vec<Expr>,
        /// Keyword arguments, in order (they follow all positional arguments).
        kwargs: Vec<Keyword>,
    },
    /// `base[items]`: basic indexing items (`:`, slices, integers, `None`,
    /// `...`) or tensor expressions.
    Index {
        /// The indexed expression.
        base: Box<Expr>,
        /// The index items, in order.
        items: Vec<IndexItem>,
    },
    /// `base.T` (reverse all axes, like `transpose(base)`).
    Transpose(Box<Expr>),
}

impl Expr {
    /// A node of the given kind and span.
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }

    /// The direct sub-expressions in source order: operands, positional arguments then
    /// keyword values, tuple items, the base of an index or `.T`.
    pub fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::Number(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::None
            | ExprKind::Name(_) => Vec::new(),
            ExprKind::Tuple(items) | ExprKind::List(items) => items.iter().collect(),
            ExprKind::Unary { operand, .. } => vec![operand],
            ExprKind::Binary { lhs, rhs, .. } => vec![lhs, rhs],
            ExprKind::Call { args, kwargs, .. } => {
                args.iter().chain(kwargs.iter().map(|k| &k.value)).collect()
            }
            ExprKind::Index { base, items } => std::iter::once(&**base)
                .chain(items.iter().flat_map(IndexItem::exprs))
                .collect(),
            ExprKind::Transpose(base) => vec![base],
        }
    }

    /// All nodes in pre-order (a node before its children, children in source order).
    pub fn preorder(&self) -> Vec<&Expr> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            out.push(e);
            stack.extend(e.children().into_iter().rev());
        }
        out
    }

    /// Bottom-up evaluation without recursion: `f(node, results of its children)` is called
    /// on every node after its [`children`](Expr::children), whose results come in the same
    /// order. The first error stops the walk.
    pub fn fold<T, E>(&self, mut f: impl FnMut(&Expr, Vec<T>) -> Result<T, E>) -> Result<T, E> {
        // (node, children already pushed?)
        let mut stack: Vec<(&Expr, bool)> = vec![(self, false)];
        let mut results: Vec<T> = Vec::new();
        while let Some((e, expanded)) = stack.pop() {
            let children = e.children();
            if expanded || children.is_empty() {
                let args = results.split_off(results.len() - children.len());
                results.push(f(e, args)?);
            } else {
                stack.push((e, true));
                stack.extend(children.into_iter().rev().map(|c| (c, false)));
            }
        }
        // The root's result is the only one left.
        Ok(results
            .pop()
            .expect("fold produces one result for the root"))
    }
}

impl Drop for Expr {
    fn drop(&mut self) {
        let mut stack = Vec::new();
        take_children(&mut self.kind, &mut stack);
        while let Some(mut e) = stack.pop() {
            // `e` is dropped at the end of this iteration with no children left.
            take_children(&mut e.kind, &mut stack);
        }
    }
}

/// Moves the children of `kind` onto `stack` (so that dropping `kind` does not recurse).
fn take_children(kind: &mut ExprKind, stack: &mut Vec<Expr>) {
    let has_children = !matches!(
        kind,
        ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::None
    ) && !matches!(kind, ExprKind::Name(_));
    if !has_children {
        return;
    }
    match std::mem::replace(kind, ExprKind::None) {
        ExprKind::Tuple(items) | ExprKind::List(items) => stack.extend(items),
        ExprKind::Unary { operand, .. } => stack.push(*operand),
        ExprKind::Binary { lhs, rhs, .. } => {
            stack.push(*lhs);
            stack.push(*rhs);
        }
        ExprKind::Call { args, kwargs, .. } => {
            stack.extend(args);
            stack.extend(kwargs.into_iter().map(|k| k.value));
        }
        ExprKind::Index { base, items } => {
            stack.push(*base);
            for item in items {
                match item {
                    IndexItem::Slice { start, stop, step } => {
                        stack.extend([start, stop, step].into_iter().flatten().map(|b| *b))
                    }
                    IndexItem::Expr(e) => stack.push(e),
                    IndexItem::Full | IndexItem::NewAxis | IndexItem::Ellipsis => {}
                }
            }
        }
        ExprKind::Transpose(base) => stack.push(*base),
        ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::None
        | ExprKind::Name(_) => {}
    }
}

/// One step of the iterative printer: a node still to print, or text to emit.
enum Piece<'a> {
    Node(&'a Expr),
    Text(&'a str),
}

/// Prints the expression fully parenthesised (`-x**2` prints as `(-(x ** 2))`), so that the
/// tree structure is visible; the output parses back to the same tree.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut stack = vec![Piece::Node(self)];
        while let Some(piece) = stack.pop() {
            match piece {
                Piece::Text(t) => f.write_str(t)?,
                Piece::Node(e) => print_node(e, f, &mut stack)?,
            }
        }
        Ok(())
    }
}

/// Prints a leaf directly, or pushes the pieces of an inner node (in reverse order).
fn print_node<'a>(
    e: &'a Expr,
    f: &mut fmt::Formatter<'_>,
    stack: &mut Vec<Piece<'a>>,
) -> fmt::Result {
    let mut pieces: Vec<Piece<'a>> = Vec::new();
    match &e.kind {
        ExprKind::Number(Number::Int(i)) => return write!(f, "{i}"),
        // `{:?}` keeps a `.0` or an exponent, so a float prints as a float literal.
        ExprKind::Number(Number::Float(x)) => return write!(f, "{x:?}"),
        ExprKind::Str(s) if s.contains('"') => return write!(f, "'{s}'"),
        ExprKind::Str(s) => return write!(f, "\"{s}\""),
        ExprKind::Bool(true) => return f.write_str("True"),
        ExprKind::Bool(false) => return f.write_str("False"),
        ExprKind::None => return f.write_str("None"),
        ExprKind::Name(n) => return f.write_str(n),
        ExprKind::Tuple(items) => {
            pieces.push(Piece::Text("("));
            push_list(&mut pieces, items.iter().map(Piece::Node));
            if items.len() == 1 {
                pieces.push(Piece::Text(","));
            }
            pieces.push(Piece::Text(")"));
        }
        ExprKind::List(items) => {
            pieces.push(Piece::Text("["));
            push_list(&mut pieces, items.iter().map(Piece::Node));
            pieces.push(Piece::Text("]"));
        }
        ExprKind::Unary { op, operand } => {
            pieces.extend([Piece::Text("("), Piece::Text(op.symbol())]);
            pieces.extend([Piece::Node(operand), Piece::Text(")")]);
        }
        ExprKind::Binary { op, lhs, rhs } => {
            pieces.extend([Piece::Text("("), Piece::Node(lhs), Piece::Text(" ")]);
            pieces.extend([Piece::Text(op.symbol()), Piece::Text(" ")]);
            pieces.extend([Piece::Node(rhs), Piece::Text(")")]);
        }
        ExprKind::Call {
            name, args, kwargs, ..
        } => {
            pieces.extend([Piece::Text(name), Piece::Text("(")]);
            let kw = kwargs
                .iter()
                .map(|k| vec![Piece::Text(&k.name), Piece::Text("=")]);
            let kw = kw.zip(kwargs.iter()).map(|(mut p, k)| {
                p.push(Piece::Node(&k.value));
                p
            });
            let all = args.iter().map(|a| vec![Piece::Node(a)]).chain(kw);
            for (i, group) in all.enumerate() {
                if i > 0 {
                    pieces.push(Piece::Text(", "));
                }
                pieces.extend(group);
            }
            pieces.push(Piece::Text(")"));
        }
        ExprKind::Index { base, items } => {
            push_base(&mut pieces, base);
            pieces.push(Piece::Text("["));
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    pieces.push(Piece::Text(", "));
                }
                match item {
                    IndexItem::Full => pieces.push(Piece::Text(":")),
                    IndexItem::NewAxis => pieces.push(Piece::Text("None")),
                    IndexItem::Ellipsis => pieces.push(Piece::Text("...")),
                    IndexItem::Expr(e) => pieces.push(Piece::Node(e)),
                    IndexItem::Slice { start, stop, step } => {
                        pieces.extend(start.iter().map(|b| Piece::Node(b)));
                        pieces.push(Piece::Text(":"));
                        pieces.extend(stop.iter().map(|b| Piece::Node(b)));
                        if let Some(step) = step {
                            pieces.push(Piece::Text(":"));
                            pieces.push(Piece::Node(step));
                        }
                    }
                }
            }
            pieces.push(Piece::Text("]"));
        }
        ExprKind::Transpose(base) => {
            push_base(&mut pieces, base);
            pieces.push(Piece::Text(".T"));
        }
    }
    stack.extend(pieces.into_iter().rev());
    Ok(())
}

/// Pushes the base of `x[...]` or `x.T`, parenthesised if it is a number (`(2).T`, since
/// `2.T` would not lex).
fn push_base<'a>(pieces: &mut Vec<Piece<'a>>, base: &'a Expr) {
    if matches!(base.kind, ExprKind::Number(_)) {
        pieces.extend([Piece::Text("("), Piece::Node(base), Piece::Text(")")]);
    } else {
        pieces.push(Piece::Node(base));
    }
}

/// Pushes `items` separated by `", "`.
fn push_list<'a>(pieces: &mut Vec<Piece<'a>>, items: impl Iterator<Item = Piece<'a>>) {
    for (i, item) in items.enumerate() {
        if i > 0 {
            pieces.push(Piece::Text(", "));
        }
        pieces.push(item);
    }
}

/// The input variables of `expr`, each once, in order of first appearance in the source.
/// Function names and keyword names are not variables.
pub fn free_variables(expr: &Expr) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for e in expr.preorder() {
        if let ExprKind::Name(n) = &e.kind {
            if seen.insert(n.as_str()) {
                out.push(n.clone());
            }
        }
    }
    out
}

/// How a function uses its arguments (see [`Func::signature`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signature {
    /// Exactly this many tensor arguments, no keywords (elementwise functions, `dot`,
    /// `transpose`).
    Fixed(usize),
    /// One tensor argument plus optional `axis=` and `keepdims=` keywords.
    Reduction,
    /// `cast(x, "dtype")`: one tensor and a dtype string literal.
    Cast,
    /// `set_subtensor(x[...], y)`: an indexed expression and a tensor.
    Update,
    /// Exactly this many tensor arguments plus an optional integer `axis=`
    /// (default 0): `take`, the indexed updates.
    Axis(usize),
    /// A list literal of tensors plus an optional integer `axis=` (default
    /// 0): `concatenate([a, b], axis=1)`, `stack`.
    Join,
    /// `split(x, sizes, axis=k, output=j)`: `sizes` a list of integer
    /// literals or an integer vector expression; output `j` of the split.
    Split,
    /// `tensordot(a, b, axes=2)` or `tensordot(a, b, axes=([1, 0], [0, 1]))`:
    /// two tensors plus an optional `axes=` (default 2).
    Tensordot,
    /// `alloc(x, n, m)`: one tensor followed by any number of 0-d integer
    /// sizes (integer literals or expressions), one per output dimension.
    Alloc,
}

macro_rules! funcs {
    ($($variant:ident => $name:literal, $sig:expr;)*) => {
        /// A function that may be called in an expression.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Func {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl Func {
            /// Every function, in the order of the documentation.
            pub const ALL: &'static [Func] = &[$(Func::$variant),*];

            /// The name as written in expressions.
            pub fn name(self) -> &'static str {
                match self {
                    $(Func::$variant => $name,)*
                }
            }

            /// How many and which arguments it takes.
            pub fn signature(self) -> Signature {
                use Signature::*;
                match self {
                    $(Func::$variant => $sig,)*
                }
            }
        }
    };
}

funcs! {
    Exp => "exp", Fixed(1);
    Exp2 => "exp2", Fixed(1);
    Expm1 => "expm1", Fixed(1);
    Log => "log", Fixed(1);
    Log2 => "log2", Fixed(1);
    Log10 => "log10", Fixed(1);
    Log1p => "log1p", Fixed(1);
    Sqrt => "sqrt", Fixed(1);
    Sqr => "sqr", Fixed(1);
    Abs => "abs", Fixed(1);
    Sign => "sign", Fixed(1);
    Sin => "sin", Fixed(1);
    Cos => "cos", Fixed(1);
    Tan => "tan", Fixed(1);
    Arcsin => "arcsin", Fixed(1);
    Arccos => "arccos", Fixed(1);
    Arctan => "arctan", Fixed(1);
    Sinh => "sinh", Fixed(1);
    Cosh => "cosh", Fixed(1);
    Tanh => "tanh", Fixed(1);
    Arcsinh => "arcsinh", Fixed(1);
    Arccosh => "arccosh", Fixed(1);
    Arctanh => "arctanh", Fixed(1);
    Sigmoid => "sigmoid", Fixed(1);
    Softplus => "softplus", Fixed(1);
    Log1mexp => "log1mexp", Fixed(1);
    Erf => "erf", Fixed(1);
    Erfc => "erfc", Fixed(1);
    Floor => "floor", Fixed(1);
    Ceil => "ceil", Fixed(1);
    Round => "round", Fixed(1);
    Trunc => "trunc", Fixed(1);
    Isnan => "isnan", Fixed(1);
    Isinf => "isinf", Fixed(1);
    Isfinite => "isfinite", Fixed(1);
    Arctan2 => "arctan2", Fixed(2);
    Hypot => "hypot", Fixed(2);
    SigmoidBinaryCrossentropy => "sigmoid_binary_crossentropy", Fixed(2);
    Copysign => "copysign", Fixed(2);
    Fmod => "fmod", Fixed(2);
    Maximum => "maximum", Fixed(2);
    Minimum => "minimum", Fixed(2);
    Where => "where", Fixed(3);
    Clip => "clip", Fixed(3);
    Sum => "sum", Reduction;
    Prod => "prod", Reduction;
    Max => "max", Reduction;
    Min => "min", Reduction;
    Mean => "mean", Reduction;
    Var => "var", Reduction;
    Std => "std", Reduction;
    All => "all", Reduction;
    Any => "any", Reduction;
    Argmax => "argmax", Reduction;
    Argmin => "argmin", Reduction;
    Softmax => "softmax", Reduction;
    LogSoftmax => "log_softmax", Reduction;
    LogSumExp => "logsumexp", Reduction;
    Cumsum => "cumsum", Reduction;
    Cumprod => "cumprod", Reduction;
    Dot => "dot", Fixed(2);
    Matmul => "matmul", Fixed(2);
    Tensordot => "tensordot", Tensordot;
    Transpose => "transpose", Fixed(1);
    Cast => "cast", Cast;
    SetSubtensor => "set_subtensor", Update;
    IncSubtensor => "inc_subtensor", Update;
    Take => "take", Axis(2);
    AdvancedIncSubtensor => "advanced_inc_subtensor", Axis(3);
    AdvancedSetSubtensor => "advanced_set_subtensor", Axis(3);
    BooleanMask => "boolean_mask", Fixed(2);
    Concatenate => "concatenate", Join;
    Stack => "stack", Join;
    Split => "split", Split;
    Alloc => "alloc", Alloc;
    Reciprocal => "reciprocal", Fixed(1);
    Second => "second", Fixed(2);
}

impl Func {
    /// The function called `name`, if any.
    pub fn from_name(name: &str) -> Option<Func> {
        Func::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// Whether it is one of the reductions `sum prod max min mean all any
    /// argmax argmin`, or `softmax log_softmax cumsum cumprod` (one tensor
    /// plus `axis=` and `keepdims=`; the last four reject `keepdims=`).
    pub fn is_reduction(self) -> bool {
        self.signature() == Signature::Reduction
    }

    /// The number of positional arguments it takes (for `alloc`, the
    /// least number: the value; any number of sizes may follow).
    pub fn arity(self) -> usize {
        match self.signature() {
            Signature::Fixed(n) => n,
            Signature::Reduction => 1,
            Signature::Cast | Signature::Update => 2,
            Signature::Axis(n) => n,
            Signature::Join | Signature::Alloc => 1,
            Signature::Split | Signature::Tensordot => 2,
        }
    }
}
