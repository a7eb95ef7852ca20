//! Buffer donation in DeferAndFuse: a flushed graph's input whose tensor has moved on (it was
//! overwritten in place, `p.sub_(lr * g)`, or dropped) gives its memory to a live result of
//! the same type, instead of the program allocating new memory while the old buffer waits to
//! be freed. XLA aliases the two (`tf.aliasing_output`) and PJRT consumes the donated buffer.
//!
//! Which inputs are aliased is decided by the graph's structure (so a loop body compiles to
//! one program); whether a buffer is really donated is decided per run: only one nothing but
//! the graph holds, and not aliasing host memory (a zero-copy upload). An aliased input that
//! is not donated is copied by PJRT, so the program is correct either way.

use crate::graph::Graph;
use crate::tensor::State;
use std::sync::Arc;

/// `(input, live result)` pairs the program aliases: each input whose tensor no longer
/// holds it, paired with the first not yet paired live result (`live`: node and output
/// indices, in the program's output order) of its shape and dtype.
pub(crate) fn aliases(g: &Graph, live: &[(u32, u32)]) -> Vec<(usize, usize)> {
    let mut taken = vec![false; live.len()];
    let mut pairs = Vec::new();
    for (i, b) in g.inputs.iter().enumerate() {
        let moved_on = match g.input_from[i].as_ref() {
            // Read through a view's ops: the base may still hold it.
            None => false,
            Some(w) => w.upgrade().is_none_or(
                |s| !matches!(&s.lock().state, State::Ready { buf, .. } if Arc::ptr_eq(buf, b)),
            ),
        };
        if !moved_on {
            continue;
        }
        let same_type = |&(n, o): &(u32, u32)| {
            let t = &g.nodes[n as usize].entry.results[o as usize];
            t.shape == b.shape() && t.dtype == b.dtype()
        };
        if let Some(r) = (0..live.len()).find(|&r| !taken[r] && same_type(&live[r])) {
            taken[r] = true;
            pairs.push((i, r));
        }
    }
    pairs
}

/// The aliased inputs that can be donated in this run: the graph's reference is the only
/// one (no tensor, view or cache can read the buffer later) and it owns its memory.
pub(crate) fn donatable(g: &Graph, aliases: &[(usize, usize)]) -> Vec<usize> {
    aliases
        .iter()
        .map(|&(i, _)| i)
        .filter(|&i| {
            let b = &g.inputs[i];
            Arc::strong_count(b) == 1 && Arc::weak_count(b) == 0 && !b.aliases_host()
        })
        .collect()
}
