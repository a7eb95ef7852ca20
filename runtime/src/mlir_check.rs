//! Checks of MLIR text before a plugin parses it, for inputs that kill the process inside
//! the plugin instead of returning an error:
//!
//! - Nesting: MLIR's parser recurses once per nested region, list or type, on the caller's
//!   stack. Measured with the XLA CPU plugin on an 8 MiB main-thread stack: 3,000 nested
//!   `module {` parse (with an error) and 5,000 overflow (~2 KB of stack per level); 20,000
//!   nested `[` in a `dense<>` overflow. Tessera's own emitters nest under 30 levels.
//! - Tensor sizes: a static `tensor<...>` type of 2^63 bytes or more (`tensor<4294967296x
//!   4294967296xf32>`, `tensor<2305843009213693952xf32>`) makes XLA throw a C++ exception
//!   through the C API, which aborts the process ("Rust cannot catch foreign exceptions");
//!   one byte less is a clean error.

use crate::error::{Result, RuntimeError};

/// The deepest nesting of `{`, `(`, `[` and `<` (together) Tessera hands to a plugin. At
/// ~2 KB of parser stack a level, 256 levels need ~0.5 MiB: safe on the 2 MiB stacks of
/// spawned Rust threads, where the plugin's parser runs too.
pub const MAX_NESTING: usize = 256;

/// `Err(MlirTooDeep)` when `text` nests deeper than [`MAX_NESTING`], `Err(MlirTensorTooLarge)`
/// when a static tensor type has 2^63 bytes or more. String literals and `//` comments are
/// skipped; `->`, `>=` and `<=` are not brackets. A linear scan (about a millisecond for a
/// megabyte), done only before compiling.
pub(crate) fn check_before_parse(text: &str) -> Result<()> {
    let scan = scan(text, MAX_NESTING);
    if scan.max_depth > MAX_NESTING {
        return Err(RuntimeError::MlirTooDeep {
            depth: scan.max_depth,
            limit: MAX_NESTING,
            line: scan.max_line,
        });
    }
    if let Some((ty, line)) = scan.oversized {
        return Err(RuntimeError::MlirTensorTooLarge { ty, line });
    }
    Ok(())
}

struct Scan {
    max_depth: usize,
    max_line: usize,
    /// The first tensor type of 2^63 bytes or more, and its line.
    oversized: Option<(String, usize)>,
}

/// Bytes of one element of an MLIR element type (`f32`, `i1`, `bf16`, `complex<f64>`), 16
/// (the widest) when unknown, so that unknown types are never under-counted.
fn element_bytes(ty: &str) -> u128 {
    let bits = |s: &str| s.parse::<u128>().ok().map(|b| b.div_ceil(8).max(1));
    let known = match ty {
        "index" => Some(8),
        "bf16" => Some(2),
        t if t.starts_with("complex<") => {
            element_bytes(t.trim_start_matches("complex<").trim_end_matches('>')).checked_mul(2)
        }
        t => t
            .strip_prefix("ui")
            .or_else(|| t.strip_prefix("si"))
            .or_else(|| t.strip_prefix('i'))
            .or_else(|| t.strip_prefix('f'))
            .and_then(bits),
    };
    known.unwrap_or(16)
}

/// The byte size of the static part of the tensor type starting after `tensor<`, as text
/// and bytes (`None` bytes: the product overflows even 128 bits).
fn tensor_bytes(rest: &[u8]) -> (String, Option<u128>) {
    let end = rest
        .iter()
        .position(|&c| c == b'>' || c == b',' || c == b'\n')
        .unwrap_or(rest.len());
    let body = String::from_utf8_lossy(&rest[..end]).trim().to_string();
    let mut parts: Vec<&str> = body.split('x').collect();
    let element = parts.pop().unwrap_or_default();
    let mut bytes = Some(element_bytes(element.trim()));
    for d in parts {
        match d.trim().parse::<u128>() {
            Ok(n) => bytes = bytes.and_then(|b| b.checked_mul(n)),
            // Too many digits even for 128 bits: certainly too large.
            Err(_) if !d.trim().is_empty() && d.trim().bytes().all(|c| c.is_ascii_digit()) => {
                bytes = None
            }
            // `?` (dynamic), `*` (unranked) or text the parser will judge.
            Err(_) => {}
        }
    }
    (format!("tensor<{body}>"), bytes)
}

/// Nesting and tensor sizes of `text` (the nesting scan stops once past `stop`).
fn scan(text: &str, stop: usize) -> Scan {
    let b = text.as_bytes();
    let (mut depth, mut max, mut max_line, mut line) = (0usize, 0usize, 1usize, 1usize);
    let mut oversized = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b't' if oversized.is_none() && b[i..].starts_with(b"tensor<") => {
                let (ty, bytes) = tensor_bytes(&b[i + 7..]);
                if bytes.is_none_or(|n| n > i64::MAX as u128) {
                    oversized = Some((ty, line));
                }
            }
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
    Scan {
        max_depth: max,
        max_line,
        oversized,
    }
}

#[cfg(test)]
fn deepest(text: &str, stop: usize) -> (usize, usize) {
    let s = scan(text, stop);
    (s.max_depth, s.max_line)
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
        assert!(check_before_parse(m).is_ok());
    }

    #[test]
    fn refuses_text_deeper_than_the_limit_with_its_line() {
        let n = 5000;
        let deep = "module {\n".repeat(n) + &"}".repeat(n);
        let err = check_before_parse(&deep).unwrap_err();
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
        assert!(check_before_parse(&dense).is_err());
        let ok = "(".repeat(MAX_NESTING) + &")".repeat(MAX_NESTING);
        assert!(check_before_parse(&ok).is_ok());
    }

    #[test]
    fn refuses_tensor_types_of_2_pow_63_bytes_or_more() {
        for ok in [
            "tensor<2305843009213693951xf32>",
            "tensor<4611686018427387903xi8>",
            "tensor<?x3xf32>",
            "tensor<*xf32>",
            "tensor<f64>",
            "tensor<0x9999999999999999999xf32>",
            "\"tensor<99999999999x99999999999xf32>\"",
        ] {
            assert!(check_before_parse(ok).is_ok(), "{ok}");
        }
        for (bad, ty) in [
            (
                "\n %0 = stablehlo.iota dim = 0 : tensor<2305843009213693952xf32>",
                "tensor<2305843009213693952xf32>",
            ),
            (
                "tensor<4294967296x4294967296xf32>",
                "tensor<4294967296x4294967296xf32>",
            ),
            (
                "tensor<1152921504606846976xcomplex<f64>>",
                "tensor<1152921504606846976xcomplex<f64>",
            ),
            (
                "tensor<99999999999999999999999999999999999999999x2xf32>",
                "tensor<99999999999999999999999999999999999999999x2xf32>",
            ),
        ] {
            let err = check_before_parse(bad).unwrap_err();
            assert!(
                matches!(&err, RuntimeError::MlirTensorTooLarge { ty: t, .. } if t == ty),
                "{bad}: {err}"
            );
        }
        assert_eq!(element_bytes("i1"), 1);
        assert_eq!(element_bytes("ui16"), 2);
        assert_eq!(element_bytes("f8E4M3FN"), 16);
        assert_eq!(element_bytes("complex<f32>"), 8);
    }
}
