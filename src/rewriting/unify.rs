//! Unification and reification over FunctionGraph variables.
//!
//! A [`Pattern`] is a term over graph variables: logic variables ([`LVar`]),
//! numeric constants, fixed graph variables, applications `(op arg ...)` and
//! the variadic `cons(op, rest)` form (head op, rest-of-arguments variable)
//! that matches an application of any arity. [`unify`] matches a pattern
//! against a graph variable and returns a [`Substitution`]; [`reify`] builds
//! the graph a template describes under a substitution, as *detached* nodes.
//!
//! Invariants: a logic variable bound twice must bind the same graph variable
//! (or two constants with the same type and value); matching never mutates the
//! graph. Unnamed logic variables print as `~_1`, `~_2`, ... numbered per thread
//! in creation order, named ones as `~x`.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};

use crate::error::{Error, Result};
use crate::graph::{DType, FunctionGraph, Value, VarId};
use crate::ops::{Op, ScalarOp};

static NEXT_ID: AtomicU32 = AtomicU32::new(1);
thread_local! {
    static NEXT_ANON: Cell<u32> = const { Cell::new(1) };
}

/// A logic variable.
#[derive(Debug, Clone)]
pub struct LVar {
    id: u32,
    label: Arc<str>,
}

impl PartialEq for LVar {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for LVar {}
impl std::hash::Hash for LVar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl LVar {
    /// A fresh named logic variable (prints as `~name`).
    pub fn named(name: &str) -> LVar {
        LVar {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            label: Arc::from(name),
        }
    }
    /// The variable's label (`_1` or the name).
    pub fn label(&self) -> &str {
        &self.label
    }
}

impl fmt::Display for LVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "~{}", self.label)
    }
}

/// A fresh unnamed logic variable (PyTensor's `var()`), printed `~_N`.
pub fn var() -> LVar {
    let n = NEXT_ANON.with(|c| {
        let n = c.get();
        c.set(n + 1);
        n
    });
    LVar {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        label: Arc::from(format!("_{n}")),
    }
}

/// A fresh logic variable for internal use (relational goals): it does not
/// advance the `~_N` numbering users see. Prints as `~_gN`.
pub fn internal_var() -> LVar {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    LVar {
        id,
        label: Arc::from(format!("_g{id}")),
    }
}

/// `n` fresh unnamed logic variables.
pub fn lvars(n: usize) -> Vec<LVar> {
    (0..n).map(|_| var()).collect()
}

/// The op position of an application pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum OpPattern {
    /// This exact op.
    Op(Op),
    /// Any op, bound to the logic variable.
    Var(LVar),
}

/// A pattern (or template) over graph variables.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// A logic variable.
    Var(LVar),
    /// A numeric constant: matches a constant whose elements all equal it
    /// (NaN matches NaN); reified with the dtype and rank of its siblings.
    Const {
        /// The number.
        value: f64,
        /// Written with a decimal point (a float literal).
        is_float: bool,
    },
    /// This graph variable.
    Graph(VarId),
    /// `(op arg ...)`: an application with exactly these arguments.
    Apply(OpPattern, Vec<Pattern>),
    /// `cons(op, rest)`: an application of any arity, `rest` binding the argument list.
    Cons(OpPattern, LVar),
}

impl Pattern {
    /// `(op args...)` for an Elemwise of `s`.
    pub fn elemwise(s: ScalarOp, args: Vec<Pattern>) -> Pattern {
        Pattern::Apply(OpPattern::Op(Op::elemwise(s)), args)
    }
    /// `(op args...)`.
    pub fn apply(op: Op, args: Vec<Pattern>) -> Pattern {
        Pattern::Apply(OpPattern::Op(op), args)
    }
    /// A logic variable pattern.
    pub fn var(v: &LVar) -> Pattern {
        Pattern::Var(v.clone())
    }
    /// A float constant.
    pub fn float(value: f64) -> Pattern {
        Pattern::Const {
            value,
            is_float: true,
        }
    }
    /// The op of the root, when fixed.
    pub fn root_op(&self) -> Option<&Op> {
        match self {
            Pattern::Apply(OpPattern::Op(op), _) | Pattern::Cons(OpPattern::Op(op), _) => Some(op),
            _ => None,
        }
    }
}

