//! IR types as Mosaic MLIR types: scalars stay scalars, tiles become `vector<..>`, refs
//! become `memref<.., #tpu.memory_space<..>>` (spelled by the MLIR text layer).

use crate::ir::Type;
pub(crate) use crate::mlir::literal::attr_value as literal;
pub(crate) use crate::mlir::types::{dense_array, memref, vector};

pub(crate) fn mlir_type(t: &Type) -> String {
    match t {
        Type::Value { dtype, shape } => vector(*dtype, shape),
        Type::Ref {
            dtype,
            shape,
            space,
        } => memref(*dtype, shape, *space),
    }
}
