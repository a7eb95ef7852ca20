//! Kernels written out exactly as `#[tpu_kernel]` expands them (docs/macro-contract.md),
//! so these tests prove the contract without the macro. Bodies use only the prelude.
//!
//! One deviation the macro must also make: `&mut RefMut`/`&mut Scratch` params are
//! re-bound as shared refs (`let o = &*o;`) at the top of the body, because the `move`
//! closures of `__if_else` would otherwise both try to take the same `&mut`. And `launch()`
//! carries `#[track_caller]` so `Launch::loc` is the user's call.

use tessera_lowering as L;
use tessera_lowering::prelude::*;

/// `o = x + y`.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default)]
pub struct add;

impl add {
    #[allow(unused_mut, unused_variables, unused_assignments, clippy::all)]
    pub fn body<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>) {
        let o = &*o;
        o.store(x.load() + y.load());
    }
    #[track_caller]
    pub fn launch() -> L::trace::Launch {
        L::trace::Launch::new(&add)
    }
}

impl L::kernel::Kernel for add {
    fn info(&self) -> &'static L::kernel::KernelInfo {
        static INFO: L::kernel::KernelInfo = L::kernel::KernelInfo {
            name: "add",
            file: file!(),
            line: 15,
            column: 12,
            generic: L::kernel::Generic::Float,
            params: &[
                L::kernel::ParamInfo {
                    name: "x",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "y",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "o",
                    role: L::kernel::ParamRole::Output,
                    dtype: None,
                },
            ],
        };
        &INFO
    }
    fn trace(
        &self,
        tracer: &mut L::trace::KernelTracer,
        dtype: Option<L::DType>,
    ) -> Result<(), L::trace::TraceError> {
        struct __V;
        impl L::kernel::FloatVisitor for __V {
            fn visit<T: L::trace::Float>(
                self,
                tracer: &mut L::trace::KernelTracer,
            ) -> Result<(), L::trace::TraceError> {
                let x = tracer.input::<T>(0)?;
                let y = tracer.input::<T>(1)?;
                let mut o = tracer.output::<T>(0)?;
                add::body::<T>(&x, &y, &mut o);
                Ok(())
            }
        }
        L::kernel::visit_float(dtype, tracer, __V)
    }
}
L::inventory::submit! { L::kernel::KernelRegistration(&add) }

/// `o = x * sigmoid(x)` computed in f32.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default)]
pub struct silu;

impl silu {
    #[allow(unused_mut, unused_variables, unused_assignments, clippy::all)]
    pub fn body<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
        let o = &*o;
        let v = x.load().cast::<f32>();
        o.store((v * sigmoid(v)).cast::<T>());
    }
    #[track_caller]
    pub fn launch() -> L::trace::Launch {
        L::trace::Launch::new(&silu)
    }
}

impl L::kernel::Kernel for silu {
    fn info(&self) -> &'static L::kernel::KernelInfo {
        static INFO: L::kernel::KernelInfo = L::kernel::KernelInfo {
            name: "silu",
            file: file!(),
            line: 64,
            column: 12,
            generic: L::kernel::Generic::Float,
            params: &[
                L::kernel::ParamInfo {
                    name: "x",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "o",
                    role: L::kernel::ParamRole::Output,
                    dtype: None,
                },
            ],
        };
        &INFO
    }
    fn trace(
        &self,
        tracer: &mut L::trace::KernelTracer,
        dtype: Option<L::DType>,
    ) -> Result<(), L::trace::TraceError> {
        struct __V;
        impl L::kernel::FloatVisitor for __V {
            fn visit<T: L::trace::Float>(
                self,
                tracer: &mut L::trace::KernelTracer,
            ) -> Result<(), L::trace::TraceError> {
                let x = tracer.input::<T>(0)?;
                let mut o = tracer.output::<T>(0)?;
                silu::body::<T>(&x, &mut o);
                Ok(())
            }
        }
        L::kernel::visit_float(dtype, tracer, __V)
    }
}
L::inventory::submit! { L::kernel::KernelRegistration(&silu) }

/// Tiled matmul: 3-D grid (i, j, k), f32 accumulator in scratch, k last and arbitrary.
/// The user wrote:
/// ```ignore
/// if program_id(2).eq(0) { acc.store(zeros()); }
/// acc.store(acc.load() + dot(x.load(), y.load()));
/// if program_id(2).eq(num_programs(2) - 1) { o.store(acc.load().cast::<T>()); }
/// ```
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default)]
pub struct matmul;

