//! Checked slices: launches whose StableHLO has traced starts run in the emitter's checked
//! mode (`emit_kernel_checked`), which returns, after the outputs, the first bounds check
//! that failed, its start and its grid step; a failure is an error at the user's line,
//! naming the step, instead of the window `dynamic_slice` would have clamped into bounds.
//! On in debug builds (tests included), off in release builds; `TESSERA_CHECKED_SLICES=0|1` overrides both, the `*_checked` launch
//! functions override all.

use crate::error::{Result, RuntimeError};
use crate::Buffer;
use tessera_lowering::stablehlo::CheckedModule;

pub const CHECKED_SLICES_ENV: &str = "TESSERA_CHECKED_SLICES";

/// Whether launches check traced starts by default: `TESSERA_CHECKED_SLICES` (`1`/`0`), else
/// on in debug builds.
pub fn checked_slices() -> Result<bool> {
    parse(std::env::var(CHECKED_SLICES_ENV).ok())
}

/// The setting of `TESSERA_CHECKED_SLICES` = `value` (unset or empty: the build's default).
fn parse(value: Option<String>) -> Result<bool> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(cfg!(debug_assertions)),
        Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(_) => Err(RuntimeError::BadEnv {
            var: CHECKED_SLICES_ENV,
            value: value.unwrap_or_default(),
            reason: "expected 1 (check traced slice starts) or 0 (clamp them)".into(),
        }),
    }
}

/// Splits a checked module's outputs into the kernel's and reports the first failed check.
pub(crate) fn strip_and_report(
    mut outs: Vec<Buffer>,
    module: &CheckedModule,
) -> Result<Vec<Buffer>> {
    let checks = &module.checks;
    if checks.is_empty() {
        return Ok(outs);
    }
    let internal = |message: String| {
        RuntimeError::Emit(Box::new(tessera_lowering::stablehlo::EmitError::Internal(
            message,
        )))
    };
    let n = outs.len().checked_sub(module.state_len()).ok_or_else(|| {
        internal(format!(
            "a checked module returned {} results, fewer than its {} of bounds-check state",
            outs.len(),
            module.state_len()
        ))
    })?;
    let state = outs.split_off(n);
    let scalar = |b: &Buffer| -> Result<i64> {
        let v = b.to_host()?.to_vec::<i32>()?;
        Ok(v.first().copied().unwrap_or(0).into())
    };
    let id = scalar(&state[0])?;
    if id == 0 {
        return Ok(outs);
    }
    let check = usize::try_from(id - 1)
        .ok()
        .and_then(|k| checks.get(k))
        .ok_or_else(|| internal(format!("bounds check #{id} of {} failed", checks.len())))?;
    Err(RuntimeError::StartOutOfBounds {
        check: Box::new(check.clone()),
        start: scalar(&state[1])?,
        step: state[2..].iter().map(scalar).collect::<Result<_>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn the_setting_is_1_or_0_and_defaults_to_on_in_debug_builds() {
        assert!(parse(Some("1".into())).unwrap());
        assert!(parse(Some(" 1\n".into())).unwrap());
        assert!(!parse(Some("0".into())).unwrap());
        assert_eq!(parse(None).unwrap(), cfg!(debug_assertions));
        assert_eq!(parse(Some(String::new())).unwrap(), cfg!(debug_assertions));
        let err = parse(Some("yes".into())).unwrap_err().to_string();
        assert_eq!(
            err,
            "TESSERA_CHECKED_SLICES=`yes`: expected 1 (check traced slice starts) or 0 (clamp them)"
        );
    }
}
