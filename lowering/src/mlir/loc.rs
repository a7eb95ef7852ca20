//! Source locations as MLIR locations: each op of a kernel is printed with the user's
//! `loc("file":line:col)`, so a diagnostic from jaxlib's verifier, libtpu's Mosaic compiler or
//! XLA names the kernel's line rather than a line of generated text.
//!
//! The file is `std::panic::Location`'s path, a static string (relative to the workspace for
//! workspace crates), so the text, and the executable cache keyed on it, is the same in every
//! run; the IR's structural hash ignores locations either way.

use crate::ir::Loc;
use crate::stablehlo::mlir_string;

/// ` loc("file":line:col)`, the suffix MLIR's generic form takes after an op's type; empty
/// for [`Loc::UNKNOWN`] (ops synthesized by code, not by a user).
pub fn suffix(loc: Loc) -> String {
    if loc == Loc::UNKNOWN {
        return String::new();
    }
    format!(
        " loc({}:{}:{})",
        mlir_string(loc.file),
        loc.line,
        loc.column
    )
}

/// Appends `loc`'s suffix to the last line of a printed op (its type line).
pub(crate) fn attach(lines: &mut [String], loc: Option<Loc>) {
    if let (Some(loc), Some(last)) = (loc, lines.last_mut()) {
        last.push_str(&suffix(loc));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_file_line_col_locations() {
        let loc = Loc {
            file: "kernels/src/add.rs",
            line: 12,
            column: 5,
        };
        assert_eq!(suffix(loc), " loc(\"kernels/src/add.rs\":12:5)");
        assert_eq!(suffix(Loc::UNKNOWN), "");
        let quoted = Loc {
            file: "C:\\a \"b\".rs",
            ..loc
        };
        assert_eq!(suffix(quoted), " loc(\"C:\\\\a \\\"b\\\".rs\":12:5)");
        let mut lines = vec!["%1 = \"arith.addf\"(%0, %0) : (f32, f32) -> f32".to_string()];
        attach(&mut lines, Some(loc));
        assert!(lines[0].ends_with("-> f32 loc(\"kernels/src/add.rs\":12:5)"));
        attach(&mut lines, None);
        assert!(lines[0].ends_with(":12:5)"));
    }
}