impl matmul {
    #[allow(unused_mut, unused_variables, unused_assignments, clippy::all)]
    pub fn body<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>, acc: &mut Scratch<f32>) {
        let o = &*o;
        let acc = &*acc;
        {
            let (__carry, __res) = L::trace::__if_else(
                program_id(2).eq(0),
                (),
                move |()| {
                    let __r = {
                        acc.store(zeros());
                    };
                    ((), __r)
                },
                move |()| {
                    let __r = {};
                    ((), __r)
                },
            );
            () = __carry;
            __res
        }
        acc.store(acc.load() + dot(x.load(), y.load()));
        {
            let (__carry, __res) = L::trace::__if_else(
                program_id(2).eq(num_programs(2) - 1),
                (),
                move |()| {
                    let __r = {
                        o.store(acc.load().cast::<T>());
                    };
                    ((), __r)
                },
                move |()| {
                    let __r = {};
                    ((), __r)
                },
            );
            () = __carry;
            __res
        }
    }
    #[track_caller]
    pub fn launch() -> L::trace::Launch {
        L::trace::Launch::new(&matmul)
    }
}

impl L::kernel::Kernel for matmul {
    fn info(&self) -> &'static L::kernel::KernelInfo {
        static INFO: L::kernel::KernelInfo = L::kernel::KernelInfo {
            name: "matmul",
            file: file!(),
            line: 118,
            column: 12,
            generic: L::kernel::Generic::Float,
            params: &[
                L::kernel::ParamInfo {
                    name: "x",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "y",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "o",
                    role: L::kernel::ParamRole::Output,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "acc",
                    role: L::kernel::ParamRole::Scratch,
                    dtype: Some(<f32 as L::trace::Element>::DTYPE),
                },
            ],
        };
        &INFO
    }
    fn trace(
        &self,
        tracer: &mut L::trace::KernelTracer,
        dtype: Option<L::DType>,
    ) -> Result<(), L::trace::TraceError> {
        struct __V;
        impl L::kernel::FloatVisitor for __V {
            fn visit<T: L::trace::Float>(
                self,
                tracer: &mut L::trace::KernelTracer,
            ) -> Result<(), L::trace::TraceError> {
                let x = tracer.input::<T>(0)?;
                let y = tracer.input::<T>(1)?;
                let mut o = tracer.output::<T>(0)?;
                let mut acc = tracer.scratch::<f32>(0)?;
                matmul::body::<T>(&x, &y, &mut o, &mut acc);
                Ok(())
            }
        }
        L::kernel::visit_float(dtype, tracer, __V)
    }
}
L::inventory::submit! { L::kernel::KernelRegistration(&matmul) }

/// Row softmax of a [bm, n] block, in f32.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default)]
pub struct softmax;

impl softmax {
    #[allow(unused_mut, unused_variables, unused_assignments, clippy::all)]
    pub fn body<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
        let o = &*o;
        let v = x.load().cast::<f32>();
        let e = exp(v - v.max(1, true));
        o.store((e / e.sum(1, true)).cast::<T>());
    }
    #[track_caller]
    pub fn launch() -> L::trace::Launch {
        L::trace::Launch::new(&softmax)
    }
}

impl L::kernel::Kernel for softmax {
    fn info(&self) -> &'static L::kernel::KernelInfo {
        static INFO: L::kernel::KernelInfo = L::kernel::KernelInfo {
            name: "softmax",
            file: file!(),
            line: 210,
            column: 12,
            generic: L::kernel::Generic::Float,
            params: &[
                L::kernel::ParamInfo {
                    name: "x",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "o",
                    role: L::kernel::ParamRole::Output,
                    dtype: None,
                },
            ],
        };
        &INFO
    }
    fn trace(
        &self,
        tracer: &mut L::trace::KernelTracer,
        dtype: Option<L::DType>,
    ) -> Result<(), L::trace::TraceError> {
        struct __V;
        impl L::kernel::FloatVisitor for __V {
            fn visit<T: L::trace::Float>(
                self,
                tracer: &mut L::trace::KernelTracer,
            ) -> Result<(), L::trace::TraceError> {
                let x = tracer.input::<T>(0)?;
                let mut o = tracer.output::<T>(0)?;
                softmax::body::<T>(&x, &mut o);
                Ok(())
            }
        }
        L::kernel::visit_float(dtype, tracer, __V)
    }
}
L::inventory::submit! { L::kernel::KernelRegistration(&softmax) }

/// Layer norm over the last dim with scale `g` and shift `b` (both [1, n]), in f32.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default)]
pub struct layer_norm;

impl layer_norm {
    #[allow(unused_mut, unused_variables, unused_assignments, clippy::all)]
    pub fn body<T: Float>(x: &Ref<T>, g: &Ref<T>, b: &Ref<T>, o: &mut RefMut<T>) {
        let o = &*o;
        let v = x.load().cast::<f32>();
        let n = v.shape()[1] as f64;
        let mean = v.sum(1, true) / n;
        let d = v - mean;
        let var = (d * d).sum(1, true) / n;
        let y = d * (var + 1e-5).rsqrt();
        o.store((y * g.load().cast::<f32>() + b.load().cast::<f32>()).cast::<T>());
    }
    #[track_caller]
    pub fn launch() -> L::trace::Launch {
        L::trace::Launch::new(&layer_norm)
    }
}

