//! The `@main` signature of a StableHLO module, read from its text, so that inputs can be
//! checked (count, shape, dtype) before anything reaches PJRT.

use tessera_lowering::DType;

/// A ranked tensor type: `tensor<2x3xf32>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Vec<usize>,
    pub dtype: DType,
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{}[{}]", self.dtype, dims.join(","))
    }
}

impl TensorType {
    /// Parses `tensor<2x3xf32>` / `tensor<f32>`; `None` for dynamic or unknown types.
    pub fn parse(text: &str) -> Option<TensorType> {
        let inner = text.trim().strip_prefix("tensor<")?.strip_suffix('>')?;
        let inner = inner.split(',').next()?.trim(); // drop an encoding such as `, #stablehlo...`
        let mut parts: Vec<&str> = inner.split('x').collect();
        let dtype = parts.pop()?.parse::<DType>().ok()?;
        let shape = parts
            .iter()
            .map(|d| d.parse::<usize>().ok())
            .collect::<Option<Vec<_>>>()?;
        Some(TensorType { shape, dtype })
    }
}

/// Argument and result types of `@main`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub inputs: Vec<TensorType>,
    pub outputs: Vec<TensorType>,
}

impl Signature {
    /// Reads the signature of `@main`; `None` when it is absent or uses types we do not check
    /// (tuples, tokens, dynamic shapes) — PJRT then remains the only check.
    pub fn of_main(module: &str) -> Option<Signature> {
        let start = module.find("@main(")? + "@main(".len();
        let (args, rest) = split_balanced(&module[start..], '(', ')')?;
        let inputs = top_level_split(args)
            .into_iter()
            .filter(|a| !a.trim().is_empty())
            .map(|a| TensorType::parse(strip_attrs(a.split_once(':')?.1)))
            .collect::<Option<Vec<_>>>()?;
        let rest = rest.trim_start();
        let outputs = match rest.strip_prefix("->") {
            None => Vec::new(),
            Some(r) => {
                let r = r.trim_start();
                if let Some(r) = r.strip_prefix('(') {
                    let (list, _) = split_balanced(r, '(', ')')?;
                    top_level_split(list)
                        .into_iter()
                        .map(|t| TensorType::parse(strip_attrs(t)))
                        .collect::<Option<Vec<_>>>()?
                } else {
                    let end = r.find(['{', '\n']).unwrap_or(r.len());
                    let ty = r[..end].trim();
                    vec![TensorType::parse(strip_attrs(ty))?]
                }
            }
        };
        Some(Signature { inputs, outputs })
    }
}

/// Drops a trailing `{attr = ...}` dictionary from an argument or result.
fn strip_attrs(s: &str) -> &str {
    let s = s.trim();
    match s.find('{') {
        Some(i) => s[..i].trim(),
        None => s,
    }
}

/// Given text just after an opening `open`, returns (inside, after the matching close).
fn split_balanced(s: &str, open: char, close: char) -> Option<(&str, &str)> {
    let mut depth = 1usize;
    for (i, c) in s.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some((&s[..i], &s[i + 1..]));
            }
        }
    }
    None
}

/// Splits at commas not nested in <>, (), [] or {}.
fn top_level_split(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_main_signature() {
        let m = "module {\n func.func public @main(%arg0: tensor<2x3xf32> {jax.arg_info = \"x\"}, %arg1: tensor<bf16>) -> (tensor<2x3xf32>, tensor<i1>) {\n";
        let s = Signature::of_main(m).unwrap();
        assert_eq!(
            s.inputs[0],
            TensorType {
                shape: vec![2, 3],
                dtype: DType::F32
            }
        );
        assert_eq!(
            s.inputs[1],
            TensorType {
                shape: vec![],
                dtype: DType::BF16
            }
        );
        assert_eq!(s.outputs[1].dtype, DType::Bool);
        let single =
            Signature::of_main("func.func @main(%a: tensor<4xui8>) -> tensor<4xui8> {").unwrap();
        assert_eq!(
            single.outputs,
            vec![TensorType {
                shape: vec![4],
                dtype: DType::U8
            }]
        );
        assert!(
            Signature::of_main("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {").is_none()
        );
    }
}
