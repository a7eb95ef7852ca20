//! StableHLO programs used by the runtime tests, each with a float64 reference.

/// Runs `module` on `inputs` (f64 values given with their dtype/shape) and returns the outputs.
pub fn run(
    module: &str,
    inputs: &[(tessera_runtime::DType, Vec<usize>, Vec<f64>)],
) -> Vec<tessera_runtime::HostTensor> {
    let c = super::cpu();
    let exe = c
        .compile(module, &tessera_runtime::CompileOptions::default())
        .expect("compiles");
    let bufs: Vec<_> = inputs
        .iter()
        .map(|(d, s, v)| {
            c.upload(&tessera_runtime::HostTensor::from_f64(*d, s.clone(), v))
                .unwrap()
        })
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    exe.execute(&refs)
        .expect("executes")
        .iter()
        .map(|b| b.to_host().unwrap())
        .collect()
}