impl L::kernel::Kernel for layer_norm {
    fn info(&self) -> &'static L::kernel::KernelInfo {
        static INFO: L::kernel::KernelInfo = L::kernel::KernelInfo {
            name: "layer_norm",
            file: file!(),
            line: 259,
            column: 12,
            generic: L::kernel::Generic::Float,
            params: &[
                L::kernel::ParamInfo {
                    name: "x",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "g",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "b",
                    role: L::kernel::ParamRole::Input,
                    dtype: None,
                },
                L::kernel::ParamInfo {
                    name: "o",
                    role: L::kernel::ParamRole::Output,
                    dtype: None,
                },
            ],
        };
        &INFO
    }
    fn trace(
        &self,
        tracer: &mut L::trace::KernelTracer,
        dtype: Option<L::DType>,
    ) -> Result<(), L::trace::TraceError> {
        struct __V;
        impl L::kernel::FloatVisitor for __V {
            fn visit<T: L::trace::Float>(
                self,
                tracer: &mut L::trace::KernelTracer,
            ) -> Result<(), L::trace::TraceError> {
                let x = tracer.input::<T>(0)?;
                let g = tracer.input::<T>(1)?;
                let b = tracer.input::<T>(2)?;
                let mut o = tracer.output::<T>(0)?;
                layer_norm::body::<T>(&x, &g, &b, &mut o);
                Ok(())
            }
        }
        L::kernel::visit_float(dtype, tracer, __V)
    }
}
L::inventory::submit! { L::kernel::KernelRegistration(&layer_norm) }

/// Sums the 128-wide column chunks of a block in a traced loop with a carried accumulator,
/// and negates the result on odd grid steps through an `if` with a result:
/// ```ignore
/// let mut acc = full([8, 128], 0.0);
/// let mut count = zeros::<f32>();
/// for j in range(x.shape()[1] as i32 / 128) {
///     acc += x.load_slice((0, j * 128), [8, 128]).cast::<f32>();
///     count = count + 1.0;
/// }
/// let sign = if (program_id(0) % 2).eq(1) { full([1, 1], -1.0) } else { full([1, 1], 1.0) };
/// o.store(acc * sign / count);
/// ```
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default)]
pub struct chunk_mean;

impl chunk_mean {
    #[allow(unused_mut, unused_variables, unused_assignments, clippy::all)]
    pub fn body(x: &Ref<f32>, o: &mut RefMut<f32>) {
        let o = &*o;
        let mut acc = full([8, 128], 0.0);
        let mut count = zeros::<f32>();
        {
            let __carry = L::trace::__fori(
                0,
                x.shape()[1] as i32 / 128,
                (acc, count),
                move |j, (mut acc, mut count)| {
                    acc += x.load_slice((0, j * 128), [8, 128]).cast::<f32>();
                    count = count + 1.0;
                    (acc, count)
                },
            );
            (acc, count) = __carry;
        }
        let sign = {
            let (__carry, __res) = L::trace::__if_else(
                (program_id(0) % 2).eq(1),
                (),
                move |()| {
                    let __r = { full([1, 1], -1.0) };
                    ((), __r)
                },
                move |()| {
                    let __r = { full([1, 1], 1.0) };
                    ((), __r)
                },
            );
            () = __carry;
            __res
        };
        o.store(acc * sign / count);
    }
    #[track_caller]
    pub fn launch() -> L::trace::Launch {
        L::trace::Launch::new(&chunk_mean)
    }
}

impl L::kernel::Kernel for chunk_mean {
    fn info(&self) -> &'static L::kernel::KernelInfo {
        static INFO: L::kernel::KernelInfo = L::kernel::KernelInfo {
            name: "chunk_mean",
            file: file!(),
            line: 327,
            column: 12,
            generic: L::kernel::Generic::None,
            params: &[
                L::kernel::ParamInfo {
                    name: "x",
                    role: L::kernel::ParamRole::Input,
                    dtype: Some(L::DType::F32),
                },
                L::kernel::ParamInfo {
                    name: "o",
                    role: L::kernel::ParamRole::Output,
                    dtype: Some(L::DType::F32),
                },
            ],
        };
        &INFO
    }
    fn trace(
        &self,
        tracer: &mut L::trace::KernelTracer,
        _dtype: Option<L::DType>,
    ) -> Result<(), L::trace::TraceError> {
        let x = tracer.input::<f32>(0)?;
        let mut o = tracer.output::<f32>(0)?;
        chunk_mean::body(&x, &mut o);
        Ok(())
    }
}
L::inventory::submit! { L::kernel::KernelRegistration(&chunk_mean) }
