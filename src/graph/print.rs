//! Printers: the seed documents' `FunctionGraph(...)` display, `dprint`
//! trees with `[id A]` tags, `pprint` infix text and Graphviz DOT.
//!
//! All printers walk the graph without recursion, so very deep graphs print
//! without overflowing the stack (the text of a deep expression can still be
//! large: shared sub-expressions are expanded at every use by `pprint`).
//!
//! `pprint` writes the expression language: what it prints re-parses
//! (`kiln rewrite` shows it, `kiln eval` reads it), fused `Composite`s and
//! reductions included, which it writes inline as the element-wise
//! expressions they compute.

use std::fmt::{self, Write};

use rustc_hash::{FxHashMap, FxHashSet};

use super::fgraph::{Apply, FunctionGraph};
use super::ids::VarId;
use crate::ops::{CRef, Composite, Op, ReduceOp, ScalarOp};
use crate::types::value::format_element;

impl FunctionGraph {
    /// How a leaf variable (input or constant) prints.
    pub fn leaf_name(&self, v: VarId) -> String {
        let var = self.var(v);
        if let Some(c) = &var.constant {
            return c.summary();
        }
        match &var.name {
            Some(n) => n.clone(),
            None => format!("<{}>", var.ty),
        }
    }

    fn output_suffix(&self, v: VarId) -> String {
        match self.var(v).owner {
            Some((n, k)) if self.node(n).outputs.len() > 1 => format!(".{k}"),
            _ => String::new(),
        }
    }
}

/// The seed documents' rendering: `FunctionGraph(add(z, mul(x, y)))`, with a
/// variable used more than once shown as `*1 -> add(y, z)` at its first use and
/// `*1` afterwards.
impl fmt::Display for FunctionGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Variables computed by nodes and used more than once get a tag.
        let mut uses: FxHashMap<VarId, usize> = FxHashMap::default();
        for n in self.node_ids() {
            for &i in &self.node(n).inputs {
                *uses.entry(i).or_default() += 1;
            }
        }
        for &o in self.outputs() {
            *uses.entry(o).or_default() += 1;
        }
        let mut tags: FxHashMap<VarId, usize> = FxHashMap::default();
        let mut out = String::new();
        // Explicit stack of work items: a variable to render, or literal text.
        enum Item {
            Var(VarId),
            Text(String),
        }
        let mut stack: Vec<Item> = Vec::new();
        for (k, &o) in self.outputs().iter().enumerate().rev() {
            stack.push(Item::Var(o));
            if k > 0 {
                stack.push(Item::Text(", ".into()));
            }
        }
        while let Some(item) = stack.pop() {
            let v = match item {
                Item::Text(t) => {
                    out.push_str(&t);
                    continue;
                }
                Item::Var(v) => v,
            };
            let Some(n) = self.owner(v) else {
                out.push_str(&self.leaf_name(v));
                continue;
            };
            if let Some(t) = tags.get(&v) {
                write!(out, "*{t}")?;
                continue;
            }
            if uses.get(&v).copied().unwrap_or(0) > 1 {
                let t = tags.len() + 1;
                tags.insert(v, t);
                write!(out, "*{t} -> ")?;
            }
            let node = self.node(n);
            write!(out, "{}(", node.op.name())?;
            // The suffix of a multi-output node's output follows the closing parenthesis.
            stack.push(Item::Text(format!("){}", self.output_suffix(v))));
            for (k, &i) in node.inputs.iter().enumerate().rev() {
                stack.push(Item::Var(i));
                if k > 0 {
                    stack.push(Item::Text(", ".into()));
                }
            }
        }
        write!(f, "FunctionGraph({out})")
    }
}

/// PyTensor-style ids: `A`..`Z`, `BA`, `BB`, ...
fn id_name(mut k: usize) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'A' + (k % 26) as u8);
        k /= 26;
        if k == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).expect("ASCII")
}

