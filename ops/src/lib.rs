//! ATen op table and dispatcher. Filled by the ATen op library issue.
