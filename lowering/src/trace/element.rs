//! Element types a kernel can name. Generic over one `E`, so `Tile<f32> + Tile<bf16>` does
//! not compile: cast first.

use crate::dtype::DType;
use crate::host::HostElement;
use half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
}

/// A kernel element type.
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    const DTYPE: DType;
}

/// Elements with arithmetic (every element but `bool`).
pub trait Numeric: Element {}

/// Floating-point elements.
pub trait Float: Numeric {}

/// Integer elements: what bitwise ops and shifts take.
pub trait Int: Numeric {}

macro_rules! elements {
    ($($t:ty),*) => {
        $(impl sealed::Sealed for $t {} impl Element for $t { const DTYPE: DType = <$t as HostElement>::DTYPE; })*
    };
}
elements!(bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64);

macro_rules! numeric {
    ($($t:ty),*) => { $(impl Numeric for $t {})* };
}
numeric!(i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64);

macro_rules! int {
    ($($t:ty),*) => { $(impl Int for $t {})* };
}
int!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Float for f32 {}
impl Float for bf16 {}
impl Float for f16 {}
impl Float for f64 {}
