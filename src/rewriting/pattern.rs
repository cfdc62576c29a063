//! `PatternNodeRewriter`: replaces every match of an input pattern by the
//! reification of an output pattern.
//!
//! Patterns are [`Pattern`] values or s-expression text parsed with one shared
//! variable table (`(true_div (mul ?x ?y) ?y)` ⇒ `?x`). A repeated logic
//! variable must bind the same graph variable; optional constraints (closures)
//! must accept the variables they are attached to; by default a match may not
//! go through an intermediate node whose output has other clients (the rewrite
//! would duplicate work). `tracks` is the root op's kind.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::{FunctionGraph, NodeId, VarId};

use super::rewriter::{NodeRewriter, Rewrite, Tracks};
use super::unify::{
    parse_pattern, reify, unify_with, LVar, Pattern, Substitution, UnifyOptions, VarTable,
};

/// A check on the variable bound to a logic variable.
pub type Constraint = Arc<dyn Fn(&FunctionGraph, VarId) -> bool + Send + Sync>;

/// Replaces matches of `in_pattern` by `out_pattern`.
#[derive(Clone)]
pub struct PatternNodeRewriter {
    name: Option<String>,
    in_pattern: Pattern,
    out_pattern: Pattern,
    allow_multiple_clients: bool,
    constraints: Vec<(LVar, Constraint)>,
    vars: VarTable,
}

impl std::fmt::Debug for PatternNodeRewriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PatternNodeRewriter({})", self.name())
    }
}

impl PatternNodeRewriter {
    /// A rewriter from pattern values (share `LVar`s between them).
    pub fn new(in_pattern: Pattern, out_pattern: Pattern) -> Self {
        PatternNodeRewriter {
            name: None,
            in_pattern,
            out_pattern,
            allow_multiple_clients: false,
            constraints: Vec::new(),
            vars: VarTable::new(),
        }
    }

    /// A rewriter from s-expression text: `parse("(true_div (mul ?x ?y) ?y)", "?x")`.
    pub fn parse(in_text: &str, out_text: &str) -> Result<Self> {
        let mut vars = VarTable::new();
        let in_pattern = parse_pattern(in_text, &mut vars)?;
        let names: Vec<String> = vars.keys().cloned().collect();
        let out_pattern = parse_pattern(out_text, &mut vars)?;
        if let Some(unbound) = vars.keys().find(|k| !names.contains(k)) {
            return Err(Error::Rewrite(format!(
                "the output pattern {out_text} uses ?{unbound}, which the input pattern {in_text} does not bind"
            )));
        }
        if in_pattern.root_op().is_none() {
            return Err(Error::Rewrite(format!(
                "the input pattern {in_text} must be an application of a fixed op"
            )));
        }
        let mut r = Self::new(in_pattern, out_pattern);
        r.vars = vars;
        Ok(r)
    }

    /// Sets the name (default: `in -> out`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Allows matching through intermediate nodes with other clients.
    pub fn allow_multiple_clients(mut self, allow: bool) -> Self {
        self.allow_multiple_clients = allow;
        self
    }

    /// Requires `check` to accept the variable bound to `var`.
    pub fn constraint(
        mut self,
        var: &LVar,
        check: impl Fn(&FunctionGraph, VarId) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.constraints.push((var.clone(), Arc::new(check)));
        self
    }

    /// Requires `check` to accept the variable bound to `?name` (parsed patterns).
    pub fn constraint_on(
        self,
        name: &str,
        check: impl Fn(&FunctionGraph, VarId) -> bool + Send + Sync + 'static,
    ) -> Result<Self> {
        let v = self
            .vars
            .get(name)
            .cloned()
            .ok_or_else(|| Error::Rewrite(format!("the pattern has no variable ?{name}")))?;
        Ok(self.constraint(&v, check))
    }

    /// The input pattern.
    pub fn in_pattern(&self) -> &Pattern {
        &self.in_pattern
    }

    /// The output pattern.
    pub fn out_pattern(&self) -> &Pattern {
        &self.out_pattern
    }

    /// Matches the input pattern at `v`, checking constraints.
    pub fn matches(&self, fg: &FunctionGraph, v: VarId) -> Option<Substitution> {
        let opts = UnifyOptions {
            allow_multiple_clients: self.allow_multiple_clients,
        };
        let s = unify_with(&self.in_pattern, fg, v, opts, Substitution::default())?;
        let ok = self
            .constraints
            .iter()
            .all(|(l, check)| s.var(l).is_some_and(|x| check(fg, x)));
        ok.then_some(s)
    }
}

impl NodeRewriter for PatternNodeRewriter {
    fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let subject: Vec<String> = self
                .constraints
                .iter()
                .map(|(v, _)| format!("{v} subject to a constraint"))
                .collect();
            let extra = if subject.is_empty() {
                String::new()
            } else {
                format!(" [{}]", subject.join(", "))
            };
            format!("{} -> {}{extra}", self.in_pattern, self.out_pattern)
        })
    }
    fn tracks(&self) -> Tracks {
        match self.in_pattern.root_op() {
            Some(op) => Tracks::kind(op.kind()),
            None => Tracks::All,
        }
    }
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<Rewrite>> {
        if fg.node(node).outputs.len() != 1 {
            return Ok(None);
        }
        let out = fg.node(node).outputs[0];
        let Some(s) = self.matches(fg, out) else {
            return Ok(None);
        };
        let new = reify(&self.out_pattern, &s, fg)?;
        if new == out {
            return Ok(None);
        }
        Ok(Some(Rewrite::single(new)))
    }
}
