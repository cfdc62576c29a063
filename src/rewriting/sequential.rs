//! `SequentialGraphRewriter`: runs graph rewriters one after the other and
//! nests their profiles (the top level of every optdb query).

use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::graph::FunctionGraph;

use super::profile::{RewriterProfile, SequentialProfile, SubProfile};
use super::rewriter::{rename_profile, GraphRewriter, NamedGraphRewriter};

/// Applies graph rewriters in order.
#[derive(Debug, Clone)]
pub struct SequentialGraphRewriter {
    name: String,
    rewriters: Vec<NamedGraphRewriter>,
}

impl SequentialGraphRewriter {
    /// A sequence called `name`.
    pub fn new(name: impl Into<String>, rewriters: Vec<NamedGraphRewriter>) -> Self {
        SequentialGraphRewriter {
            name: name.into(),
            rewriters,
        }
    }

    /// A sequence of unnamed entries (each keeps its own name).
    pub fn from_rewriters(name: impl Into<String>, rewriters: Vec<Arc<dyn GraphRewriter>>) -> Self {
        Self::new(
            name,
            rewriters.into_iter().map(NamedGraphRewriter::new).collect(),
        )
    }

    /// The entries, in order.
    pub fn rewriters(&self) -> &[NamedGraphRewriter] {
        &self.rewriters
    }
}

impl GraphRewriter for SequentialGraphRewriter {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn class_name(&self) -> &'static str {
        "SequentialGraphRewriter"
    }
    fn add_requirements(&self, fg: &mut FunctionGraph) -> Result<()> {
        crate::graph::features::ReplaceValidate::attach(fg)?;
        self.rewriters
            .iter()
            .try_for_each(|r| r.rewriter.add_requirements(fg))
    }
    fn apply(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        let start = Instant::now();
        let (validate0, callback0) = (fg.stats.validate_ticks, fg.stats.callback_ticks);
        let mut prof = SequentialProfile {
            name: self.name.clone(),
            nodes_before: fg.n_nodes(),
            ..Default::default()
        };
        for (index, r) in self.rewriters.iter().enumerate() {
            let v0 = fg.stats.validate_ticks;
            let p = r
                .rewriter
                .apply(fg)
                .map_err(|e| Error::Rewrite(format!("{} (in {}): {e}", r.name, self.name)))?;
            if crate::graph::fgraph::verify_by_default() {
                // The verifier runs after every pass in debug builds and in tests (KILN_VERIFY=1).
                fg.check_integrity().map_err(|e| {
                    Error::Rewrite(format!("after {} (in {}): {e}", r.name, self.name))
                })?;
            }
            prof.children.push(SubProfile {
                index,
                validate_time: kiln_runtime::clock::rate().duration(fg.stats.validate_ticks - v0),
                profile: rename_profile(p, &r.name),
            });
        }
        prof.nodes_after = fg.n_nodes();
        let rate = kiln_runtime::clock::rate();
        prof.validate_time = rate.duration(fg.stats.validate_ticks - validate0);
        prof.callback_time = rate.duration(fg.stats.callback_ticks - callback0);
        prof.time = start.elapsed();
        Ok(RewriterProfile::Sequential(prof))
    }
}