/// `etuple(op, args...)`: an application pattern.
pub fn etuple(op: impl Into<OpPattern>, args: Vec<Pattern>) -> Pattern {
    Pattern::Apply(op.into(), args)
}

/// `cons(op, rest)`: a variadic application pattern.
pub fn cons(op: impl Into<OpPattern>, rest: &LVar) -> Pattern {
    Pattern::Cons(op.into(), rest.clone())
}

impl From<Op> for OpPattern {
    fn from(op: Op) -> Self {
        OpPattern::Op(op)
    }
}
impl From<ScalarOp> for OpPattern {
    fn from(s: ScalarOp) -> Self {
        OpPattern::Op(Op::elemwise(s))
    }
}
impl From<&LVar> for OpPattern {
    fn from(v: &LVar) -> Self {
        OpPattern::Var(v.clone())
    }
}

impl fmt::Display for OpPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpPattern::Op(op) => write!(f, "{op}"),
            OpPattern::Var(v) => write!(f, "{v}"),
        }
    }
}

impl fmt::Display for Pattern {
    /// S-expression text: `(true_div (mul ?x ?y) ?y)`, `(add . ?rest)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Var(v) if v.label.starts_with('_') => write!(f, "{v}"),
            Pattern::Var(v) => write!(f, "?{}", v.label),
            Pattern::Const { value, is_float } => {
                if *is_float && value.fract() == 0.0 && value.is_finite() {
                    write!(f, "{value:.1}")
                } else {
                    write!(f, "{value}")
                }
            }
            Pattern::Graph(v) => write!(f, "{v}"),
            Pattern::Apply(op, args) => {
                write!(f, "({op}")?;
                for a in args {
                    write!(f, " {a}")?;
                }
                write!(f, ")")
            }
            Pattern::Cons(op, rest) => write!(f, "({op} . {})", Pattern::Var(rest.clone())),
        }
    }
}

/// What a logic variable is bound to.
#[derive(Debug, Clone, PartialEq)]
pub enum Binding {
    /// A graph variable.
    Var(VarId),
    /// An op (from an op position).
    Op(Op),
    /// An argument list (from a `cons` rest).
    List(Vec<VarId>),
}

/// Logic-variable bindings, in binding order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Substitution {
    map: Vec<(LVar, Binding)>,
}

impl Substitution {
    /// The binding of `v`.
    pub fn get(&self, v: &LVar) -> Option<&Binding> {
        self.map.iter().find(|(k, _)| k == v).map(|(_, b)| b)
    }
    /// The graph variable bound to `v`.
    pub fn var(&self, v: &LVar) -> Option<VarId> {
        match self.get(v)? {
            Binding::Var(x) => Some(*x),
            _ => None,
        }
    }
    /// The op bound to `v`.
    pub fn op(&self, v: &LVar) -> Option<&Op> {
        match self.get(v)? {
            Binding::Op(op) => Some(op),
            _ => None,
        }
    }
    /// The argument list bound to `v`.
    pub fn list(&self, v: &LVar) -> Option<&[VarId]> {
        match self.get(v)? {
            Binding::List(l) => Some(l),
            _ => None,
        }
    }
    /// Every binding, in order.
    pub fn bindings(&self) -> &[(LVar, Binding)] {
        &self.map
    }
    /// Number of bindings.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// True when nothing is bound.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Binds `v` (or checks an existing binding); false on a conflict.
    fn bind(&mut self, fg: &FunctionGraph, v: &LVar, b: Binding) -> bool {
        match self.get(v) {
            None => {
                self.map.push((v.clone(), b));
                true
            }
            Some(old) => same_binding(fg, old, &b),
        }
    }
    /// `{~_1: y}`, with graph variables by name, ops by name and lists as `e(x, y)`.
    pub fn display(&self, fg: &FunctionGraph) -> String {
        let show = |v: VarId| match fg.owner(v) {
            None => fg.leaf_name(v),
            Some(_) => crate::graph::print::pprint(fg, v),
        };
        let items: Vec<String> = self
            .map
            .iter()
            .map(|(k, b)| {
                let b = match b {
                    Binding::Var(v) => show(*v),
                    Binding::Op(op) => op.name(),
                    Binding::List(l) => format!(
                        "e({})",
                        l.iter().map(|&v| show(v)).collect::<Vec<_>>().join(", ")
                    ),
                };
                format!("{k}: {b}")
            })
            .collect();
        format!("{{{}}}", items.join(", "))
    }
}

