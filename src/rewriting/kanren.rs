//! A small relational engine over terms, and [`KanrenRelationSub`], which
//! turns a relation between two terms into a node rewriter usable in either
//! direction (the seed documents' `KanrenRelationSub`).
//!
//! Terms ([`Term`]) are logic variables, ops, graph variables (opaque atoms
//! that unification expands one level, `op(inputs...)`, when they meet a cons
//! cell, as kanren's etuplization does) and cons lists. Goals map a state
//! (a substitution) to the list of states that satisfy them; streams are eager
//! vectors, which is enough for term relations that are finite once one side
//! is known. Goals: [`eq`], [`conso`], [`heado`], [`tailo`], [`lall`],
//! [`lany`], [`mapo`], [`assoc_flatten`]. `mapo` refuses to enumerate lists
//! when both sides are unknown (it yields no state instead of diverging).
//!
//! `assoc_flatten` follows kanren: it splices nested applications of the same
//! associative op that are explicit cons terms; graph variables stay opaque, so
//! `(A @ ((x + y) + (z + w)))` distributes one level at a time, as in the seed.

use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::{Op, ScalarOp};

use super::rewriter::{NodeRewriter, Rewrite, Tracks};
use super::unify::{internal_var, LVar};

/// A term.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// A logic variable.
    Var(LVar),
    /// An op (the head of an application).
    Op(Op),
    /// A graph variable.
    Graph(VarId),
    /// The empty list.
    Nil,
    /// A cons cell.
    Cons(Rc<Term>, Rc<Term>),
}

impl Term {
    /// A fresh logic variable term.
    pub fn fresh() -> Term {
        Term::Var(internal_var())
    }
    /// `cons(head, tail)`.
    pub fn cons(head: Term, tail: Term) -> Term {
        Term::Cons(Rc::new(head), Rc::new(tail))
    }
    /// A proper list.
    pub fn list(items: Vec<Term>) -> Term {
        items
            .into_iter()
            .rev()
            .fold(Term::Nil, |tail, h| Term::cons(h, tail))
    }
}

impl From<&LVar> for Term {
    fn from(v: &LVar) -> Self {
        Term::Var(v.clone())
    }
}

/// `etuple(op, args...)`: the list `(op args...)`.
pub fn etuple(op: Op, args: Vec<Term>) -> Term {
    Term::cons(Term::Op(op), Term::list(args))
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Var(v) => write!(f, "{v}"),
            Term::Op(op) => write!(f, "{op}"),
            Term::Graph(v) => write!(f, "{v}"),
            Term::Nil => write!(f, "()"),
            Term::Cons(..) => {
                write!(f, "e(")?;
                let mut cur = self;
                let mut first = true;
                while let Term::Cons(h, t) = cur {
                    if !first {
                        write!(f, ", ")?;
                    }
                    first = false;
                    write!(f, "{h}")?;
                    cur = t;
                }
                if *cur != Term::Nil {
                    write!(f, " . {cur}")?;
                }
                write!(f, ")")
            }
        }
    }
}

/// A substitution of logic variables.
#[derive(Debug, Clone, Default)]
pub struct State {
    subst: FxHashMap<LVar, Term>,
}

impl State {
    /// Follows bindings of a variable until a non-variable or an unbound variable.
    pub fn walk(&self, t: &Term) -> Term {
        let mut t = t.clone();
        while let Term::Var(v) = &t {
            match self.subst.get(v) {
                Some(x) => t = x.clone(),
                None => break,
            }
        }
        t
    }

    /// The term with every bound variable replaced, recursively.
    pub fn reify(&self, t: &Term) -> Term {
        match self.walk(t) {
            Term::Cons(h, tl) => Term::cons(self.reify(&h), self.reify(&tl)),
            other => other,
        }
    }
}

/// What goals can see: the graph that graph variables live in.
pub struct Env<'a> {
    /// The graph.
    pub fg: &'a FunctionGraph,
}

