//! `tessera bench eager --json`: one JSON object per case with every mode's time, and the
//! fused modes launching fewer programs than Strict.

use std::process::Command;

#[test]
fn bench_eager_json_has_every_case_and_mode() {
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "eager", "--json", "--iters", "1"])
        .output()
        .expect("runs tessera");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let cases: Vec<&str> = rows.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(
        cases,
        [
            "block_s64_d128",
            "block_s128_d256",
            "block_s256_d512",
            "pointwise_chain_50",
            "mlp_train_step",
            "strict_op_call"
        ]
    );
    for r in &rows[..5] {
        for k in [
            "strict_ms",
            "debug_ms",
            "defer_ms",
            "compiled_ms",
            "defer_speedup",
        ] {
            let v = r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
            assert!(v.is_finite() && v > 0.0, "{k} in {r}");
        }
        let (s, d) = (
            r["strict_programs"].as_f64().unwrap(),
            r["defer_programs"].as_f64().unwrap(),
        );
        assert!(d < s, "DeferAndFuse launches fewer programs: {r}");
        assert_eq!(r["compiles_after_warmup"].as_u64(), Some(0), "{r}");
    }
    assert!(rows[5]["host_overhead_us"].as_f64().unwrap() > 0.0);
}
