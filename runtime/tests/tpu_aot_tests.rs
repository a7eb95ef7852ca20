//! Compiling for real TPU generations without a TPU, through libtpu's PJRT API.
//! Needs libtpu (`tessera plugin install tpu`, done by `make test`).

use tessera_runtime::{CompileOptions, RuntimeError, TpuTarget};

const ADD: &str = r#"module @add {
  func.func public @main(%a: tensor<256x512xf32>, %b: tensor<256x512xf32>) -> tensor<256x512xf32> {
    %0 = stablehlo.add %a, %b : tensor<256x512xf32>
    return %0 : tensor<256x512xf32>
  }
}"#;

#[test]
fn stablehlo_compiles_for_three_generations() {
    for topology in ["v5e:2x2", "v6e:2x2", "tpu7x:2x2x1"] {
        let target = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        let out = target
            .compile(ADD, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{topology}: {e}"));
        assert!(out.code_bytes > 0, "{topology}: {out:?}");
        println!(
            "{topology}: compiled in {:.1} ms, {} code bytes",
            out.compile_time.as_secs_f64() * 1e3,
            out.code_bytes
        );
    }
}

#[test]
fn unknown_topology_is_a_clean_error() {
    // Refused by Tessera's own check (libtpu aborts on some malformed names)...
    let err = TpuTarget::aot("v99:1x1").unwrap_err();
    assert!(matches!(err, RuntimeError::BadTopology { .. }), "{err}");
    // ...and what passes it but libtpu refuses is libtpu's clean error.
    let err = TpuTarget::aot("v5e:3x1").unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::Pjrt {
                call: "PJRT_TopologyDescription_Create",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn libtpu_rejects_what_it_cannot_compile_with_its_own_message() {
    let target = TpuTarget::aot("v5e:2x2").unwrap();
    // A tpu_custom_call whose body is not a Mosaic module: only libtpu can tell.
    let bad = r#"module @bad {
  func.func public @main(%a: tensor<8x128xf32>) -> tensor<8x128xf32> {
    %0 = stablehlo.custom_call @tpu_custom_call(%a) {backend_config = "{\"custom_call_config\": {\"body\": \"bm90IG1vc2FpYw==\", \"serialization_format\": 1}}", kernel_name = "bad", operand_layouts = [dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<8x128xf32>) -> tensor<8x128xf32>
    return %0 : tensor<8x128xf32>
  }
}"#;
    let err = target.compile(bad, &CompileOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::Pjrt {
                call: "PJRT_Compile",
                ..
            }
        ),
        "{err}"
    );
    println!("libtpu said: {err}");
}
