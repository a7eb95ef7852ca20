//! An IR function: a kernel body (params are refs, no results) or an index map (params are
//! grid indices, results are block indices).

use super::loc::Loc;
use super::op::{Region, ValueId};
use super::types::Type;

#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    pub name: String,
    /// Type of every value, indexed by [`ValueId`].
    pub values: Vec<Type>,
    /// Params are the body's args, results its yields.
    pub body: Region,
    /// Where the user defined it (the kernel fn, or the `BlockSpec::new` call of an index map).
    pub loc: Loc,
}

impl Func {
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.values[v.0 as usize]
    }

    pub fn params(&self) -> &[ValueId] {
        &self.body.args
    }

    pub fn results(&self) -> &[ValueId] {
        &self.body.yields
    }

    pub fn param_types(&self) -> Vec<Type> {
        self.params().iter().map(|v| self.ty(*v).clone()).collect()
    }

    pub fn result_types(&self) -> Vec<Type> {
        self.results().iter().map(|v| self.ty(*v).clone()).collect()
    }
}
