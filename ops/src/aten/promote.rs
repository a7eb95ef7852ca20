//! PyTorch's type promotion (`torch.result_type`): dtype categories (bool < integral <
//! floating), and three priorities of operands: tensors with dims, zero-dim tensors, and
//! Python numbers ("wrapped numbers"). A lower-priority operand only changes the result when
//! it is of a higher category (`int_tensor + 2.5` is float, `f16_tensor + f64_0d` stays f16).

use crate::value::Scalar;
use tessera_lowering::stablehlo::Value;
use tessera_lowering::DType;

/// An operand of a promoting op.
#[derive(Clone, Debug)]
pub enum Operand {
    Tensor(Value),
    Scalar(Scalar),
}

impl Operand {
    pub fn dtype(&self) -> DType {
        match self {
            Operand::Tensor(v) => v.dtype(),
            Operand::Scalar(s) => s.default_dtype(),
        }
    }
}

impl From<Value> for Operand {
    fn from(v: Value) -> Self {
        Operand::Tensor(v)
    }
}

impl From<&Value> for Operand {
    fn from(v: &Value) -> Self {
        Operand::Tensor(v.clone())
    }
}

impl From<Scalar> for Operand {
    fn from(s: Scalar) -> Self {
        Operand::Scalar(s)
    }
}

fn category(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        d if d.is_complex() => 3,
        d if d.is_float() => 2,
        _ => 1,
    }
}

/// `torch.promote_types(a, b)`.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    if a.is_complex() || b.is_complex() {
        // The complex type whose parts hold both (c64 + f64 -> c128, c64 + i64 -> c64).
        let part = promote_types(a.component(), b.component());
        return part.to_complex().unwrap_or(C64);
    }
    match (category(a), category(b)) {
        (0, _) => return b,
        (_, 0) => return a,
        (2, 1) => return a,
        (1, 2) => return b,
        _ => {}
    }
    if a.is_float() {
        return match (a, b) {
            (F16, BF16) | (BF16, F16) => F32,
            _ if a.bits() >= b.bits() => a,
            _ => b,
        };
    }
    // Both integral.
    match (a.is_signed_int(), b.is_signed_int()) {
        (true, true) | (false, false) => {
            if a.bits() >= b.bits() {
                a
            } else {
                b
            }
        }
        (s_a, _) => {
            let (signed, unsigned) = if s_a { (a, b) } else { (b, a) };
            if signed.bits() > unsigned.bits() {
                signed
            } else {
                match unsigned.bits() {
                    8 => I16,
                    16 => I32,
                    _ => I64,
                }
            }
        }
    }
}

/// Combines the result of a higher-priority class with a lower one, as c10's
/// `combine_categories` does.
fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) => {
            if h.is_complex() {
                Some(h)
            } else if l.is_complex() {
                // A float keeps its precision (f64 + 1j -> c128); an integer takes l's.
                Some(h.to_complex().unwrap_or(l))
            } else if h.is_float() {
                Some(h)
            } else if h == DType::Bool || l.is_float() {
                Some(promote_types(h, l))
            } else {
                Some(h)
            }
        }
    }
}

/// `torch.result_type` over the operands.
pub fn result_type(operands: &[Operand]) -> DType {
    let (mut dim, mut zero, mut wrapped) = (None, None, None);
    let fold = |acc: Option<DType>, d: DType| Some(acc.map_or(d, |a| promote_types(a, d)));
    for o in operands {
        match o {
            Operand::Tensor(v) if v.rank() > 0 => dim = fold(dim, v.dtype()),
            Operand::Tensor(v) => zero = fold(zero, v.dtype()),
            Operand::Scalar(s) => wrapped = fold(wrapped, s.default_dtype()),
        }
    }
    combine(dim, combine(zero, wrapped)).unwrap_or(DType::F32)
}

/// The dtype floating-point ops (true division, `sqrt`, `mean`) compute in: floats keep theirs,
/// integers and bool become the default float dtype (f32).
pub fn to_float(d: DType) -> DType {
    if d.is_float() || d.is_complex() {
        d
    } else {
        DType::F32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn promote_table() {
        assert_eq!(promote_types(U8, I8), I16);
        assert_eq!(promote_types(Bool, I32), I32);
        assert_eq!(promote_types(I64, F16), F16);
        assert_eq!(promote_types(BF16, F16), F32);
        assert_eq!(promote_types(I32, I64), I64);
        assert_eq!(promote_types(U8, I32), I32);
        assert_eq!(promote_types(C64, F64), C128);
        assert_eq!(promote_types(I64, C64), C64);
        assert_eq!(promote_types(C64, BF16), C64);
        assert_eq!(promote_types(Bool, C128), C128);
    }
}
