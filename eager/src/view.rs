//! Views with PyTorch's aliasing: a view is its base's storage plus the chain of view ops
//! that derives it. Reading a view runs the chain on the base's current value; an in-place op
//! through a view writes the base back through the inverse of each step (`select_scatter`,
//! `slice_scatter`, the inverse permutation, a reshape), so the base and every other view of
//! it see the write. This is functionalization, as PyTorch's own pass does for XLA.

use crate::cache::{OpEntry, OutKind};
use crate::error::{EagerError, Result};
use crate::runtime::Runtime;
use crate::tensor::Tensor;
use std::sync::Arc;
use tessera_lowering::stablehlo::TensorType;
use tessera_ops::bind::Bound;
use tessera_ops::{ArgValue, OpSchema};

/// How a step is undone when writing through it.
#[derive(Clone, Debug)]
enum Inverse {
    /// `select_scatter` / `slice_scatter` into the step's input, with the step's arguments.
    Scatter(&'static str),
    /// Permute back by this permutation.
    Permute(Vec<i64>),
    /// Reshape back to the step's input shape.
    Reshape,
    /// None: a view several of whose elements are one element of its input (`expand` along
    /// a broadcast dim); PyTorch refuses writes through it, and so does this.
    ReadOnly,
}

#[derive(Clone, Debug)]
pub(crate) struct Step {
    schema: &'static OpSchema,
    /// The call's arguments after `self`.
    rest: Vec<ArgValue<Tensor>>,
    /// The type the step reads.
    input: TensorType,
    inverse: Inverse,
}

/// A view: the steps from the base, and the view's own type.
#[derive(Clone, Debug)]
pub(crate) struct View {
    pub steps: Vec<Step>,
    pub ty: TensorType,
}

fn ints(v: &ArgValue<Tensor>) -> Vec<i64> {
    match v {
        ArgValue::IntList(l) => l.clone(),
        ArgValue::Int(i) => vec![*i],
        _ => Vec::new(),
    }
}

/// How to undo the view op of `schema` (None: not a view op, or one PyTorch cannot write
/// through, like `expand`).
fn inverse_of(schema: &OpSchema, b: &Bound<Tensor>, input: &TensorType) -> Option<Inverse> {
    let rank = input.shape.len() as i64;
    let norm = |d: i64| if d < 0 { d + rank.max(1) } else { d };
    Some(match (schema.name, schema.overload) {
        ("select", "int") => Inverse::Scatter("select_scatter"),
        ("slice", "Tensor") => Inverse::Scatter("slice_scatter"),
        ("diagonal", "") => Inverse::Scatter("diagonal_scatter"),
        // `as_strided`'s sizes and strides address the storage: a base tensor's value here
        // (contiguous, offset 0); of a view it copies.
        ("as_strided", "") if !is_view_arg(b) => Inverse::Scatter("as_strided_scatter"),
        ("expand", "") => {
            let size = ints(&b.values[1]);
            let lead = size.len() as i64 - rank;
            let broadcasts = size.iter().enumerate().any(|(i, &n)| {
                let d = i as i64 - lead;
                n > 1 && (d < 0 || input.shape[d as usize] as i64 != n)
            });
            if broadcasts {
                Inverse::ReadOnly
            } else {
                Inverse::Reshape
            }
        }
        ("t", "") | ("transpose", "int") | ("permute", "") => {
            let mut perm: Vec<i64> = (0..rank).collect();
            match schema.name {
                "t" if rank == 2 => perm.swap(0, 1),
                "t" => {}
                "transpose" => {
                    let (a, c) = (
                        norm(*ints(&b.values[1]).first()?),
                        norm(*ints(&b.values[2]).first()?),
                    );
                    perm.swap(a as usize, c as usize);
                }
                _ => {
                    let p: Vec<i64> = ints(&b.values[1]).into_iter().map(norm).collect();
                    let mut inv = vec![0; p.len()];
                    for (i, &d) in p.iter().enumerate() {
                        *inv.get_mut(d as usize)? = i as i64;
                    }
                    perm = inv;
                }
            }
            Inverse::Permute(perm)
        }
        ("view" | "_unsafe_view" | "unsqueeze" | "alias" | "detach", "")
        | ("squeeze", "" | "dim" | "dims") => Inverse::Reshape,
        // `reshape` is a view of a base tensor (contiguous here); of a view it copies, as
        // PyTorch does for non-contiguous inputs.
        ("reshape", "") if !is_view_arg(b) => Inverse::Reshape,
        _ => return None,
    })
}

/// Whether the call's `self` is a view (not a base tensor).
fn is_view_arg(b: &Bound<Tensor>) -> bool {
    !b.values
        .first()
        .is_some_and(|v| matches!(v, ArgValue::Tensor(t) if !t.is_view()))
}

/// The ops whose result is a view of their first argument (when its inverse is known).
const VIEW_OPS: [&str; 15] = [
    "select",
    "slice",
    "diagonal",
    "as_strided",
    "expand",
    "t",
    "transpose",
    "permute",
    "view",
    "_unsafe_view",
    "unsqueeze",
    "alias",
    "detach",
    "squeeze",
    "reshape",
];

/// Whether `schema` may return a view of its input ([`as_view`]).
pub(crate) fn is_view_op(schema: &OpSchema) -> bool {
    VIEW_OPS.contains(&schema.name)
}

/// If the call is a view op, the view of its input (no program runs; `entry` gave its type).
pub(crate) fn as_view(entry: &OpEntry, b: &Bound<Tensor>) -> Result<Option<Tensor>> {
    if !is_view_op(b.schema) {
        return Ok(None);
    }
    let Some(ArgValue::Tensor(src)) = b.values.first() else {
        return Ok(None);
    };
    let input = src.ty();
    let Some(inverse) = inverse_of(b.schema, b, &input) else {
        return Ok(None);
    };
    let Some(OutKind::Tensor(i)) = entry.outs.first() else {
        return Ok(None);
    };
    let mut steps = src
        .view
        .as_ref()
        .map(|v| v.steps.clone())
        .unwrap_or_default();
    steps.push(Step {
        schema: b.schema,
        // Positional only: the step is replayed positionally (`expand`'s `implicit` is a
        // keyword argument that changes nothing here).
        rest: b.values[1..]
            .iter()
            .zip(&b.schema.args[1..])
            .filter(|(_, a)| !a.kwarg_only)
            .map(|(v, _)| v.clone())
            .collect(),
        input,
        inverse,
    });
    Ok(Some(Tensor {
        storage: src.storage.clone(),
        view: Some(Arc::new(View {
            steps,
            ty: entry.results[*i].clone(),
        })),
    }))
}

fn apply(rt: &mut Runtime, step: &Step, x: Tensor) -> Result<Tensor> {
    let mut args = vec![ArgValue::Tensor(x)];
    args.extend(step.rest.iter().cloned());
    rt.call_op(&step.schema.full_name(), args, false)
}

/// The view's value as a new base tensor (its chain run on the base's current value).
pub(crate) fn materialize(rt: &mut Runtime, t: &Tensor) -> Result<Tensor> {
    let mut cur = Tensor {
        storage: t.storage.clone(),
        view: None,
    };
    for step in t.view.iter().flat_map(|v| v.steps.iter()) {
        cur = apply(rt, step, cur)?;
    }
    Ok(cur)
}

/// Writes `src` through the view `target` into its base.
pub(crate) fn write_back(rt: &mut Runtime, target: &Tensor, src: &Tensor) -> Result<()> {
    let view = target.view.as_ref().expect("a view");
    let base = Tensor {
        storage: target.storage.clone(),
        view: None,
    };
    // The value each step reads, from the base on.
    let mut inputs = vec![base.clone()];
    for step in &view.steps[..view.steps.len() - 1] {
        let next = apply(rt, step, inputs.last().expect("non-empty").clone())?;
        inputs.push(next);
    }
    let mut cur = src.clone();
    for (step, input) in view.steps.iter().zip(inputs).rev() {
        cur = match &step.inverse {
            Inverse::Scatter(op) => {
                let mut args = vec![ArgValue::Tensor(input), ArgValue::Tensor(cur)];
                args.extend(step.rest.iter().cloned());
                rt.call_op(op, args, false)?
            }
            Inverse::Permute(p) => rt.call_op(
                "permute",
                vec![ArgValue::Tensor(cur), ArgValue::IntList(p.clone())],
                false,
            )?,
            Inverse::ReadOnly => {
                return Err(EagerError::Usage(format!(
                    "{}: unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.",
                    step.schema.full_name()
                )))
            }
            Inverse::Reshape => {
                let shape = step.input.shape.iter().map(|&d| d as i64).collect();
                rt.call_op(
                    "view",
                    vec![ArgValue::Tensor(cur), ArgValue::IntList(shape)],
                    false,
                )?
            }
        };
    }
    if cur.ty() != base.ty() {
        return Err(EagerError::Usage(format!(
            "writing through a view produced {:?}, its base is {:?}",
            cur.ty(),
            base.ty()
        )));
    }
    rt.assign(&base, &cur)
}
