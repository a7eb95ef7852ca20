//! `TESSERA_STABLEHLO_SNAPSHOT=DIR`: every program the emitter is asked for is also written to
//! DIR in every form, unchecked and checked (`{program hash}-{auto|grid|batched}-{false|true}`,
//! the module text and its check table, or the error), so that two builds of the emitter can be
//! compared byte for byte over every kernel the test suites lower (`tools/stablehlo_identity.sh`).
//! Refactors of the emitter land behind that comparison. The folded layout and the contraction
//! are what `auto` and `batched` pick where they apply.

use super::{emit, Form};
use crate::ir::{Fnv1a, KernelProgram};
use std::path::Path;

const VAR: &str = "TESSERA_STABLEHLO_SNAPSHOT";

pub(super) fn write(program: &KernelProgram) {
    let Some(dir) = std::env::var_os(VAR) else {
        return;
    };
    let mut h = Fnv1a::default();
    h.str(&format!("{program:?}"));
    let key = h.finish();
    let forms = [
        ("auto", Form::Auto),
        ("grid", Form::GridLoop),
        ("batched", Form::Batched),
    ];
    for (name, form) in forms {
        for checked in [false, true] {
            let path = Path::new(&dir).join(format!("{key:016x}-{name}-{checked}"));
            if path.exists() {
                continue;
            }
            let text = match emit(program, form, checked) {
                Ok(m) => format!("{}\n--checks {:?} rank {}", m.text, m.checks, m.grid_rank),
                Err(e) => format!("ERR {e}"),
            };
            // A snapshot that cannot be written must not fail the lowering it watches.
            if let Err(e) = std::fs::write(&path, text) {
                eprintln!("{VAR}: {}: {e}", path.display());
            }
        }
    }
}
