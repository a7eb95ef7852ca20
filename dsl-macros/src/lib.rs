//! `#[tpu_kernel]`. Filled by the DSL issue.
