//! Which eager mode runs ops: chosen by environment at start, by [`set_mode`], or for a
//! scope by [`ModeGuard`].

use std::sync::OnceLock;

/// How ops run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EagerMode {
    /// Each op launches as issued, asynchronously; device errors surface at the next read.
    Strict,
    /// Each op launches and is waited for; an error names the op, its shapes and dtypes.
    Debug,
    /// Ops are recorded; at a sync point the pending ones run as one fused program.
    DeferAndFuse,
    /// A traced closure replayed as one program ([`crate::compile`]); ops issued outside a
    /// compiled function run as in DeferAndFuse.
    Compiled,
}

impl EagerMode {
    pub const ALL: [EagerMode; 4] = [
        EagerMode::Strict,
        EagerMode::Debug,
        EagerMode::DeferAndFuse,
        EagerMode::Compiled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EagerMode::Strict => "strict",
            EagerMode::Debug => "debug",
            EagerMode::DeferAndFuse => "defer",
            EagerMode::Compiled => "compiled",
        }
    }

    /// `strict`, `debug`, `defer` (or `defer_and_fuse`, `fuse`), `compiled`.
    pub fn parse(s: &str) -> Option<EagerMode> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "strict" | "eager" => EagerMode::Strict,
            "debug" | "blocking" => EagerMode::Debug,
            "defer" | "defer_and_fuse" | "deferandfuse" | "fuse" => EagerMode::DeferAndFuse,
            "compiled" | "compile" => EagerMode::Compiled,
            _ => return None,
        })
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Whether ops are recorded rather than launched.
    pub(crate) fn defers(self) -> bool {
        matches!(self, EagerMode::DeferAndFuse | EagerMode::Compiled)
    }
}

impl std::fmt::Display for EagerMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The mode the environment asks for: `TESSERA_EAGER_MODE=strict|debug|defer`, else
/// `TESSERA_LAUNCH_BLOCKING=1` / `TORCH_TPU_LAUNCH_BLOCKING=1` / `TPU_LAUNCH_BLOCKING=1`
/// (Debug), else `TESSERA_DEFER_AND_FUSE=1` / `TORCH_TPU_DEFER_AND_FUSE=1` (DeferAndFuse),
/// else Strict. `get` reads one variable (tests pass their own).
pub fn mode_from(get: impl Fn(&str) -> Option<String>) -> EagerMode {
    let on = |name: &str| {
        get(name).is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            !(v.is_empty() || v == "0" || v == "false" || v == "off")
        })
    };
    if let Some(m) = get("TESSERA_EAGER_MODE").and_then(|v| EagerMode::parse(&v)) {
        return m;
    }
    if [
        "TESSERA_LAUNCH_BLOCKING",
        "TORCH_TPU_LAUNCH_BLOCKING",
        "TPU_LAUNCH_BLOCKING",
    ]
    .into_iter()
    .any(on)
    {
        return EagerMode::Debug;
    }
    if ["TESSERA_DEFER_AND_FUSE", "TORCH_TPU_DEFER_AND_FUSE"]
        .into_iter()
        .any(on)
    {
        return EagerMode::DeferAndFuse;
    }
    EagerMode::Strict
}

thread_local! {
    static MODE: std::cell::Cell<Option<EagerMode>> = const { std::cell::Cell::new(None) };
}

/// The mode the environment selects, read once per process.
pub fn default_mode() -> EagerMode {
    static DEFAULT: OnceLock<EagerMode> = OnceLock::new();
    *DEFAULT.get_or_init(|| mode_from(|k| std::env::var(k).ok()))
}

/// This thread's mode (the environment's until [`set_mode`]). Modes are per thread, like the
/// pending graph, so threads (and tests) do not switch each other's mode.
pub fn mode() -> EagerMode {
    MODE.with(|m| m.get()).unwrap_or_else(default_mode)
}

/// Sets this thread's mode. Leaving a deferring mode runs what is pending first.
pub fn set_mode(m: EagerMode) -> crate::Result<()> {
    let old = mode();
    if old.defers() && old != m {
        crate::sync()?;
    }
    MODE.with(|c| c.set(Some(m)));
    Ok(())
}

/// Sets a mode until dropped, then restores the previous one (running what its scope left
/// pending). `let _g = ModeGuard::new(EagerMode::Debug)?;`
pub struct ModeGuard {
    previous: EagerMode,
}

impl ModeGuard {
    pub fn new(m: EagerMode) -> crate::Result<ModeGuard> {
        let previous = mode();
        set_mode(m)?;
        Ok(ModeGuard { previous })
    }
}

impl Drop for ModeGuard {
    fn drop(&mut self) {
        if let Err(e) = set_mode(self.previous) {
            // The failed ops' tensors carry the error; reading them reports it.
            tracing::warn!("flushing pending ops when leaving a mode scope: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn reads_every_spelling() {
        assert_eq!(mode_from(env(&[])), EagerMode::Strict);
        let m = mode_from(env(&[("TESSERA_EAGER_MODE", "defer")]));
        assert_eq!(m, EagerMode::DeferAndFuse);
        let m = mode_from(env(&[("TESSERA_EAGER_MODE", "debug")]));
        assert_eq!(m, EagerMode::Debug);
        let m = mode_from(env(&[("TESSERA_LAUNCH_BLOCKING", "1")]));
        assert_eq!(m, EagerMode::Debug);
        let m = mode_from(env(&[("TORCH_TPU_LAUNCH_BLOCKING", "1")]));
        assert_eq!(m, EagerMode::Debug);
        let m = mode_from(env(&[("TORCH_TPU_DEFER_AND_FUSE", "1")]));
        assert_eq!(m, EagerMode::DeferAndFuse);
        let m = mode_from(env(&[("TESSERA_DEFER_AND_FUSE", "0")]));
        assert_eq!(m, EagerMode::Strict);
        // The explicit mode wins over the flags.
        let m = mode_from(env(&[
            ("TESSERA_EAGER_MODE", "strict"),
            ("TESSERA_DEFER_AND_FUSE", "1"),
        ]));
        assert_eq!(m, EagerMode::Strict);
    }
}
