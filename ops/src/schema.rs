//! The op table: every ATen overload Tessera knows, as read from PyTorch's own registry by
//! `ops/tools/extract_schemas.py` into `ops/aten_ops.json` and compiled into [`OPS`].

use rustc_hash::FxHashMap;
use std::sync::OnceLock;

/// The kind of a schema argument or return, with `?` and fixed lengths held apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgType {
    Tensor,
    /// `Tensor[]`.
    TensorList,
    /// `Tensor?[]` (the indices of `index.Tensor`).
    OptTensorList,
    /// A number: bool, int or float, with PyTorch's "wrapped number" promotion rules.
    Scalar,
    Bool,
    /// `int` and `SymInt`.
    Int,
    /// `int[]`, `int[2]`, `SymInt[]`.
    IntList,
    Float,
    FloatList,
    BoolList,
    /// `ScalarType`.
    DType,
    Str,
    /// Layout, Device, MemoryFormat, Generator: accepted and ignored (dense, row-major, on the
    /// call's device, seeds explicit).
    Opaque,
}

/// Tags of an overload, from torch's tags and its schema's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tag {
    /// In the Core ATen IR.
    Core,
    Pointwise,
    /// `add_`: writes its result into `self`.
    Inplace,
    /// `add.out`: writes its results into the `out` arguments.
    Out,
    /// Returns an alias of an input.
    View,
    ViewCopy,
    /// Draws random numbers (`nondeterministic_seeded`).
    Random,
    /// The output's shape depends on the input's values (`nonzero`).
    DynamicShape,
    InplaceView,
}

#[derive(Debug)]
pub struct ArgSchema {
    pub name: &'static str,
    pub ty: ArgType,
    pub optional: bool,
    /// The `2` of `int[2]`: a single int given for it is repeated.
    pub len: Option<usize>,
    /// The default as schema text (`1`, `None`, `[0, 0]`, `"none"`).
    pub default: Option<&'static str>,
    pub kwarg_only: bool,
    /// Written by the op (`Tensor(a!)`).
    pub mutable: bool,
    /// One of the `out` arguments of a `.out` overload.
    pub out: bool,
}

#[derive(Debug)]
pub struct ReturnSchema {
    pub ty: ArgType,
    /// Alias annotation (`a!`, `a`) when the return aliases an argument.
    pub alias: Option<&'static str>,
}

/// One ATen overload.
#[derive(Debug)]
pub struct OpSchema {
    pub name: &'static str,
    /// Empty for the default overload.
    pub overload: &'static str,
    /// The schema as PyTorch prints it.
    pub schema: &'static str,
    pub args: &'static [ArgSchema],
    pub returns: &'static [ReturnSchema],
    pub tags: &'static [Tag],
    /// For in-place and `.out` overloads: the functional overload whose result they write.
    pub functional: Option<&'static str>,
}

impl OpSchema {
    /// `add.Tensor`, or `abs` for a default overload.
    pub fn full_name(&self) -> String {
        if self.overload.is_empty() {
            self.name.to_string()
        } else {
            format!("{}.{}", self.name, self.overload)
        }
    }

    pub fn has_tag(&self, tag: Tag) -> bool {
        self.tags.contains(&tag)
    }

    pub fn is_core(&self) -> bool {
        self.has_tag(Tag::Core)
    }
}

include!(concat!(env!("OUT_DIR"), "/op_table.rs"));

/// The overload named `op`: `aten::add.Tensor`, `add.Tensor`, `aten::abs`, `abs.default`.
pub fn find(op: &str) -> Option<&'static OpSchema> {
    let op = op.strip_prefix("aten::").unwrap_or(op);
    let op = op.strip_suffix(".default").unwrap_or(op);
    let (name, overload) = op.split_once('.').unwrap_or((op, ""));
    let index: &FxHashMap<(&str, &str), &'static OpSchema> = index();
    index.get(&(name, overload)).copied()
}

/// The table by name and overload, built on the first lookup: every op call by name looks
/// one up, and a binary search of the names was ~8% of a tiny op's call.
fn index() -> &'static FxHashMap<(&'static str, &'static str), &'static OpSchema> {
    static INDEX: OnceLock<FxHashMap<(&'static str, &'static str), &'static OpSchema>> =
        OnceLock::new();
    INDEX.get_or_init(|| OPS.iter().map(|s| ((s.name, s.overload), s)).collect())
}

/// Every overload in the table.
pub fn table() -> &'static [OpSchema] {
    OPS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_has_the_core_set() {
        assert!(OPS
            .windows(2)
            .all(|w| (w[0].name, w[0].overload) < (w[1].name, w[1].overload)));
        assert_eq!(OPS.iter().filter(|s| s.is_core()).count(), 193);
        assert!(OPS.len() >= 450);
    }

    #[test]
    fn finds_overloads_by_any_spelling() {
        let add = find("aten::add.Tensor").unwrap();
        assert_eq!(add.full_name(), "add.Tensor");
        assert_eq!(add.args[2].name, "alpha");
        assert_eq!(add.args[2].default, Some("1"));
        assert!(add.args[2].kwarg_only);
        assert_eq!(find("abs.default").unwrap().full_name(), "abs");
        assert_eq!(find("add_.Tensor").unwrap().functional, Some("add.Tensor"));
        assert!(find("aten::no_such_op").is_none());
    }
}