/// A debug tree of the graph's outputs, one line per variable:
/// ```text
/// add [id A] ''
///  |y [id B]
///  |y [id B]
/// ```
/// A node shown before is printed again without its inputs.
pub fn dprint(fg: &FunctionGraph) -> String {
    dprint_vars(fg, fg.outputs())
}

/// [`dprint`] of chosen variables.
pub fn dprint_vars(fg: &FunctionGraph, roots: &[VarId]) -> String {
    let mut ids: FxHashMap<VarId, String> = FxHashMap::default();
    let mut expanded: FxHashSet<VarId> = FxHashSet::default();
    let mut out = String::new();
    for &root in roots {
        // (variable, prefix of its own line, prefix handed to its children)
        let mut stack: Vec<(VarId, String, String)> = vec![(root, String::new(), String::new())];
        while let Some((v, prefix, child_prefix)) = stack.pop() {
            let next = ids.len();
            let id = ids.entry(v).or_insert_with(|| id_name(next)).clone();
            match fg.owner(v) {
                None => {
                    let name = match fg.constant_value(v) {
                        Some(c) => format!("TensorConstant{{{}}}", c.summary()),
                        None => fg.leaf_name(v),
                    };
                    let _ = writeln!(out, "{prefix}{name} [id {id}]");
                }
                Some(n) => {
                    let node = fg.node(n);
                    let name = fg.var(v).name.clone().unwrap_or_default();
                    let suffix = fg.output_suffix(v);
                    let _ = writeln!(out, "{prefix}{}{suffix} [id {id}] '{name}'", node.op.name());
                    if expanded.insert(v) {
                        // As Theano's debugprint: the last child's subtree is indented
                        // with spaces, the others continue the ` |` rail.
                        let last = node.inputs.len().saturating_sub(1);
                        for (k, &i) in node.inputs.iter().enumerate().rev() {
                            let rail = if k == last { "  " } else { " |" };
                            stack.push((
                                i,
                                format!("{child_prefix} |"),
                                format!("{child_prefix}{rail}"),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Infix rendering of `v`, parenthesised as the seed documents show:
/// `((A @ x) + (A @ y))`, `exp((-x))`, `sum(X, axis=1)`, `u[:, None]`, `X.T`.
pub fn pprint(fg: &FunctionGraph, v: VarId) -> String {
    let mut memo: FxHashMap<VarId, String> = FxHashMap::default();
    let mut stack: Vec<(VarId, bool)> = vec![(v, false)];
    while let Some((x, ready)) = stack.pop() {
        if memo.contains_key(&x) {
            continue;
        }
        let Some(n) = fg.owner(x) else {
            memo.insert(x, fg.leaf_name(x));
            continue;
        };
        let node = fg.node(n);
        if !ready {
            stack.push((x, true));
            stack.extend(node.inputs.iter().map(|&i| (i, false)));
            continue;
        }
        let lists = index_lists(fg, node);
        let args: Vec<&str> = node
            .inputs
            .iter()
            .zip(&lists)
            .map(|(i, l)| l.as_deref().unwrap_or(memo[i].as_str()))
            .collect();
        let out_k = node.outputs.iter().position(|&o| o == x).unwrap_or(0);
        let text = match &node.op {
            // Inline, in the expression language, so that the text re-parses.
            Op::Composite { composite, .. } => composite_text(fg, composite, out_k, &args),
            Op::FusedReduce {
                op: r,
                axes,
                pre,
                post,
            } => {
                let (pre_args, extras) = crate::ops::split_fused(pre, &args);
                let inner = composite_text(fg, pre, 0, pre_args);
                let reduced = reduce_call(*r, axes, "", &[inner.as_str()]);
                match post {
                    None => reduced,
                    Some(post) => {
                        let mut post_args = vec![reduced.as_str()];
                        post_args.extend(extras);
                        composite_text(fg, post, 0, &post_args)
                    }
                }
            }
            Op::ArgReduce {
                op: a,
                axis,
                with_value: true,
            } => {
                let f = if out_k == 0 {
                    a.word().to_string()
                } else {
                    format!("arg{}", a.word())
                };
                match axis {
                    None => format!("{f}({})", args[0]),
                    Some(d) => format!("{f}({}, axis={d})", args[0]),
                }
            }
            _ => render_op(fg, &node.op, &args) + &fg.output_suffix(x),
        };
        memo.insert(x, text);
    }
    memo.remove(&v).unwrap_or_default()
}

/// [`pprint`] of every output, one per line.
pub fn pprint_outputs(fg: &FunctionGraph) -> String {
    fg.outputs()
        .iter()
        .map(|&o| pprint(fg, o))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Output `k` of the scalar graph `c` applied to the operand texts `args`,
/// each scalar op rendered as its element-wise op would be.
fn composite_text(fg: &FunctionGraph, c: &Composite, k: usize, args: &[&str]) -> String {
    let mut texts: Vec<String> = Vec::with_capacity(c.nodes.len());
    let text_of = |r: &CRef, texts: &[String]| -> String {
        match r {
            CRef::Input(i) => args[*i as usize].to_string(),
            CRef::Node(j) => texts[*j as usize].clone(),
            CRef::Const(v) => format_element(v.as_f64(), v.dtype),
        }
    };
    for node in &c.nodes {
        let a: Vec<String> = node.args.iter().map(|r| text_of(r, &texts)).collect();
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        texts.push(render_op(fg, &Op::elemwise(node.op), &a));
    }
    c.outputs
        .get(k)
        .map_or_else(String::new, |r| text_of(r, &texts))
}

/// Per input of `node`: for the integer index of a gather or an update and
/// the sizes of a split, a small constant vector as the list literal the
/// expression language reads (`take(x, [0, -1])`); else `None`.
fn index_lists(fg: &FunctionGraph, node: &Apply) -> Vec<Option<String>> {
    let listed = match node.op {
        Op::AdvancedSubtensor1 { .. } | Op::Split { .. } => Some(1),
        Op::AdvancedIncSubtensor1 { .. } => Some(2),
        _ => None,
    };
    node.inputs
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            let c = fg.constant_value(v).filter(|_| Some(k) == listed)?;
            if c.ndim() != 1 || c.is_empty() || c.len() > 16 || !c.dtype().is_int() {
                return None;
            }
            let items: Vec<String> = c.to_i64_array().iter().map(|i| i.to_string()).collect();
            Some(format!("[{}]", items.join(", ")))
        })
        .collect()
}

fn infix(op: ScalarOp) -> Option<&'static str> {
    use ScalarOp::*;
    Some(match op {
        Add => "+",
        Sub => "-",
        Mul => "*",
        TrueDiv => "/",
        IntDiv => "//",
        Mod => "%",
        Pow => "**",
        Lt => "<",
        Le => "<=",
        Gt => ">",
        Ge => ">=",
        Eq => "==",
        Neq => "!=",
        And => "&",
        Or => "|",
        Xor => "^",
        LeftShift => "<<",
        RightShift => ">>",
        _ => return None,
    })
}

fn render_op(_fg: &FunctionGraph, op: &Op, args: &[&str]) -> String {
    match op {
        Op::Elemwise { scalar, .. } => {
            if let Some(sym) = infix(*scalar) {
                if args.len() >= 2 {
                    return format!("({})", args.join(&format!(" {sym} ")));
                }
            }
            match scalar {
                ScalarOp::Neg => format!("(-{})", args[0]),
                ScalarOp::Invert => format!("(~{})", args[0]),
                ScalarOp::Cast(d) => format!("cast({}, \"{d}\")", args[0]),
                ScalarOp::Switch => format!("where({})", args.join(", ")),
                s => format!("{}({})", s.name(), args.join(", ")),
            }
        }
        Op::Dot | Op::BatchedDot => format!("({} @ {})", args[0], args[1]),
        Op::DimShuffle {
            input_ndim,
            new_order,
        } => {
            let is_transpose = new_order.len() == *input_ndim
                && *input_ndim >= 2
                && new_order
                    .iter()
                    .rev()
                    .enumerate()
                    .all(|(k, d)| *d == Some(k));
            let kept: Vec<usize> = new_order.iter().flatten().copied().collect();
            let in_order = kept.windows(2).all(|w| w[0] < w[1]);
            if is_transpose {
                format!("{}.T", args[0])
            } else if in_order {
                // Dropped (size-1) dimensions as `[0]` indices, then the
                // inserted ones as `None`: `a[:, 0][None, :]`.
                let mut text = args[0].to_string();
                if kept.len() < *input_ndim {
                    let drops: Vec<&str> = (0..*input_ndim)
                        .map(|d| if kept.contains(&d) { ":" } else { "0" })
                        .collect();
                    text = format!("{text}[{}]", drops.join(", "));
                }
                if new_order.iter().any(Option::is_none) {
                    let idx: Vec<&str> = new_order
                        .iter()
                        .map(|d| if d.is_some() { ":" } else { "None" })
                        .collect();
                    text = format!("{text}[{}]", idx.join(", "));
                }
                text
            } else {
                format!("{}({})", op.name(), args[0])
            }
        }
        Op::CAReduce { op: r, axes } => reduce_call(*r, axes, "", args),
        Op::AdvancedSubtensor1 { axis: 0 } => format!("take({}, {})", args[0], args[1]),
        Op::AdvancedSubtensor1 { axis } => {
            format!("take({}, {}, axis={axis})", args[0], args[1])
        }
        Op::AdvancedIncSubtensor1 { axis, set } => {
            let f = if *set {
                "advanced_set_subtensor"
            } else {
                "advanced_inc_subtensor"
            };
            let axis = match axis {
                0 => String::new(),
                a => format!(", axis={a}"),
            };
            // The op's inputs are (x, y, idx); the function reads (x, idx, y).
            format!("{f}({}, {}, {}{axis})", args[0], args[2], args[1])
        }
        Op::BooleanMask => format!("boolean_mask({}, {})", args[0], args[1]),
        Op::Join { axis } => format!("concatenate([{}], axis={axis})", args.join(", ")),
        Op::Split { axis, .. } => format!("split({}, {}, axis={axis})", args[0], args[1]),
        Op::CumReduce { op: r, axis } => {
            let f = if *r == ReduceOp::Prod {
                "cumprod"
            } else {
                "cumsum"
            };
            match axis {
                None => format!("{f}({})", args[0]),
                Some(d) => format!("{f}({}, axis={d})", args[0]),
            }
        }
        Op::Softmax { axis, log } => {
            let f = if *log { "log_softmax" } else { "softmax" };
            match axis {
                None => format!("{f}({}, axis=None)", args[0]),
                Some(d) => format!("{f}({}, axis={d})", args[0]),
            }
        }
        Op::LogSumExp { axis } => match axis {
            None => format!("logsumexp({})", args[0]),
            Some(d) => format!("logsumexp({}, axis={d})", args[0]),
        },
        Op::ArgReduce {
            op: a,
            axis,
            with_value: false,
        } => match axis {
            None => format!("arg{}({})", a.word(), args[0]),
            Some(d) => format!("arg{}({}, axis={d})", a.word(), args[0]),
        },
        Op::FusedReduce {
            op: r,
            axes,
            pre,
            post,
        } => {
            let (pre_args, extras) = crate::ops::split_fused(pre, args);
            let reduced = reduce_call(*r, axes, &crate::ops::pre_text(pre), pre_args);
            match post {
                None => reduced,
                Some(post) => {
                    let mut post_args = vec![reduced.as_str()];
                    post_args.extend(extras);
                    format!("{}({})", crate::ops::pre_text(post), post_args.join(", "))
                }
            }
        }
        Op::Subtensor { idx } => {
            let names: Vec<String> = args[1..].iter().map(|a| a.to_string()).collect();
            format!(
                "{}[{}]",
                args[0],
                crate::ops::subtensor::index_text(idx, &names)
            )
        }
        Op::IncSubtensor { idx, set, .. } => {
            let names: Vec<String> = args[2..].iter().map(|a| a.to_string()).collect();
            format!(
                "{}_subtensor({}[{}], {})",
                if *set { "set" } else { "inc" },
                args[0],
                crate::ops::subtensor::index_text(idx, &names),
                args[1]
            )
        }
        Op::Alloc => format!("alloc({})", args.join(", ")),
        _ => format!("{}({})", op.name(), args.join(", ")),
    }
}

/// `sum(x, axis=1)`, `max(x)`, `prod(x, axis=(0, 2))`; a fused reduction
/// shows its pre-map after the name and its inputs as arguments:
/// `sum{exp(sub(i0, i1))}(X, m[:, None], axis=1)`.
fn reduce_call(r: ReduceOp, axes: &Option<Vec<usize>>, pre: &str, args: &[&str]) -> String {
    let f = match r {
        ReduceOp::Sum => "sum",
        ReduceOp::Prod => "prod",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
        ReduceOp::All => "all",
        ReduceOp::Any => "any",
    };
    let args = args.join(", ");
    match axes {
        None => format!("{f}{pre}({args})"),
        Some(a) if a.len() == 1 => format!("{f}{pre}({args}, axis={})", a[0]),
        Some(a) => {
            let list: Vec<String> = a.iter().map(|x| x.to_string()).collect();
            format!("{f}{pre}({args}, axis=({}))", list.join(", "))
        }
    }
}

/// Graphviz DOT: variables as ellipses (inputs green, constants grey,
/// outputs blue), Apply nodes as boxes, edges labelled with the input index
/// when a node has several inputs.
pub fn to_dot(fg: &FunctionGraph) -> String {
    let mut s = String::from("digraph G {\n  rankdir=TB;\n");
    let mut vars: Vec<VarId> = Vec::new();
    let mut seen = FxHashSet::default();
    let order = fg.toposort();
    for &n in &order {
        for &v in fg.node(n).inputs.iter().chain(fg.node(n).outputs.iter()) {
            if seen.insert(v) {
                vars.push(v);
            }
        }
    }
    for &v in fg.inputs().iter().chain(fg.outputs()) {
        if seen.insert(v) {
            vars.push(v);
        }
    }
    for v in vars {
        let var = fg.var(v);
        let (label, color) = if var.owner.is_none() {
            let c = if var.constant.is_some() {
                "lightgrey"
            } else {
                "palegreen"
            };
            (fg.leaf_name(v), c)
        } else if fg.outputs().contains(&v) {
            (
                var.name
                    .clone()
                    .unwrap_or_else(|| format!("out {}", var.ty)),
                "lightblue",
            )
        } else {
            (var.ty.to_string(), "white")
        };
        let _ = writeln!(
            s,
            "  {v} [shape=ellipse, style=filled, fillcolor={color}, label=\"{}\"];",
            escape(&label)
        );
    }
    for n in order {
        let node = fg.node(n);
        let _ = writeln!(
            s,
            "  {n} [shape=box, label=\"{}\"];",
            escape(&node.op.name())
        );
        let many = node.inputs.len() > 1;
        for (k, &i) in node.inputs.iter().enumerate() {
            if many {
                let _ = writeln!(s, "  {i} -> {n} [label=\"{k}\"];");
            } else {
                let _ = writeln!(s, "  {i} -> {n};");
            }
        }
        for &o in &node.outputs {
            let _ = writeln!(s, "  {n} -> {o};");
        }
    }
    s.push_str("}\n");
    s
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::id_name;

    #[test]
    fn ids_count_like_pytensor() {
        assert_eq!(id_name(0), "A");
        assert_eq!(id_name(25), "Z");
        assert_eq!(id_name(26), "BA");
        assert_eq!(id_name(27), "BB");
    }
}
