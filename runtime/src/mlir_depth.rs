//! A bound on the nesting of MLIR text before a plugin parses it: MLIR's parser recurses
//! once per nested region, list or type, on the caller's stack, and overflowing it kills the
//! process. Measured with the XLA CPU plugin on an 8 MiB main-thread stack: 3,000 nested
//! `module {` parse (with an error) and 5,000 overflow (~2 KB of stack per level); 20,000
//! nested `[` in a `dense<>` overflow. Tessera's own emitters nest under 30 levels.

use crate::error::{Result, RuntimeError};

/// The deepest nesting of `{`, `(`, `[` and `<` (together) Tessera hands to a plugin. At
/// ~2 KB of parser stack a level, 256 levels need ~0.5 MiB: safe on the 2 MiB stacks of
/// spawned Rust threads, where the plugin's parser runs too.
pub const MAX_NESTING: usize = 256;

/// `Err(MlirTooDeep)` when `text` nests deeper than [`MAX_NESTING`]. String literals and
/// `//` comments are skipped; `->`, `>=` and `<=` are not brackets. A linear scan (about a
/// millisecond for a megabyte), done only before compiling.
pub(crate) fn check_nesting(text: &str) -> Result<()> {
    let (depth, line) = deepest(text, MAX_NESTING);
    if depth > MAX_NESTING {
        return Err(RuntimeError::MlirTooDeep {
            depth,
            limit: MAX_NESTING,
            line,
        });
    }
    Ok(())
}

/// The deepest nesting of `text` (stopping once past `stop`) and the line where it is.
fn deepest(text: &str, stop: usize) -> (usize, usize) {
    let b = text.as_bytes();
    let (mut depth, mut max, mut max_line, mut line) = (0usize, 0usize, 1usize, 1usize);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'"' => {
                // A string literal: skip to its closing quote (backslash escapes).
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    } else if b[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'<' if b.get(i + 1) == Some(&b'=') => i += 1,
            b'>' if i > 0 && b[i - 1] == b'-' => {}
            b'>' if b.get(i + 1) == Some(&b'=') => i += 1,
            b'{' | b'(' | b'[' | b'<' => {
                depth += 1;
                if depth > max {
                    (max, max_line) = (depth, line);
                    if max > stop {
                        break;
                    }
                }
            }
            b'}' | b')' | b']' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    (max, max_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_regions_lists_and_types_but_not_arrows_strings_or_comments() {
        let m = "module {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n    return %a : tensor<2xf32>\n  }\n}";
        assert_eq!(deepest(m, usize::MAX), (3, 2));
        assert_eq!(deepest("a \"{{{{[[\" b // ((((\n[x]", usize::MAX), (1, 2));
        assert_eq!(deepest("affine_set<(d0) : (d0 >= 0)>", usize::MAX).0, 2);
        assert!(check_nesting(m).is_ok());
    }

    #[test]
    fn refuses_text_deeper_than_the_limit_with_its_line() {
        let n = 5000;
        let deep = "module {\n".repeat(n) + &"}".repeat(n);
        let err = check_nesting(&deep).unwrap_err();
        assert!(
            matches!(
                err,
                RuntimeError::MlirTooDeep {
                    depth: 257,
                    limit: 256,
                    line: 257
                }
            ),
            "{err}"
        );
        let dense = format!("dense<{}1{}>", "[".repeat(300), "]".repeat(300));
        assert!(check_nesting(&dense).is_err());
        let ok = "(".repeat(MAX_NESTING) + &")".repeat(MAX_NESTING);
        assert!(check_nesting(&ok).is_ok());
    }
}
