//! A per-thread memo of op entries for calls whose arguments are tensors alone, in order (the
//! arguments after them at their defaults), as the C++ device's kernels call `a + b`. Binding,
//! lifting and keying such a call, then finding its entry behind the lowering cache's lock,
//! was a third of the runtime's time per op in DeferAndFuse (a profile of a chain of adds);
//! the memo finds the entry from the schema and the tensors' types alone.
//!
//! Entries are held weakly: one the lowering cache evicted is built on the general path again,
//! so the memo neither keeps executables alive nor changes what the cache bound means.

use crate::cache::OpEntry;
use crate::error::{EagerError, Result};
use crate::runtime::{with, Output};
use crate::tensor::Tensor;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::{Arc, Weak};
use tessera_ops::bind::Bound;
use tessera_ops::{ArgValue, OpSchema};

/// Memo entries kept at most per thread; past it the memo starts over.
const MEMO_ENTRIES: usize = 256;

#[derive(Default)]
struct Memo {
    /// The key being looked up, kept to spare an allocation per call.
    key: Vec<u64>,
    /// Fx-hashed: the keys are a few words, hashed once per op.
    entries: FxHashMap<Vec<u64>, Weak<OpEntry>>,
}

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

/// The memoized entry for `schema` on `tensors`, or the key to keep one under.
fn find<'t>(
    schema: &'static OpSchema,
    tensors: impl Iterator<Item = &'t Tensor>,
) -> std::result::Result<Arc<OpEntry>, Vec<u64>> {
    MEMO.with(|m| {
        let m = &mut *m.borrow_mut();
        m.key.clear();
        m.key.push(schema as *const OpSchema as usize as u64);
        for t in tensors {
            t.push_type(&mut m.key);
        }
        match m.entries.get(m.key.as_slice()).and_then(Weak::upgrade) {
            Some(entry) => Ok(entry),
            None => Err(m.key.clone()),
        }
    })
}

/// The memoized entry for `schema` on `tensors`, if any.
pub(crate) fn entry<'t>(
    schema: &'static OpSchema,
    tensors: impl Iterator<Item = &'t Tensor>,
) -> Option<Arc<OpEntry>> {
    find(schema, tensors).ok()
}

fn keep(key: Vec<u64>, entry: &Arc<OpEntry>) {
    MEMO.with(|m| {
        let m = &mut *m.borrow_mut();
        if m.entries.len() >= MEMO_ENTRIES {
            m.entries.clear();
        }
        m.entries.insert(key, Arc::downgrade(entry));
    })
}

/// Calls `schema` on `args`, its first arguments in order, the rest at their defaults:
/// what [`crate::call_schema`] does with them as positional arguments, faster when they are
/// tensors alone (`ArgValue::Tensor`) called again on tensors of the same types. (A caller
/// hands `ArgValue`s, not tensors, because the call is bound on them: a second list per op
/// would cost its allocation.)
pub fn call_tensors(schema: &'static OpSchema, args: Vec<ArgValue<Tensor>>) -> Result<Vec<Output>> {
    let alone = args.iter().all(|a| matches!(a, ArgValue::Tensor(_)));
    if !alone {
        return crate::call_schema(schema, args, Vec::new());
    }
    let found = find(schema, args.iter().flat_map(|a| a.tensors()));
    match found {
        Ok(entry) => with(|rt| {
            rt.call_entry(
                &entry,
                &Bound {
                    schema,
                    values: args,
                },
            )
        }),
        Err(key) => {
            let bound = tessera_ops::bind(schema, args, Vec::new())
                .map_err(|e| EagerError::op(String::new(), e))?;
            let (outs, entry) = with(|rt| rt.call_keeping(bound, true, true))?;
            if let Some(entry) = entry {
                keep(key, &entry);
            }
            Ok(outs)
        }
    }
}
