//! Generic-form op printing shared by the StableHLO builder and the Mosaic printer.

/// One op in generic form, as lines: `head"name"(operands) ({ region } , { .. }) {attrs} :
/// (operand types) -> results`. `head` is the `%r = ` part (empty for no results);
/// `operands` are (name, type) pairs; each region is a block from [`block`].
pub(crate) fn generic_op(
    head: &str,
    name: &str,
    operands: &[(&str, &str)],
    attrs: &str,
    results: &[String],
    regions: Vec<Vec<String>>,
) -> Vec<String> {
    let names: Vec<&str> = operands.iter().map(|o| o.0).collect();
    let types: Vec<&str> = operands.iter().map(|o| o.1).collect();
    let mut line = format!("{head}\"{name}\"({})", names.join(", "));
    let mut lines = Vec::new();
    // Regions print as `({ ... }, { ... })` between the operands and the attributes.
    for (i, region) in regions.into_iter().enumerate() {
        lines.push(line + if i == 0 { " ({" } else { "}, {" });
        lines.extend(region);
        line = String::new();
    }
    if !lines.is_empty() {
        line = "})".to_string();
    }
    if !attrs.is_empty() {
        line += &format!(" {{{attrs}}}");
    }
    line += &format!(" : ({}) -> {}", types.join(", "), result_types(results));
    lines.push(line);
    lines
}

/// A region's block: `^bb0(%a: t, ..):` (when it has arguments), then its ops indented.
pub(crate) fn block(args: &[(String, String)], ops: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(ops.len() + 1);
    if !args.is_empty() {
        let a: Vec<String> = args.iter().map(|(n, t)| format!("{n}: {t}")).collect();
        out.push(format!("^bb0({}):", a.join(", ")));
    }
    out.extend(ops.into_iter().map(|l| format!("  {l}")));
    out
}

/// `f32`, `()`, or `(f32, i32)`.
pub(crate) fn result_types(results: &[String]) -> String {
    match results {
        [one] => one.clone(),
        many => format!("({})", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_generic_ops_with_regions() {
        let body = block(
            &[("%a0".into(), "tensor<i32>".into())],
            vec!["\"stablehlo.return\"(%a0) : (tensor<i32>) -> ()".into()],
        );
        let lines = generic_op(
            "%1 = ",
            "stablehlo.while",
            &[("%0", "tensor<i32>")],
            "",
            &["tensor<i32>".into()],
            vec![body.clone(), body],
        );
        assert_eq!(lines[0], "%1 = \"stablehlo.while\"(%0) ({");
        assert_eq!(lines[1], "^bb0(%a0: tensor<i32>):");
        assert_eq!(lines[3], "}, {");
        assert_eq!(lines[6], "}) : (tensor<i32>) -> tensor<i32>");
        let none = generic_op("", "func.return", &[], "", &[], Vec::new());
        assert_eq!(none, vec!["\"func.return\"() : () -> ()"]);
    }
}