fn same_var(fg: &FunctionGraph, a: VarId, b: VarId) -> bool {
    a == b
        || match (fg.constant_value(a), fg.constant_value(b)) {
            (Some(x), Some(y)) => fg.ty(a) == fg.ty(b) && x.same_as(y),
            _ => false,
        }
}

fn same_binding(fg: &FunctionGraph, a: &Binding, b: &Binding) -> bool {
    match (a, b) {
        (Binding::Var(x), Binding::Var(y)) => same_var(fg, *x, *y),
        (Binding::Op(x), Binding::Op(y)) => x == y,
        (Binding::List(x), Binding::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_var(fg, *a, *b))
        }
        _ => false,
    }
}

/// Options of [`unify_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnifyOptions {
    /// Match through intermediate nodes whose output has other clients
    /// (when false, such a match would duplicate work, so it is refused).
    pub allow_multiple_clients: bool,
}

impl Default for UnifyOptions {
    fn default() -> Self {
        UnifyOptions {
            allow_multiple_clients: true,
        }
    }
}

/// Matches `pattern` against `v`; `None` when it does not match.
pub fn unify(pattern: &Pattern, fg: &FunctionGraph, v: VarId) -> Option<Substitution> {
    unify_with(
        pattern,
        fg,
        v,
        UnifyOptions::default(),
        Substitution::default(),
    )
}

/// [`unify`] with options, extending an existing substitution.
pub fn unify_with(
    pattern: &Pattern,
    fg: &FunctionGraph,
    v: VarId,
    opts: UnifyOptions,
    mut subst: Substitution,
) -> Option<Substitution> {
    go(pattern, fg, v, opts, true, &mut subst).then_some(subst)
}

fn match_op(fg: &FunctionGraph, p: &OpPattern, op: &Op, s: &mut Substitution) -> bool {
    match p {
        OpPattern::Op(o) => o == op,
        OpPattern::Var(l) => s.bind(fg, l, Binding::Op(op.clone())),
    }
}

fn go(
    p: &Pattern,
    fg: &FunctionGraph,
    v: VarId,
    opts: UnifyOptions,
    root: bool,
    s: &mut Substitution,
) -> bool {
    match p {
        Pattern::Var(l) => s.bind(fg, l, Binding::Var(v)),
        Pattern::Const { value, .. } => fg
            .constant_value(v)
            .and_then(Value::unique_value)
            .is_some_and(|c| c == *value || (c.is_nan() && value.is_nan())),
        Pattern::Graph(g) => same_var(fg, *g, v),
        Pattern::Apply(op, _) | Pattern::Cons(op, _) if fg.owner(v).is_some() => {
            let (n, k) = fg.var(v).owner.expect("owner");
            if k != 0 || (!root && !opts.allow_multiple_clients && fg.clients(v).len() > 1) {
                return false;
            }
            let node = fg.node(n);
            if !match_op(fg, op, &node.op, s) {
                return false;
            }
            match p {
                Pattern::Apply(_, args_p) => {
                    args_p.len() == node.inputs.len()
                        && args_p
                            .iter()
                            .zip(node.inputs.iter())
                            .all(|(a, &i)| go(a, fg, i, opts, false, s))
                }
                Pattern::Cons(_, rest) => s.bind(fg, rest, Binding::List(node.inputs.to_vec())),
                _ => unreachable!("guarded by the outer match"),
            }
        }
        Pattern::Apply(..) | Pattern::Cons(..) => false,
    }
}

