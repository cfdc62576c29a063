//! Multiplication trees (seed 004's `parse_mul_tree`, `simplify_mul`,
//! `compute_mul` and `perform_sigm_times_exp`): a product of factors, some
//! negated, seen through nested `mul` and `neg` nodes, that a rule can edit
//! leaf by leaf and then rebuild.
//!
//! A [`MulTree`] is a sign and a body: a leaf holding a variable, a leaf
//! holding *nothing* (the factor 1, left behind when a rule consumes a
//! factor), or a product of sub-trees. Invariants: parsing only descends
//! into a nested `mul`/`neg` whose output has a single client (so rebuilding
//! never duplicates work shared with the rest of the graph) and at most
//! [`MAX_DEPTH`] levels deep (so nothing recurses on graph depth);
//! [`compute_mul`] only builds detached nodes.

use crate::error::Result;
use crate::graph::{DType, FunctionGraph, VarId};
use crate::ops::ScalarOp;

use super::util::{elemwise, is_exp, is_neg, neg, owner_if, scalar_const, single_client, unary};

/// How many nested `mul`/`neg` levels [`parse_mul_tree`] looks through.
pub const MAX_DEPTH: usize = 32;

/// A (possibly negated) product tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MulTree {
    /// True when the body is negated.
    pub neg: bool,
    /// The factor or product this node stands for.
    pub body: MulBody,
}

/// The body of a [`MulTree`] node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MulBody {
    /// A factor; `None` is the factor 1.
    Leaf(Option<VarId>),
    /// The product of the sub-trees.
    Mul(Vec<MulTree>),
}

impl MulTree {
    /// A leaf holding `v`, negated when `neg`.
    pub fn leaf(neg: bool, v: VarId) -> Self {
        MulTree {
            neg,
            body: MulBody::Leaf(Some(v)),
        }
    }

    /// The product of `children`, negated when `neg`.
    pub fn mul(neg: bool, children: Vec<MulTree>) -> Self {
        MulTree {
            neg,
            body: MulBody::Mul(children),
        }
    }

    /// The leaves of the tree, left to right.
    fn leaves_mut(&mut self) -> Vec<&mut MulTree> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(t) = stack.pop() {
            if matches!(t.body, MulBody::Leaf(_)) {
                out.push(t);
            } else if let MulBody::Mul(children) = &mut t.body {
                stack.extend(children.iter_mut().rev());
            }
        }
        out
    }
}

/// Parses the product rooted at `root`: `x * y` gives
/// `[+, [[+, x], [+, y]]]`, `-(x * y)` gives `[-, [[+, x], [+, y]]]`,
/// `-x * y` gives `[+, [[-, x], [+, y]]]`, `-x` gives `[-, x]`.
/// The root itself is always looked through; nested nodes only when
/// their output has a single client.
pub fn parse_mul_tree(fg: &FunctionGraph, root: VarId) -> MulTree {
    parse_at(fg, root, 0)
}

fn parse_at(fg: &FunctionGraph, v: VarId, depth: usize) -> MulTree {
    if depth > 0 && (depth > MAX_DEPTH || !single_client(fg, v)) {
        return MulTree::leaf(false, v);
    }
    if let Some(n) = owner_if(fg, v, ScalarOp::Mul) {
        let children = fg.node(n).inputs.to_vec();
        return MulTree::mul(
            false,
            children
                .into_iter()
                .map(|c| parse_at(fg, c, depth + 1))
                .collect(),
        );
    }
    match is_neg(fg, v) {
        Some(x) => {
            let mut t = parse_at(fg, x, depth + 1);
            t.neg = !t.neg;
            t
        }
        None => MulTree::leaf(false, v),
    }
}

