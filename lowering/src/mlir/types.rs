//! MLIR type and array-attribute spellings.

use crate::dtype::DType;
use crate::ir::MemorySpace;

/// `2x3` (empty for a scalar shape).
pub fn dims(shape: &[usize]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// `tensor<2x3xf32>`, `tensor<i1>` for rank 0 (StableHLO's signed/unsigned int names).
pub fn tensor(dtype: DType, shape: &[usize]) -> String {
    let mut s = String::from("tensor<");
    for d in shape {
        s += &format!("{d}x");
    }
    s + dtype.stablehlo_name() + ">"
}

/// `vector<8x128xf32>`, or the bare signless element type for a scalar.
pub fn vector(dtype: DType, shape: &[usize]) -> String {
    let elem = dtype.mlir_signless_name();
    if shape.is_empty() {
        return elem.to_string();
    }
    format!("vector<{}x{elem}>", dims(shape))
}

/// `memref<8x128xf32, #tpu.memory_space<vmem>>`.
/// Semaphore memory holds `!tpu.dma_semaphore`s whatever the IR's element type.
pub fn memref(dtype: DType, shape: &[usize], space: MemorySpace) -> String {
    let elem = match space {
        MemorySpace::Semaphore => "!tpu.dma_semaphore",
        _ => dtype.mlir_signless_name(),
    };
    let space = space.name();
    if shape.is_empty() {
        return format!("memref<{elem}, #tpu.memory_space<{space}>>");
    }
    format!("memref<{}x{elem}, #tpu.memory_space<{space}>>", dims(shape))
}

/// `array<i64: 2, 2, 3>` (a dense array attribute of `elem`).
pub fn dense_array(elem: &str, values: &[usize]) -> String {
    let v: Vec<String> = values.iter().map(|d| d.to_string()).collect();
    if v.is_empty() {
        return format!("array<{elem}>");
    }
    format!("array<{elem}: {}>", v.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spells_types() {
        assert_eq!(tensor(DType::F32, &[2, 3]), "tensor<2x3xf32>");
        assert_eq!(tensor(DType::Bool, &[]), "tensor<i1>");
        assert_eq!(tensor(DType::U8, &[0, 4]), "tensor<0x4xui8>");
        assert_eq!(vector(DType::U8, &[8, 128]), "vector<8x128xi8>");
        assert_eq!(vector(DType::F32, &[]), "f32");
        assert_eq!(
            memref(DType::I32, &[4], MemorySpace::Smem),
            "memref<4xi32, #tpu.memory_space<smem>>"
        );
        assert_eq!(dense_array("i64", &[1, 2]), "array<i64: 1, 2>");
        assert_eq!(dense_array("i32", &[]), "array<i32>");
    }
}
