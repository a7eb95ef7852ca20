//! The benchmark workloads (transformer block forward; MLP training step with in-place SGD)
//! in every mode against PyTorch on the CPU in float64, on the same seeded inputs.
//! Needs `TESSERA_PYTHON` (a Python with torch); without it the tests say so and pass.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use tessera_eager::workloads::{random, Block, Mlp};

const SCRIPT: &str = r#"
import json, sys, torch
import torch.nn.functional as F
torch.set_default_dtype(torch.float64)
req = json.load(sys.stdin)
def t(name):
    v = req[name]
    return torch.tensor(v["data"]).reshape(v["shape"])
out = {}
if req["case"] == "block":
    x = t("x"); S, D = x.shape; H = req["heads"]; Dh = D // H
    a = F.layer_norm(x, (D,), t("ln1_w"), t("ln1_b"), 1e-5)
    qkv = a @ t("w_qkv")
    q, k, v = [qkv[:, i*D:(i+1)*D].reshape(S, H, Dh).permute(1, 0, 2) for i in range(3)]
    p = torch.softmax(q @ k.transpose(1, 2) / Dh ** 0.5, -1)
    o = (p @ v).permute(1, 0, 2).reshape(S, D)
    x = x + o @ t("w_o")
    m = F.layer_norm(x, (D,), t("ln2_w"), t("ln2_b"), 1e-5)
    m = F.gelu(m @ t("w_1"), approximate="tanh") @ t("w_2")
    out["y"] = (x + m).flatten().tolist()
else:
    x, target = t("x"), t("t")
    ps = [t(n).requires_grad_() for n in ("w1", "b1", "w2", "b2")]
    w1, b1, w2, b2 = ps
    y = torch.relu(x @ w1 + b1) @ w2 + b2
    loss = ((y - target) ** 2).mean()
    loss.backward()
    out["loss"] = loss.item()
    with torch.no_grad():
        for n, p in zip(("w1", "b1", "w2", "b2"), ps):
            out[n] = (p - req["lr"] * p.grad).flatten().tolist()
json.dump(out, sys.stdout)
"#;

fn enc(t: &Tensor) -> Value {
    json!({"shape": t.shape(), "data": t.to_f64_vec().unwrap()})
}

/// Runs the script on `req`; None when no Python is configured.
fn torch(req: Value) -> Option<Value> {
    let Ok(python) = std::env::var("TESSERA_PYTHON") else {
        eprintln!("TESSERA_PYTHON is not set: the torch comparison is skipped");
        return None;
    };
    let mut child = Command::new(&python)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {python}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the torch script failed");
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn transformer_block_matches_torch_in_every_mode() {
    let (s, d, heads) = (24, 32, 4);
    let block = Block::new(d, heads, 40, DType::F32).unwrap();
    let x = random(DType::F32, 41, &[s, d], 1.0).unwrap();
    let req = json!({
        "case": "block", "heads": heads, "x": enc(&x),
        "ln1_w": enc(&block.ln1_w), "ln1_b": enc(&block.ln1_b), "w_qkv": enc(&block.w_qkv),
        "w_o": enc(&block.w_o), "ln2_w": enc(&block.ln2_w), "ln2_b": enc(&block.ln2_b),
        "w_1": enc(&block.w_1), "w_2": enc(&block.w_2),
    });
    let Some(want) = torch(req) else { return };
    let want = floats(&want["y"]);
    for m in MODES {
        let y = if m == EagerMode::Compiled {
            let mut f = compile(|i: &[Tensor]| Ok(vec![block.forward(&i[0])?]));
            f.call(std::slice::from_ref(&x)).unwrap().remove(0)
        } else {
            in_mode(m, || block.forward(&x).unwrap())
        };
        let err = max_err(&y.to_f64_vec().unwrap(), &want);
        // f32 compute against an f64 reference over a 4*D-wide MLP: 1e-4.
        assert!(err < 1e-4, "{m}: max error {err}");
    }
}

#[test]
fn mlp_training_step_matches_torch_in_every_mode() {
    let (b, din, hid, dout, lr) = (16, 12, 20, 6, 0.05);
    let x = random(DType::F32, 51, &[b, din], 1.0).unwrap();
    let t = random(DType::F32, 52, &[b, dout], 1.0).unwrap();
    let want = {
        let mlp = Mlp::new(din, hid, dout, 50, DType::F32).unwrap();
        let req = json!({
            "case": "mlp", "lr": lr, "x": enc(&x), "t": enc(&t),
            "w1": enc(&mlp.w1), "b1": enc(&mlp.b1), "w2": enc(&mlp.w2), "b2": enc(&mlp.b2),
        });
        let Some(want) = torch(req) else { return };
        want
    };
    for m in MODES {
        // The same seeded weights in every mode.
        let mlp = Mlp::new(din, hid, dout, 50, DType::F32).unwrap();
        let loss = if m == EagerMode::Compiled {
            let mut f = compile(|i: &[Tensor]| Ok(vec![mlp.step(&i[0], &i[1], lr)?]));
            f.call(&[x.clone(), t.clone()]).unwrap().remove(0)
        } else {
            in_mode(m, || mlp.step(&x, &t, lr).unwrap())
        };
        let l = loss.item().unwrap();
        assert!(
            (l - want["loss"].as_f64().unwrap()).abs() < 1e-5,
            "{m}: loss {l} vs {}",
            want["loss"]
        );
        for (name, p) in [
            ("w1", &mlp.w1),
            ("b1", &mlp.b1),
            ("w2", &mlp.w2),
            ("b2", &mlp.b2),
        ] {
            let err = max_err(&p.to_f64_vec().unwrap(), &floats(&want[name]));
            assert!(err < 1e-5, "{m}: {name} after SGD off by {err}");
        }
    }
}
