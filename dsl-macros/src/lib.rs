//! `#[tpu_kernel]`: turns a Rust function into a traced Tessera kernel.
//!
//! The exact output is specified in `docs/macro-contract.md`. The crate is split like CubeCL's:
//! `parse/` checks the user's function and builds a model, `expand/` turns the model into tokens,
//! file for file (`parse/kernel.rs` <-> `expand/kernel.rs`, ...). `carried` is the one analysis the
//! rewriting needs: which outer variables an `if` or `range` loop assigns.

use proc_macro::TokenStream;

mod carried;
mod crate_path;
mod expand;
mod parse;
#[cfg(test)]
mod test_util;

/// Turns `fn name(params) { body }` into a kernel type `name` with `name::body`, `name::launch()`,
/// an `impl Kernel` (metadata + trace entry) and a registration in the kernel inventory.
///
/// Parameters are `&Ref<E>` (inputs), `&mut RefMut<E>` (outputs) and `&mut Scratch<E>` (scratch
/// buffers); `E` is a concrete element type or the one generic `T: Float` / `T: Element`.
/// `if`/`else`, `while` and `for i in range(..)` are rewritten into traced regions; syntax that
/// cannot be traced (`match`, `loop`, closures, early `return`, `?`, ...) is a compile error at
/// its span.
///
/// ```
/// use tessera_lowering::prelude::*;
/// use tessera_macros::tpu_kernel;
///
/// /// Tiled matmul: an f32 accumulator in scratch, zeroed on the first k step.
/// #[tpu_kernel]
/// pub fn matmul<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>, acc: &mut Scratch<f32>) {
///     if program_id(2).eq(0) {
///         acc.store(zeros());
///     }
///     acc.store(acc.load() + dot(x.load(), y.load()));
///     if program_id(2).eq(num_programs(2) - 1) {
///         o.store(acc.load().cast::<T>());
///     }
/// }
///
/// let launch = matmul::launch()
///     .grid([2, 2, 3])
///     .input(BlockSpec::new([128, 128], |i, _j, k| [i, k]))
///     .input(BlockSpec::new([128, 128], |_i, j, k| [k, j]))
///     .output(BlockSpec::new([128, 128], |i, j, _k| [i, j]), [256, 256])
///     .scratch(Vmem::<f32>::new([128, 128]))
///     .semantics([Parallel, Parallel, Arbitrary]);
/// let program = launch.trace_program(&[(DType::BF16, vec![256, 384]), (DType::BF16, vec![384, 256])]);
/// assert!(program.is_ok());
/// ```
#[proc_macro_attribute]
pub fn tpu_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::tpu_kernel(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
