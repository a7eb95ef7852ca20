//! DType <-> PJRT_Buffer_Type.

use crate::error::{Result, RuntimeError};
use crate::ffi::PJRT_Buffer_Type as B;
use tessera_lowering::DType;

pub(crate) fn to_pjrt(d: DType) -> B {
    match d {
        DType::Bool => B::PJRT_Buffer_Type_PRED,
        DType::I8 => B::PJRT_Buffer_Type_S8,
        DType::I16 => B::PJRT_Buffer_Type_S16,
        DType::I32 => B::PJRT_Buffer_Type_S32,
        DType::I64 => B::PJRT_Buffer_Type_S64,
        DType::U8 => B::PJRT_Buffer_Type_U8,
        DType::U16 => B::PJRT_Buffer_Type_U16,
        DType::U32 => B::PJRT_Buffer_Type_U32,
        DType::U64 => B::PJRT_Buffer_Type_U64,
        DType::F16 => B::PJRT_Buffer_Type_F16,
        DType::BF16 => B::PJRT_Buffer_Type_BF16,
        DType::F32 => B::PJRT_Buffer_Type_F32,
        DType::F64 => B::PJRT_Buffer_Type_F64,
        DType::C64 => B::PJRT_Buffer_Type_C64,
        DType::C128 => B::PJRT_Buffer_Type_C128,
    }
}

pub(crate) fn from_pjrt(t: B) -> Result<DType> {
    DType::ALL
        .into_iter()
        .find(|d| to_pjrt(*d) == t)
        .ok_or_else(|| {
            RuntimeError::UnsupportedBufferType(format!("{t:?}").replace("PJRT_Buffer_Type_", ""))
        })
}
