//! Compile-fail tests: each file in `tests/ui/` must fail to build with the error in its
//! `.stderr` (regenerate with `TRYBUILD=overwrite`, then read each one: the span and the message
//! are the point).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
