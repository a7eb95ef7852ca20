//! Which lowering runs a call: a registered kernel override whose predicate accepts the
//! arguments (highest priority first), else the op's default lowering, else (for in-place and
//! `.out` overloads) the default lowering of the functional op they write the result of.

use crate::args::HostArgs;
use crate::aten;
use crate::error::OpError;
use crate::lower::{LowerFn, Lowering};
use crate::schema::{self, OpSchema};
use std::collections::HashMap;
use std::sync::OnceLock;
use tessera_runtime::DeviceKind;

/// A kernel registered for an op: `inventory::submit! { OpOverride { .. } }`.
#[derive(Debug)]
pub struct OpOverride {
    /// The overload's full name (`_softmax`, `add.Tensor`).
    pub op: &'static str,
    /// The kernel's name, for reports.
    pub kernel: &'static str,
    /// Higher wins when several apply.
    pub priority: i32,
    /// Whether the kernel handles these arguments (dtypes, ranks, shapes) on this device.
    pub applies: fn(&HostArgs, DeviceKind) -> bool,
    pub lower: LowerFn,
}

inventory::collect!(OpOverride);

/// What [`dispatch`] chose.
#[derive(Debug, Clone, Copy)]
pub enum Choice {
    Override(&'static OpOverride),
    Default(&'static Lowering),
    /// The in-place or `.out` overload has no lowering of its own: run `functional`'s and
    /// write its results into the mutated arguments.
    ViaFunctional {
        functional: &'static OpSchema,
        lowering: &'static Lowering,
    },
}

impl Choice {
    pub fn lower_fn(&self) -> LowerFn {
        match self {
            Choice::Override(o) => o.lower,
            Choice::Default(l) | Choice::ViaFunctional { lowering: l, .. } => l.lower,
        }
    }
    /// Whether the chosen lowering takes complex tensors (kernel overrides never do).
    pub fn accepts_complex(&self) -> bool {
        match self {
            Choice::Override(_) => false,
            Choice::Default(l) | Choice::ViaFunctional { lowering: l, .. } => l.complex,
        }
    }
    /// The override's kernel name, if an override was chosen.
    pub fn kernel(&self) -> Option<&'static str> {
        match self {
            Choice::Override(o) => Some(o.kernel),
            _ => None,
        }
    }
}

fn defaults() -> &'static HashMap<&'static str, &'static Lowering> {
    static MAP: OnceLock<HashMap<&'static str, &'static Lowering>> = OnceLock::new();
    MAP.get_or_init(|| aten::all().map(|l| (l.op, l)).collect())
}

/// The default lowering of `op` (full name), if there is one.
pub fn default_lowering(op: &str) -> Option<&'static Lowering> {
    defaults().get(op).copied()
}

/// Every override registered for `op`, highest priority first.
pub fn overrides(op: &str) -> Vec<&'static OpOverride> {
    let mut v: Vec<_> = inventory::iter::<OpOverride>
        .into_iter()
        .filter(|o| o.op == op)
        .collect();
    v.sort_by_key(|o| std::cmp::Reverse(o.priority));
    v
}

/// Whether `schema` can run: its own lowering, an override, or its functional op's lowering.
pub fn is_implemented(schema: &OpSchema) -> bool {
    let name = schema.full_name();
    default_lowering(&name).is_some() || schema.functional.and_then(default_lowering).is_some()
}

/// Picks the lowering for a call of `args.schema` on `device`; `use_overrides: false` skips
/// the overrides (to compare them with the default lowering).
pub fn dispatch(
    args: &HostArgs,
    device: DeviceKind,
    use_overrides: bool,
) -> Result<Choice, OpError> {
    let schema = args.schema;
    let name = schema.full_name();
    if use_overrides {
        if let Some(o) = overrides(&name)
            .into_iter()
            .find(|o| (o.applies)(args, device))
        {
            return Ok(Choice::Override(o));
        }
    }
    if let Some(l) = default_lowering(&name) {
        return Ok(Choice::Default(l));
    }
    if let Some(f) = schema.functional {
        if let (Some(functional), Some(lowering)) = (schema::find(f), default_lowering(f)) {
            return Ok(Choice::ViaFunctional {
                functional,
                lowering,
            });
        }
    }
    Err(OpError::NotImplemented { op: name })
}