/// A goal: the states that extend `state` and satisfy it.
pub type Goal = Rc<dyn Fn(&Env<'_>, State) -> Vec<State>>;

/// `op(inputs...)` for a single-output (or first-output) node's variable.
fn expand(env: &Env<'_>, v: VarId) -> Option<Term> {
    let (n, k) = env.fg.var(v).owner?;
    if k != 0 {
        return None;
    }
    let node = env.fg.node(n);
    Some(etuple(
        node.op.clone(),
        node.inputs.iter().map(|&i| Term::Graph(i)).collect(),
    ))
}

/// Unifies two terms under `s`.
pub fn unify_terms(env: &Env<'_>, a: &Term, b: &Term, mut s: State) -> Option<State> {
    let (a, b) = (s.walk(a), s.walk(b));
    match (&a, &b) {
        (Term::Var(x), Term::Var(y)) if x == y => Some(s),
        (Term::Var(x), _) => {
            s.subst.insert(x.clone(), b);
            Some(s)
        }
        (_, Term::Var(y)) => {
            s.subst.insert(y.clone(), a);
            Some(s)
        }
        (Term::Op(x), Term::Op(y)) => (x == y).then_some(s),
        (Term::Graph(x), Term::Graph(y)) => (x == y).then_some(s),
        (Term::Nil, Term::Nil) => Some(s),
        (Term::Cons(h1, t1), Term::Cons(h2, t2)) => {
            let s = unify_terms(env, h1, h2, s)?;
            unify_terms(env, t1, t2, s)
        }
        (Term::Graph(v), Term::Cons(..)) => unify_terms(env, &expand(env, *v)?, &b, s),
        (Term::Cons(..), Term::Graph(v)) => unify_terms(env, &a, &expand(env, *v)?, s),
        _ => None,
    }
}

/// `a == b`.
pub fn eq(a: Term, b: Term) -> Goal {
    Rc::new(move |env, s| unify_terms(env, &a, &b, s).into_iter().collect())
}

/// `l == cons(h, t)`.
pub fn conso(h: Term, t: Term, l: Term) -> Goal {
    eq(Term::cons(h, t), l)
}

/// The head of `l` is `h`.
pub fn heado(h: Term, l: Term) -> Goal {
    conso(h, Term::fresh(), l)
}

/// The tail of `l` is `t`.
pub fn tailo(t: Term, l: Term) -> Goal {
    conso(Term::fresh(), t, l)
}

/// All goals, in order (conjunction).
pub fn lall(goals: Vec<Goal>) -> Goal {
    Rc::new(move |env, s| {
        let mut states = vec![s];
        for g in &goals {
            states = states.into_iter().flat_map(|s| g(env, s)).collect();
            if states.is_empty() {
                break;
            }
        }
        states
    })
}

/// Any of the goals (disjunction; results in goal order).
pub fn lany(goals: Vec<Goal>) -> Goal {
    Rc::new(move |env, s| goals.iter().flat_map(|g| g(env, s.clone())).collect())
}

/// A relation between two terms, as a goal constructor.
pub type Relation = Rc<dyn Fn(Term, Term) -> Goal>;

/// `rel(a[i], b[i])` for every element of two lists of equal length.
pub fn mapo(rel: Relation, a: Term, b: Term) -> Goal {
    Rc::new(move |env, s| {
        let (wa, wb) = (s.walk(&a), s.walk(&b));
        if wa == Term::Nil || wb == Term::Nil {
            return lall(vec![eq(a.clone(), Term::Nil), eq(b.clone(), Term::Nil)])(env, s);
        }
        if matches!(wa, Term::Var(_)) && matches!(wb, Term::Var(_)) {
            // Both lists unknown: infinitely many answers; refuse rather than diverge.
            return Vec::new();
        }
        let (h1, t1, h2, t2) = (Term::fresh(), Term::fresh(), Term::fresh(), Term::fresh());
        lall(vec![
            conso(h1.clone(), t1.clone(), a.clone()),
            conso(h2.clone(), t2.clone(), b.clone()),
            rel(h1, h2),
            mapo(rel.clone(), t1, t2),
        ])(env, s)
    })
}

/// True for the ops `assoc_flatten` flattens (associative scalar ops).
pub fn is_associative(op: &Op) -> bool {
    op.scalar_op().is_some_and(ScalarOp::is_associative)
}

fn proper_list(s: &State, t: &Term) -> Option<Vec<Term>> {
    let mut out = Vec::new();
    let mut cur = s.walk(t);
    loop {
        match cur {
            Term::Nil => return Some(out),
            Term::Cons(h, tl) => {
                out.push(s.walk(&h));
                cur = s.walk(&tl);
            }
            _ => return None,
        }
    }
}

/// `a_flat` is `a` with nested applications of `a`'s associative op spliced
/// into the argument list (kanren's `assoc_flatten`); when `a` is not a known
/// associative application, `a_flat == a`.
pub fn assoc_flatten(a: Term, a_flat: Term) -> Goal {
    Rc::new(move |env, s| {
        let mut wa = s.walk(&a);
        if let Term::Graph(v) = wa {
            if let Some(e) = expand(env, v) {
                wa = e;
            }
        }
        let ground = match &wa {
            Term::Cons(h, t) => match (s.walk(h), proper_list(&s, t)) {
                (Term::Op(op), Some(args)) if is_associative(&op) => Some((op, args)),
                _ => None,
            },
            _ => None,
        };
        let Some((op, args)) = ground else {
            return eq(a.clone(), a_flat.clone())(env, s);
        };
        let mut flat = Vec::new();
        let mut stack: Vec<Term> = args.into_iter().rev().collect();
        while let Some(arg) = stack.pop() {
            let arg = s.walk(&arg);
            if let Term::Cons(h, t) = &arg {
                if s.walk(h) == Term::Op(op.clone()) {
                    if let Some(inner) = proper_list(&s, t) {
                        stack.extend(inner.into_iter().rev());
                        continue;
                    }
                }
            }
            flat.push(arg);
        }
        eq(a_flat.clone(), etuple(op, flat))(env, s)
    })
}

/// Runs `goal` and returns `query` reified in each answer (at most `n` when given).
pub fn run(fg: &FunctionGraph, n: Option<usize>, query: &Term, goal: &Goal) -> Vec<Term> {
    let env = Env { fg };
    let states = goal(&env, State::default());
    states
        .iter()
        .take(n.unwrap_or(usize::MAX))
        .map(|s| s.reify(query))
        .collect()
}

/// Builds the graph a ground term describes (detached nodes); errors on variables.
pub fn term_to_graph(t: &Term, fg: &mut FunctionGraph) -> Result<VarId> {
    match t {
        Term::Graph(v) => Ok(*v),
        Term::Cons(h, tail) => {
            let Term::Op(op) = h.as_ref() else {
                return Err(Error::Rewrite(format!(
                    "the term {t} does not start with an op"
                )));
            };
            let mut args = Vec::new();
            let mut cur = tail.as_ref();
            while let Term::Cons(a, rest) = cur {
                args.push(term_to_graph(a, fg)?);
                cur = rest;
            }
            if *cur != Term::Nil {
                return Err(Error::Rewrite(format!("the term {t} is not a proper list")));
            }
            fg.apply1(op.clone(), &args)
        }
        other => Err(Error::Rewrite(format!("the term {other} is not ground"))),
    }
}

/// The relation constructor a [`KanrenRelationSub`] runs: `(input term, output term) -> goal`.
pub type RelationFn = dyn Fn(Term, Term) -> Goal + Send + Sync;

/// A node rewriter from a relation: the node's output is the relation's first
/// argument; the first answer for the second argument that is ground and
/// different from the input replaces it.
#[derive(Clone)]
pub struct KanrenRelationSub {
    name: String,
    relation: Arc<RelationFn>,
}

impl KanrenRelationSub {
    /// A rewriter called `name` from `relation`.
    pub fn new(
        name: impl Into<String>,
        relation: impl Fn(Term, Term) -> Goal + Send + Sync + 'static,
    ) -> Self {
        KanrenRelationSub {
            name: name.into(),
            relation: Arc::new(relation),
        }
    }
}

impl NodeRewriter for KanrenRelationSub {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn tracks(&self) -> Tracks {
        Tracks::All
    }
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<Rewrite>> {
        if fg.node(node).outputs.len() != 1 {
            return Ok(None);
        }
        let out = fg.node(node).outputs[0];
        let q = Term::fresh();
        let goal = (self.relation)(Term::Graph(out), q.clone());
        let answers = run(fg, None, &q, &goal);
        for t in answers {
            if t == Term::Graph(out) {
                continue;
            }
            match term_to_graph(&t, fg) {
                Ok(v) if v != out => return Ok(Some(Rewrite::single(v))),
                Ok(_) => continue,
                Err(Error::Rewrite(_)) => continue, // not ground: try the next answer
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

/// The seeds' `dot_distributeo`: `A.dot(a + b ...) == A.dot(a) + A.dot(b) ...`.
pub fn dot_distributeo(in_lv: Term, out_lv: Term) -> Goal {
    let [a, add_term, add_cdr, dot_cdr, add_flat] = [(); 5].map(|_| Term::fresh());
    let add = Op::elemwise(ScalarOp::Add);
    let a_in_map = a.clone();
    let rel: Relation =
        Rc::new(move |x, y| conso(Term::Op(Op::Dot), Term::list(vec![a_in_map.clone(), x]), y));
    lall(vec![
        // The input is a dot ...
        eq(in_lv, etuple(Op::Dot, vec![a, add_term.clone()])),
        // ... of an add,
        heado(Term::Op(add.clone()), add_term.clone()),
        // flattened over nested adds;
        assoc_flatten(add_term, add_flat.clone()),
        tailo(add_cdr.clone(), add_flat),
        // the output adds the dot of A with each term.
        conso(Term::Op(add), dot_cdr.clone(), out_lv),
        mapo(rel, add_cdr, dot_cdr),
    ])
}
