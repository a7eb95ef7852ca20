//! Turns `aten_ops.json` (written from PyTorch by `tools/extract_schemas.py`) into a static
//! Rust table, `$OUT_DIR/op_table.rs`, included by `src/schema.rs`.

use serde_json::Value;
use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=aten_ops.json");
    let text = std::fs::read_to_string("aten_ops.json").expect("ops/aten_ops.json is committed");
    let json: Value = serde_json::from_str(&text).expect("aten_ops.json is valid JSON");
    let mut out = String::new();
    writeln!(
        out,
        "/// The PyTorch version the schemas were read from.\npub const TORCH_VERSION: &str = {:?};",
        json["torch_version"].as_str().unwrap_or("unknown")
    )
    .unwrap();
    out += "/// Every ATen overload Tessera knows, sorted by full name.\npub static OPS: &[OpSchema] = &[\n";
    for op in json["ops"].as_array().expect("`ops` is a list") {
        let s = |k: &str| op[k].as_str().unwrap_or("").to_string();
        let args: Vec<String> = op["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let (ty, optional, len) = arg_type(a["type"].as_str().unwrap());
                format!(
                    "ArgSchema {{ name: {:?}, ty: ArgType::{ty}, optional: {optional}, len: {len:?}, default: {:?}, kwarg_only: {}, mutable: {}, out: {} }}",
                    a["name"].as_str().unwrap(),
                    a["default"].as_str(),
                    a["kwarg_only"].as_bool().unwrap(),
                    a["mutable"].as_bool().unwrap(),
                    a["out"].as_bool().unwrap(),
                )
            })
            .collect();
        let returns: Vec<String> = op["returns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let (ty, _, _) = arg_type(r["type"].as_str().unwrap());
                format!(
                    "ReturnSchema {{ ty: ArgType::{ty}, alias: {:?} }}",
                    r["alias"].as_str()
                )
            })
            .collect();
        let tags: Vec<String> = op["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| format!("Tag::{}", tag(t.as_str().unwrap())))
            .collect();
        writeln!(
            out,
            "  OpSchema {{ name: {:?}, overload: {:?}, schema: {:?}, args: &[{}], returns: &[{}], tags: &[{}], functional: {:?} }},",
            s("name"),
            s("overload"),
            s("schema"),
            args.join(", "),
            returns.join(", "),
            tags.join(", "),
            op["functional"].as_str(),
        )
        .unwrap();
    }
    out += "];\n";
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("op_table.rs");
    std::fs::write(dest, out).unwrap();
}

/// `(ArgType variant, optional, fixed list length)` of a schema type like `int[2]?`.
fn arg_type(t: &str) -> (&'static str, bool, Option<usize>) {
    let optional = t.ends_with('?') && !t.ends_with("?[]");
    let t = t.trim_end_matches('?');
    let (base, len) = match t.find('[') {
        Some(i) if !t.starts_with("Tensor") => {
            let n = &t[i + 1..t.len() - 1];
            (&t[..i + 1], n.parse().ok())
        }
        _ => (t, None),
    };
    let ty = match base {
        "Tensor" => "Tensor",
        "Tensor[]" => "TensorList",
        "Tensor?[]" => "OptTensorList",
        "Scalar" => "Scalar",
        "bool" | "SymBool" => "Bool",
        "int" | "SymInt" => "Int",
        "int[" | "SymInt[" => "IntList",
        "float" => "Float",
        "float[" => "FloatList",
        "bool[" => "BoolList",
        "ScalarType" => "DType",
        "str" => "Str",
        "Layout" | "Device" | "MemoryFormat" | "Generator" => "Opaque",
        other => panic!("aten_ops.json: schema type `{other}` has no ArgType"),
    };
    (ty, optional, len)
}

fn tag(t: &str) -> &'static str {
    match t {
        "core" => "Core",
        "pointwise" => "Pointwise",
        "inplace" => "Inplace",
        "out" => "Out",
        "view" => "View",
        "view_copy" => "ViewCopy",
        "nondeterministic_seeded" => "Random",
        "dynamic_output_shape" => "DynamicShape",
        "inplace_view" => "InplaceView",
        other => panic!("aten_ops.json: unknown tag `{other}`"),
    }
}