fn resolve_op(p: &OpPattern, s: &Substitution) -> Result<Op> {
    match p {
        OpPattern::Op(op) => Ok(op.clone()),
        OpPattern::Var(l) => s
            .op(l)
            .cloned()
            .ok_or_else(|| Error::Rewrite(format!("{l} is not bound to an op"))),
    }
}

/// A constant `value` shaped and typed like `like` (broadcastable in every dimension).
fn constant_like(fg: &mut FunctionGraph, value: f64, is_float: bool, like: Option<VarId>) -> VarId {
    let (dtype, ndim) = match like {
        Some(v) => (
            DType::weak_scalar(fg.ty(v).dtype, is_float || value.fract() != 0.0),
            fg.ty(v).ndim(),
        ),
        None => (if is_float { DType::F64 } else { DType::I64 }, 0),
    };
    fg.constant(Value::from_f64_array(
        dtype,
        ArrayD::from_elem(IxDyn(&vec![1; ndim]), value),
    ))
}

/// Builds the graph `template` describes under `subst`, as detached nodes;
/// returns the variable of the root.
pub fn reify(template: &Pattern, subst: &Substitution, fg: &mut FunctionGraph) -> Result<VarId> {
    match template {
        Pattern::Var(l) => match subst.get(l) {
            Some(Binding::Var(v)) => Ok(*v),
            Some(b) => Err(Error::Rewrite(format!(
                "{l} is bound to {b:?}, not to a variable"
            ))),
            None => Err(Error::Rewrite(format!("{l} is not bound"))),
        },
        Pattern::Const { value, is_float } => Ok(constant_like(fg, *value, *is_float, None)),
        Pattern::Graph(v) => Ok(*v),
        Pattern::Apply(op, args) => {
            let op = resolve_op(op, subst)?;
            let mut vals: Vec<Option<VarId>> = Vec::with_capacity(args.len());
            for a in args {
                vals.push(match a {
                    Pattern::Const { .. } => None,
                    a => Some(reify(a, subst, fg)?),
                });
            }
            let like = vals
                .iter()
                .flatten()
                .copied()
                .max_by_key(|&v| fg.ty(v).ndim());
            let mut inputs = Vec::with_capacity(args.len());
            for (a, v) in args.iter().zip(vals) {
                inputs.push(match (a, v) {
                    (_, Some(v)) => v,
                    (Pattern::Const { value, is_float }, None) => {
                        constant_like(fg, *value, *is_float, like)
                    }
                    _ => unreachable!("only constants are deferred"),
                });
            }
            fg.apply1(op, &inputs)
        }
        Pattern::Cons(op, rest) => {
            let op = resolve_op(op, subst)?;
            let args = subst
                .list(rest)
                .ok_or_else(|| Error::Rewrite(format!("{rest} is not bound to a list")))?;
            let args = args.to_vec();
            fg.apply1(op, &args)
        }
    }
}

/// Names of logic variables shared between an input and an output pattern when parsing.
pub type VarTable = std::collections::HashMap<String, LVar>;

/// Parses an s-expression pattern: `(true_div (mul ?x ?y) ?y)`, `(mul ?x 1.0)`,
/// `(add . ?rest)`, `(?op . ?args)`. Op names are those printed by
/// `Op::name()` for ops without parameters (`add`, `true_div`, `dot`, `Alloc`, `Shape`).
pub fn parse_pattern(text: &str, vars: &mut VarTable) -> Result<Pattern> {
    let tokens = tokenize(text);
    let mut pos = 0;
    let p = parse_expr(&tokens, &mut pos, vars, text)?;
    if pos != tokens.len() {
        return Err(perr(
            text,
            tokens[pos].0,
            format!("unexpected '{}' after the pattern", tokens[pos].1),
        ));
    }
    Ok(p)
}