/// The same product without factors 1 (their signs folded into the parent)
/// and without products of fewer than two factors.
pub fn simplify_mul(tree: MulTree) -> MulTree {
    let MulTree { neg, body } = tree;
    match body {
        MulBody::Leaf(_) => MulTree { neg, body },
        MulBody::Mul(children) => {
            let mut sign = neg;
            let mut kept = Vec::with_capacity(children.len());
            for child in children.into_iter().map(simplify_mul) {
                if child.body == MulBody::Leaf(None) {
                    sign ^= child.neg;
                } else {
                    kept.push(child);
                }
            }
            match kept.len() {
                0 => MulTree {
                    neg: sign,
                    body: MulBody::Leaf(None),
                },
                1 => {
                    let mut only = kept.pop().expect("one child");
                    only.neg ^= sign;
                    only
                }
                _ => MulTree::mul(sign, kept),
            }
        }
    }
}

/// The variable computing `tree` (detached nodes); a factor 1 becomes a
/// 0-d constant of `dtype`. Inverse of [`parse_mul_tree`] up to merging.
pub fn compute_mul(fg: &mut FunctionGraph, tree: &MulTree, dtype: DType) -> Result<VarId> {
    let body = match &tree.body {
        MulBody::Leaf(Some(v)) => *v,
        MulBody::Leaf(None) => {
            let one = if tree.neg { -1.0 } else { 1.0 };
            return Ok(scalar_const(fg, dtype, one));
        }
        MulBody::Mul(children) => {
            let factors = children
                .iter()
                .map(|c| compute_mul(fg, c, dtype))
                .collect::<Result<Vec<_>>>()?;
            elemwise(fg, ScalarOp::Mul, &factors)?
        }
    };
    if tree.neg {
        neg(fg, body)
    } else {
        Ok(body)
    }
}

/// What a leaf of a product is, for [`perform_sigm_times_exp`]: the
/// function (`exp` or `sigmoid`), its argument, and the argument's
/// polarity (`(y, false)` for `f(y)`, `(y, true)` for `f(-y)`).
struct FactorInfo {
    leaf: usize,
    is_exp: bool,
    /// Sign carried by a `-exp(..)` leaf variable.
    extra_neg: bool,
    /// The function's own argument variable.
    arg: VarId,
    base: VarId,
    minus: bool,
}

