//! Kernels written with `#[tpu_kernel]`. Filled by the DSL issue.
