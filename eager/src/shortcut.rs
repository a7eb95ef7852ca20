//! An op on tensors of fixed types whose entry its caller keeps: the C++ device keeps one per
//! call site of its hottest kernels (`a + b` in a loop). A call skips what the memoized path
//! ([`crate::call_tensors`]) does per op besides running the op: binding the arguments, the
//! memo's key and lookup, and the list of outputs; each tensor's type is checked under the
//! same lock that reads its value. In a profile of a deferred chain of adds those skipped
//! parts were ~20% of the runtime's time per op.

use crate::cache::{OpEntry, OutKind};
use crate::error::Result;
use crate::memo;
use crate::runtime::with;
use crate::tensor::Tensor;
use std::sync::Weak;
use tessera_lowering::stablehlo::TensorType;
use tessera_lowering::DType;
use tessera_ops::OpSchema;

/// A memoized op of one tensor result computed from its tensor arguments alone: nothing
/// written, no random key. Holds its entry weakly, as the memo does.
pub struct Shortcut {
    entry: Weak<OpEntry>,
    /// The tensor arguments' types, in order.
    types: Vec<TensorType>,
}

impl Shortcut {
    /// The shortcut for `schema` called on `tensors` alone (its other arguments at their
    /// defaults), as [`crate::call_tensors`] called it before on tensors of these types; `None`
    /// when the memo holds no such entry or the op is not one tensor out of its tensors.
    pub fn find(schema: &'static OpSchema, tensors: &[Tensor]) -> Option<Shortcut> {
        let entry = memo::entry(schema, tensors.iter())?;
        let plan = entry.plan().ok()?;
        let simple = matches!(entry.outs.as_slice(), [OutKind::Tensor(0)])
            && entry.writes.is_empty()
            && !entry.random
            && plan.returns == 1
            && tensors.iter().all(|t| t.view.is_none());
        simple.then(|| Shortcut {
            entry: std::sync::Arc::downgrade(&entry),
            types: tensors.iter().map(Tensor::ty).collect(),
        })
    }

    /// Whether tensor argument `k` of a call may be of `dtype` and `shape` (the type the
    /// shortcut was made for; the call checks each stored value's type again).
    pub fn takes(&self, k: usize, dtype: DType, shape: &[i64]) -> bool {
        self.types.get(k).is_some_and(|t| {
            t.dtype == dtype
                && t.shape.len() == shape.len()
                && t.shape.iter().zip(shape).all(|(&a, &b)| a as i64 == b)
        })
    }

    /// The result's dtype and shape.
    pub fn output_type(&self) -> Option<(DType, Vec<usize>)> {
        let entry = self.entry.upgrade()?;
        let t = entry.results.first()?;
        Some((t.dtype, t.shape.clone()))
    }

    /// Calls the op on `tensors` in this thread's mode: `Ok(None)` when the shortcut does not
    /// apply (its entry was evicted, or a tensor is a view or not of the type it was made
    /// for): then the general path runs the call.
    pub fn call(&self, tensors: &[&Tensor]) -> Result<Option<Tensor>> {
        if tensors.len() != self.types.len() {
            return Ok(None);
        }
        let Some(entry) = self.entry.upgrade() else {
            return Ok(None);
        };
        with(|rt| rt.call_shortcut(&entry, tensors, &self.types))
    }
}
