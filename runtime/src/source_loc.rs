//! The kernel's source line in a plugin's diagnostic. Tessera prints the user's
//! `loc("file":line:col)` after every kernel op (lowering's `mlir::loc`), and libtpu's Mosaic
//! compiler quotes the failing op's location (`at location: loc("kernels/x.rs":25:15)`); the
//! error then starts with `kernels/x.rs:25:15: `, as Tessera's own errors do.

/// `file:line:col: ` of the first MLIR file location in `message`, or empty when it names none
/// (or only a position in generated text, file `-`).
pub(crate) fn prefix(message: &str) -> String {
    message
        .match_indices("loc(\"")
        .find_map(|(at, open)| file_line_col(&message[at + open.len()..]))
        .map(|(file, line, col)| format!("{file}:{line}:{col}: "))
        .unwrap_or_default()
}

/// Parses `file":line:col)` (the rest after `loc("`), unescaping the file's `\"` and `\\`.
fn file_line_col(rest: &str) -> Option<(String, u32, u32)> {
    let mut file = String::new();
    let mut chars = rest.char_indices();
    let end = loop {
        match chars.next()? {
            (_, '\\') => file.push(chars.next()?.1),
            (i, '"') => break i,
            (_, c) => file.push(c),
        }
    };
    let tail = rest[end + 1..].strip_prefix(':')?;
    let (line, tail) = tail.split_once(':')?;
    let col_len = tail.find(|c: char| !c.is_ascii_digit())?;
    if !tail[col_len..].starts_with(')') || file == "-" || file.is_empty() {
        return None;
    }
    Some((file, line.parse().ok()?, tail[..col_len].parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::prefix;

    #[test]
    fn finds_the_first_source_location() {
        let libtpu = "Mosaic failed to compile TPU kernel: cannot statically prove that index in \
                      dimension 1 is a multiple of 128\n\nat location: \
                      loc(\"kernels/tests/a.rs\":25:15)\n\nThe MLIR operation involved: ..";
        assert_eq!(prefix(libtpu), "kernels/tests/a.rs:25:15: ");
        assert_eq!(
            prefix("x loc(\"-\":3:7) y loc(\"b \\\"c\\\".rs\":1:2)"),
            "b \"c\".rs:1:2: "
        );
        assert_eq!(prefix("no location here"), "");
        assert_eq!(prefix("loc(\"a.rs\":x:2)"), "");
        assert_eq!(prefix("loc(\"a.rs\":1:2"), "");
        assert_eq!(prefix("loc(unknown)"), "");
    }
}
