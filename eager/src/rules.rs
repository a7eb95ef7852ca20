//! Materialization rules of DeferAndFuse: where the pending graph is cut. Each is small and
//! tested on its own (`eager/tests/rules_tests.rs`).

use crate::cache::OpEntry;
use crate::tensor::OpName;
use tessera_runtime::DeviceKind;

/// A graph is cut once it holds this many ops (TorchTPU's forced split of very large
/// graphs): compile time grows with size, and a loop without sync points must still run.
pub const MAX_PENDING_OPS: usize = 2048;

thread_local! {
    static SIZE_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_PENDING_OPS) };
}

/// Sets this thread's size limit of a pending graph (default [`MAX_PENDING_OPS`]).
pub fn set_max_pending_ops(n: usize) {
    SIZE_LIMIT.with(|c| c.set(n.max(1)));
}

/// The period of the tail of `ids`: the smallest `p` with the last `p` ids equal to the `p`
/// before them.
fn tail_period(ids: &[u64]) -> Option<usize> {
    let n = ids.len();
    (1..=n / 2).find(|&p| ids[n - p..] == ids[n - 2 * p..n - p])
}

/// Whether a graph of `n` ops is cut now (rule "size limit, cut where a repeated loop body
/// ends"): past the limit, the graph waits until its length is a whole number of the
/// repeating tail's period (`ids`: the graph's op entries), so a loop without sync points is
/// cut at the same place in its body every time and every cut compiles to the same program.
/// A graph twice the limit with no period is cut anyway.
pub(crate) fn size_limit_reached(n: usize, ids: impl FnOnce() -> Vec<u64>) -> bool {
    let limit = SIZE_LIMIT.with(|c| c.get());
    if n < limit {
        return false;
    }
    if n >= 2 * limit {
        return true;
    }
    tail_period(&ids()).is_some_and(|p| n % p == 0)
}

/// Elementwise ops whose fused code gets slower on XLA CPU the more of them one program
/// chains. Measured on the CPU plugin (xla-cpu-pjrt 0.0.1), 256x256 f32, 50 ops as one
/// program vs 50 launches of one: sin 21.3 vs 14.0 ms, cos 25.4 vs 14.2, exp 7.1 vs 4.1,
/// sigmoid 8.8 vs 5.9; fusing 50 `mul`s instead gained 10x. `tanh` fuses as fast as it runs
/// alone (6.2 vs 6.2 ms; it was 15 vs 3.6 ms on an earlier plugin), so it is not one of
/// them. An optimization barrier between the ops in one program does not help (50 `sin`:
/// 25.0 vs 25.4 ms): the loss is in the fused kernel itself.
const SLOW_FUSED_ON_CPU: [&str; 9] = [
    "sin", "cos", "tan", "exp", "log", "sigmoid", "erf", "asin", "atan",
];

/// Tensors smaller than this run transcendental ops fast enough fused (the launch saved
/// matters more).
const SLOW_FUSED_MIN_ELEMENTS: usize = 16384;

/// A fused program holds at most this many slow ops ([`is_slow_fused`]): the loss grows
/// with their number. 50 chained `sin` on 256x256 in programs of 1, 2, 5, 10, 25 and 50
/// ops: 7.5-8.5, 7.0, 7.1-7.5, 8.1-8.6, 10.4 and 11.2 ms (two runs); and the 50-op
/// pointwise chain of `tessera bench eager` (10 `sin` among `mul`, `add` and `tanh`) ran
/// 1.5-2x faster as one program (compiled) than cut after every `sin` (DeferAndFuse,
/// 11 programs).
const SLOW_FUSED_PER_PROGRAM: usize = 5;

/// Materialization rule: whether the graph is cut right after this op, the one that brings
/// the slow ops it holds (`slow_in_graph`, counted here) to [`SLOW_FUSED_PER_PROGRAM`].
pub(crate) fn cut_after(entry: &OpEntry, device: DeviceKind, slow_in_graph: &mut usize) -> bool {
    if !is_slow_fused(entry, device) {
        return false;
    }
    *slow_in_graph += 1;
    *slow_in_graph >= SLOW_FUSED_PER_PROGRAM
}

/// Whether this op counts toward [`SLOW_FUSED_PER_PROGRAM`]: a transcendental elementwise op
/// on a large tensor, on the CPU plugin.
fn is_slow_fused(entry: &OpEntry, device: DeviceKind) -> bool {
    // The size first: comparing the op's name with the list's was ~3% of a deferred op.
    device == DeviceKind::Cpu
        && entry
            .results
            .first()
            .is_some_and(|t| t.num_elements() >= SLOW_FUSED_MIN_ELEMENTS)
        && matches!(entry.op(), OpName::Aten(s) if SLOW_FUSED_ON_CPU.contains(&s.name))
}