/// Replaces, anywhere in the tree, each pair `exp(x) * sigmoid(-x)` by
/// `sigmoid(x)` and `exp(-x) * sigmoid(x)` by `sigmoid(-x)` (the sigmoid
/// leaf takes the new function, the exponential leaf becomes the factor 1,
/// signs are kept). Returns whether anything changed.
pub fn perform_sigm_times_exp(fg: &mut FunctionGraph, tree: &mut MulTree) -> Result<bool> {
    let mut leaves = tree.leaves_mut();
    let mut infos: Vec<FactorInfo> = Vec::new();
    for (k, leaf) in leaves.iter().enumerate() {
        let MulBody::Leaf(Some(v)) = leaf.body else {
            continue;
        };
        let (is_exp_leaf, extra_neg, arg) = if let Some((sign, x)) = is_exp(fg, v) {
            (true, sign, x)
        } else if let Some(s) = owner_if(fg, v, ScalarOp::Sigmoid) {
            (false, false, fg.node(s).inputs[0])
        } else {
            continue;
        };
        let (base, minus) = match is_neg(fg, arg) {
            Some(y) => (y, true),
            None => (arg, false),
        };
        infos.push(FactorInfo {
            leaf: k,
            is_exp: is_exp_leaf,
            extra_neg,
            arg,
            base,
            minus,
        });
    }
    let mut used = vec![false; infos.len()];
    let mut changed = false;
    for e in 0..infos.len() {
        if !infos[e].is_exp || used[e] {
            continue;
        }
        let partner = (0..infos.len()).find(|&s| {
            !used[s]
                && !infos[s].is_exp
                && infos[s].base == infos[e].base
                && infos[s].minus != infos[e].minus
        });
        let Some(s) = partner else {
            continue;
        };
        used[e] = true;
        used[s] = true;
        // exp(a) * sigmoid(-a) = sigmoid(a), with a the exponential's argument.
        let sig = unary(fg, ScalarOp::Sigmoid, infos[e].arg)?;
        let exp_sign = leaves[infos[e].leaf].neg ^ infos[e].extra_neg;
        let exp_leaf = &mut leaves[infos[e].leaf];
        exp_leaf.neg = false;
        exp_leaf.body = MulBody::Leaf(None);
        let sig_leaf = &mut leaves[infos[s].leaf];
        sig_leaf.neg ^= exp_sign;
        sig_leaf.body = MulBody::Leaf(Some(sig));
        changed = true;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::TensorType;
    use crate::ops::Op;

    fn vars() -> (FunctionGraph, [VarId; 3]) {
        let mut fg = FunctionGraph::empty();
        let t = TensorType::new(DType::F64, vec![None]);
        let x = fg.add_input(t.clone(), Some("x".into()));
        let y = fg.add_input(t.clone(), Some("y".into()));
        let z = fg.add_input(t, Some("z".into()));
        (fg, [x, y, z])
    }

    fn mul(fg: &mut FunctionGraph, a: VarId, b: VarId) -> VarId {
        fg.apply1(Op::elemwise(ScalarOp::Mul), &[a, b]).unwrap()
    }

    #[test]
    fn parses_the_seed_examples() {
        let (mut fg, [x, y, z]) = vars();
        let xy = mul(&mut fg, x, y);
        let leaf = MulTree::leaf;
        let xy_tree = MulTree::mul(false, vec![leaf(false, x), leaf(false, y)]);
        assert_eq!(parse_mul_tree(&fg, xy), xy_tree);

        let neg_xy = neg(&mut fg, xy).unwrap();
        fg.add_output(neg_xy);
        let mut negated = xy_tree.clone();
        negated.neg = true;
        assert_eq!(parse_mul_tree(&fg, neg_xy), negated);

        let nx = neg(&mut fg, x).unwrap();
        let nx_y = mul(&mut fg, nx, y);
        fg.add_output(nx_y);
        assert_eq!(
            parse_mul_tree(&fg, nx_y),
            MulTree::mul(false, vec![leaf(true, x), leaf(false, y)])
        );
        assert_eq!(parse_mul_tree(&fg, nx), leaf(true, x));

        let nz = neg(&mut fg, z).unwrap();
        let xy2 = mul(&mut fg, x, y);
        let root = mul(&mut fg, xy2, nz);
        fg.add_output(root);
        assert_eq!(
            parse_mul_tree(&fg, root),
            MulTree::mul(false, vec![xy_tree, leaf(true, z)])
        );
    }

    #[test]
    fn shared_nested_products_stay_leaves() {
        let (mut fg, [x, y, z]) = vars();
        let xy = mul(&mut fg, x, y);
        let root = mul(&mut fg, xy, z);
        fg.add_output(root);
        fg.add_output(xy);
        assert_eq!(
            parse_mul_tree(&fg, root),
            MulTree::mul(
                false,
                vec![MulTree::leaf(false, xy), MulTree::leaf(false, z)]
            )
        );
    }

    #[test]
    fn simplify_drops_ones_and_single_products() {
        let (_, [x, y, _]) = vars();
        let one = |neg| MulTree {
            neg,
            body: MulBody::Leaf(None),
        };
        let t = MulTree::mul(
            false,
            vec![
                MulTree::mul(false, vec![one(true), MulTree::leaf(false, x)]),
                one(false),
                MulTree::leaf(false, y),
            ],
        );
        assert_eq!(
            simplify_mul(t),
            MulTree::mul(false, vec![MulTree::leaf(true, x), MulTree::leaf(false, y)])
        );
        assert_eq!(
            simplify_mul(MulTree::mul(true, vec![one(true), one(false)])),
            one(false)
        );
    }

    #[test]
    fn compute_inverts_parse() {
        let (mut fg, [x, y, z]) = vars();
        let nz = neg(&mut fg, z).unwrap();
        let xy = mul(&mut fg, x, y);
        let root = mul(&mut fg, xy, nz);
        fg.add_output(root);
        let tree = parse_mul_tree(&fg, root);
        let rebuilt = compute_mul(&mut fg, &tree, DType::F64).unwrap();
        fg.add_output(rebuilt);
        assert_eq!(parse_mul_tree(&fg, rebuilt), tree);
    }
}
