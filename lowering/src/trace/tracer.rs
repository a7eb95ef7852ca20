//! `KernelTracer`: what a kernel's generated `trace` asks for its parameters.

use super::builder::Val;
use super::element::Element;
use super::error::TraceError;
use super::refs::{Prefetch, PrefetchElement, Ref, RefMut, Scratch};
use crate::dtype::DType;
use crate::ir::Loc;

/// Hands out the refs of one trace of a kernel body: scalar-prefetch arrays (whole), inputs,
/// outputs and scratch buffers, each bound to the launch's shape and dtype.
pub struct KernelTracer {
    pub(crate) kernel: &'static str,
    pub(crate) kernel_loc: Loc,
    pub(crate) prefetch: Vec<(DType, Val)>,
    pub(crate) inputs: Vec<(DType, Val)>,
    pub(crate) outputs: Vec<(DType, Val)>,
    pub(crate) scratch: Vec<(DType, Val)>,
}

impl KernelTracer {
    /// The `i`-th scalar-prefetch array (position among the prefetch parameters).
    #[track_caller]
    pub fn prefetch<E: PrefetchElement>(&mut self, i: usize) -> Result<Prefetch<E>, TraceError> {
        self.param::<E>("scalar prefetch", i, |t| &t.prefetch)
            .map(Prefetch::new)
    }

    /// The `i`-th input block ref (position among the inputs).
    #[track_caller]
    pub fn input<E: Element>(&mut self, i: usize) -> Result<Ref<E>, TraceError> {
        self.param::<E>("input", i, |t| &t.inputs).map(Ref::new)
    }

    /// The `i`-th output block ref (position among the outputs).
    #[track_caller]
    pub fn output<E: Element>(&mut self, i: usize) -> Result<RefMut<E>, TraceError> {
        self.param::<E>("output", i, |t| &t.outputs)
            .map(RefMut::new)
    }

    /// The `i`-th scratch buffer (position among the scratch parameters).
    #[track_caller]
    pub fn scratch<E: Element>(&mut self, i: usize) -> Result<Scratch<E>, TraceError> {
        self.param::<E>("scratch", i, |t| &t.scratch)
            .map(Scratch::new)
    }

    /// The kernel's name and definition site, for errors about the kernel as a whole.
    pub fn kernel(&self) -> (&'static str, Loc) {
        (self.kernel, self.kernel_loc)
    }

    #[track_caller]
    fn param<E: Element>(
        &self,
        role: &'static str,
        i: usize,
        list: impl Fn(&Self) -> &Vec<(DType, Val)>,
    ) -> Result<Val, TraceError> {
        let loc = Loc::caller();
        let params = list(self);
        let &(dtype, v) = params.get(i).ok_or_else(|| TraceError::Param {
            message: format!(
                "kernel `{}` asks for {role} #{i}, the launch binds {}",
                self.kernel,
                params.len()
            ),
            loc,
        })?;
        if dtype != E::DTYPE {
            return Err(TraceError::DTypeMismatch {
                kernel: self.kernel,
                what: format!("{role} #{i} as bound by the launch"),
                expected: dtype,
                got: E::DTYPE,
                loc,
            });
        }
        Ok(v)
    }
}