fn perr(_text: &str, pos: usize, msg: String) -> Error {
    Error::Parse { pos, msg }
}

fn tokenize(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, c) in text.char_indices() {
        if c == '(' || c == ')' || c.is_whitespace() {
            if let Some(t) = cur.take() {
                out.push(t);
            }
            if !c.is_whitespace() {
                out.push((i, c.to_string()));
            }
        } else {
            cur.get_or_insert_with(|| (i, String::new())).1.push(c);
        }
    }
    if let Some(t) = cur {
        out.push(t);
    }
    out
}

/// The op called `name` in patterns.
pub fn op_from_name(name: &str) -> Option<Op> {
    if let Some(s) = ScalarOp::from_name(name) {
        return Some(Op::elemwise(s));
    }
    match name {
        "dot" => Some(Op::Dot),
        "Alloc" => Some(Op::Alloc),
        "Shape" => Some(Op::Shape),
        _ => None,
    }
}

fn parse_var(tok: &str, vars: &mut VarTable) -> LVar {
    vars.entry(tok.to_string())
        .or_insert_with(|| LVar::named(tok))
        .clone()
}

fn parse_expr(
    tokens: &[(usize, String)],
    pos: &mut usize,
    vars: &mut VarTable,
    text: &str,
) -> Result<Pattern> {
    let Some((at, tok)) = tokens.get(*pos) else {
        return Err(perr(text, text.len(), "unexpected end of pattern".into()));
    };
    *pos += 1;
    if tok == ")" {
        return Err(perr(text, *at, "unexpected ')'".into()));
    }
    if tok != "(" {
        if let Some(name) = tok.strip_prefix('?') {
            if name.is_empty() {
                return Err(perr(
                    text,
                    *at,
                    "a logic variable needs a name after '?'".into(),
                ));
            }
            return Ok(Pattern::Var(parse_var(name, vars)));
        }
        if let Ok(value) = tok.parse::<f64>() {
            return Ok(Pattern::Const {
                value,
                is_float: tok.contains(['.', 'e', 'E'])
                    || tok.contains("nan")
                    || tok.contains("inf"),
            });
        }
        return Err(perr(
            text,
            *at,
            format!(
                "'{tok}' is neither a logic variable (?name) nor a number; ops go first in a list"
            ),
        ));
    }
    let Some((op_at, op_tok)) = tokens.get(*pos) else {
        return Err(perr(
            text,
            text.len(),
            "unexpected end of pattern after '('".into(),
        ));
    };
    *pos += 1;
    let op = if let Some(name) = op_tok.strip_prefix('?') {
        OpPattern::Var(parse_var(name, vars))
    } else {
        OpPattern::Op(
            op_from_name(op_tok)
                .ok_or_else(|| perr(text, *op_at, format!("unknown op '{op_tok}'")))?,
        )
    };
    let mut args = Vec::new();
    loop {
        let Some((a_at, a)) = tokens.get(*pos) else {
            return Err(perr(text, text.len(), "missing ')'".into()));
        };
        if a == ")" {
            *pos += 1;
            return Ok(Pattern::Apply(op, args));
        }
        if a == "." {
            *pos += 1;
            let rest = parse_expr(tokens, pos, vars, text)?;
            let Pattern::Var(rest) = rest else {
                return Err(perr(
                    text,
                    *a_at,
                    "'.' must be followed by a logic variable".into(),
                ));
            };
            if !args.is_empty() {
                return Err(perr(
                    text,
                    *a_at,
                    "a cons pattern is (op . ?rest) with no other arguments".into(),
                ));
            }
            match tokens.get(*pos) {
                Some((_, t)) if t == ")" => {
                    *pos += 1;
                    return Ok(Pattern::Cons(op, rest));
                }
                _ => {
                    return Err(perr(
                        text,
                        *a_at,
                        "expected ')' after the rest variable".into(),
                    ))
                }
            }
        }
        args.push(parse_expr(tokens, pos, vars, text)?);
    }
}
