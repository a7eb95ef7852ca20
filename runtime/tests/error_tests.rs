//! Error paths: each is a clean `RuntimeError`, never a panic.

mod common;
use std::path::Path;
use tessera_runtime::{
    CompileOptions, DType, Device, DeviceKind, HostTensor, Plugin, RuntimeError,
};

const ADD: &str = r#"module @add {
  func.func public @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.add %a, %b : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}"#;

#[test]
fn malformed_mlir_carries_the_plugins_diagnostic_with_line_and_column() {
    let c = common::cpu();
    let bad = "module {\n  func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n    %0 = stablehlo.bogus_op %a : tensor<2xf32>\n    return %0 : tensor<2xf32>\n  }\n}";
    let err = c.compile(bad, &CompileOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            RuntimeError::Pjrt {
                call: "PJRT_Client_Compile",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("3:"), "no line:col in {msg}");
    assert!(msg.contains("bogus_op"), "{msg}");

    let type_error = "module {\n  func.func public @main(%a: tensor<2xf32>) -> tensor<3xf32> {\n    return %a : tensor<2xf32>\n  }\n}";
    let msg = c
        .compile(type_error, &CompileOptions::default())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("3:"), "{msg}");
}

#[test]
fn wrong_input_count_is_caught_before_pjrt() {
    let c = common::cpu();
    let exe = c.compile(ADD, &CompileOptions::default()).unwrap();
    let a = c
        .upload(&HostTensor::zeros(DType::F32, vec![2, 3]))
        .unwrap();
    let err = exe.execute(&[&a]).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::InputCount {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.to_string(), "executable `add` takes 2 input(s), got 1");
}

#[test]
fn wrong_input_shape_and_dtype_are_caught_before_pjrt() {
    let c = common::cpu();
    let exe = c.compile(ADD, &CompileOptions::default()).unwrap();
    let ok = c
        .upload(&HostTensor::zeros(DType::F32, vec![2, 3]))
        .unwrap();
    let wrong_shape = c
        .upload(&HostTensor::zeros(DType::F32, vec![3, 2]))
        .unwrap();
    let err = exe.execute(&[&ok, &wrong_shape]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "executable `add` input 1: expected f32[2,3], got f32[3,2]"
    );
    let wrong_dtype = c
        .upload(&HostTensor::zeros(DType::BF16, vec![2, 3]))
        .unwrap();
    let err = exe.execute(&[&wrong_dtype, &ok]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "executable `add` input 0: expected f32[2,3], got bf16[2,3]"
    );
}

#[test]
fn plugin_path_that_does_not_exist() {
    let err = Plugin::load(Path::new("/nonexistent/plugin.so")).unwrap_err();
    assert!(matches!(err, RuntimeError::NotAPlugin { .. }), "{err}");
}

#[test]
fn plugin_path_that_is_not_a_shared_library() {
    let dir = tempfile::Builder::new()
        .prefix("tessera-notaplugin-")
        .tempdir()
        .unwrap();
    let file = dir.path().join("fake.so");
    std::fs::write(&file, b"this is not an ELF file").unwrap();
    let err = Plugin::load(&file).unwrap_err();
    assert!(matches!(err, RuntimeError::NotAPlugin { .. }), "{err}");
    assert!(err.to_string().contains("fake.so"), "{err}");
}

#[test]
fn shared_library_without_get_pjrt_api_is_not_a_plugin() {
    // libm is a real shared library with no GetPjrtApi symbol.
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.exists())
    .expect("libm present");
    let err = Plugin::load(libm).unwrap_err();
    assert!(err.to_string().contains("no GetPjrtApi symbol"), "{err}");
}

#[test]
fn missing_plugin_names_the_install_command() {
    // CUDA is never installed on CI machines; set its env var to a missing file to be sure.
    std::env::set_var(
        "TESSERA_PJRT_PLUGIN_CUDA",
        "/nonexistent/xla_cuda_plugin.so",
    );
    let err = Device::new(DeviceKind::Cuda).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RuntimeError::PluginNotFound { .. }), "{msg}");
    assert!(msg.contains("tessera plugin install cuda"), "{msg}");
}

#[test]
fn unknown_device_name() {
    let err = DeviceKind::parse("gpu9").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown device `gpu9` (expected one of cpu, tpu, cuda, interp)"
    );
}

#[test]
fn interpreter_device_has_no_client() {
    let err = Device::interp().client().unwrap_err();
    assert!(matches!(err, RuntimeError::NoClient(_)));
}

#[test]
fn tpu_device_without_a_tpu_is_refused_and_points_at_aot() {
    if tessera_runtime::tpu_attached() {
        return; // a real TPU machine: Device::new(Tpu) is the right call there
    }
    let err = Device::new(DeviceKind::Tpu).unwrap_err();
    assert!(matches!(err, RuntimeError::NoTpuAttached), "{err}");
    assert!(err.to_string().contains("tessera aot"), "{err}");
}

/// A copy of the first `len` bytes of the real CPU plugin, in a temporary directory removed
/// when the returned [`tempfile::TempDir`] is dropped.
fn truncated_plugin(len: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let real = tessera_runtime::plugin_store::locate(DeviceKind::Cpu).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("tessera-truncated-")
        .tempdir()
        .unwrap();
    let file = dir.path().join(format!("xla_cpu_pjrt_{len}.so"));
    let mut head = vec![0u8; len];
    std::io::Read::read_exact(&mut std::fs::File::open(real).unwrap(), &mut head).unwrap();
    std::fs::write(&file, head).unwrap();
    (dir, file)
}

#[test]
fn truncated_plugin_is_refused_before_it_is_loaded() {
    // dlopen of this file dies of SIGBUS; the ELF checks refuse it first.
    for len in [1 << 20, 64 << 20] {
        let (_dir, file) = truncated_plugin(len);
        let err = Device::with_plugin(DeviceKind::Cpu, &file).unwrap_err();
        assert!(matches!(err, RuntimeError::NotAPlugin { .. }), "{err}");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}

#[test]
fn libtpu_as_the_cpu_plugin_is_refused_before_it_is_loaded() {
    let Ok(libtpu) = tessera_runtime::plugin_store::locate(DeviceKind::Tpu) else {
        return; // no libtpu installed: nothing to mistake for the CPU plugin
    };
    let start = std::time::Instant::now();
    let err = Device::with_plugin(DeviceKind::Cpu, &libtpu).unwrap_err();
    assert!(matches!(err, RuntimeError::WrongPluginKind { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("is libtpu, the TPU plugin, not a cpu plugin"),
        "{err}"
    );
    assert!(start.elapsed().as_secs() < 30, "took {:?}", start.elapsed());
}

#[test]
fn deeply_nested_mlir_is_refused_before_the_plugin_parses_it() {
    let c = common::cpu();
    let deep = "module {".repeat(5000) + &"}".repeat(5000);
    let err = c.compile(&deep, &CompileOptions::default()).unwrap_err();
    assert!(
        matches!(err, RuntimeError::MlirTooDeep { limit: 256, .. }),
        "{err}"
    );
    // Our own emitters' depth passes (the shared ADD module is 3 deep).
    assert!(c.compile(ADD, &CompileOptions::default()).is_ok());
}
