//! Scoped scratch: `RunScoped` as Pallas lowers `run_scoped` (jax 0.10.2): a `tpu.region`
//! that allocates its buffers at its start and yields the scope's results.

use super::body::Lower;
use super::error::MosaicError;
use super::printer::V;
use super::types::mlir_type;
use crate::ir::{MemorySpace, Operation, Region, Type};

impl Lower<'_> {
    /// `tpu.region` whose buffers are allocated inside it (`memref.alloca` for VMEM/SMEM,
    /// `tpu.sem_alloc` for semaphores) and freed at its end, as Pallas lowers `run_scoped`.
    pub(super) fn run_scoped(
        &mut self,
        op: &Operation,
        body: &Region,
    ) -> Result<Vec<V>, MosaicError> {
        let results: Vec<String> = op.results.iter().map(|r| mlir_type(self.ty(*r))).collect();
        self.p.begin_block(&[]);
        let mut buffers = Vec::with_capacity(body.args.len());
        for a in &body.args {
            let ty = mlir_type(self.ty(*a));
            buffers.push(match self.ty(*a) {
                Type::Ref {
                    space: MemorySpace::Semaphore,
                    ..
                } => self.p.op1("tpu.sem_alloc", &[], "", ty),
                _ => self.p.op1(
                    "memref.alloca",
                    &[],
                    "operandSegmentSizes = array<i32: 0, 0>",
                    ty,
                ),
            });
        }
        self.bind(&body.args, &buffers);
        let ys = self.region_ops(body)?;
        let refs: Vec<&V> = ys.iter().collect();
        self.p.op("tpu.yield", &refs, "", &[]);
        let region = self.p.end_block();
        Ok(self
            .p
            .op_with_regions("tpu.region", &[], "", &results, vec![region]))
    }
}
