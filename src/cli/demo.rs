//! `tessera demo`: the main job. Runs the sample programs on the default device, checks each
//! against its float64 reference, and prints compile and execute timings.

use super::CliError;
use crate::samples;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use tessera_runtime::{CompileOptions, Device, HostTensor};

/// The shipped kernels, traced and lowered to StableHLO, on random inputs vs float64.
fn kernels(device: &Device) -> Result<Vec<String>, CliError> {
    println!(
        "{:<12} {:<6} {:<18} {:>12} {:>10} {:>10}",
        "kernel", "dtype", "shape", "max rel err", "ms", "check"
    );
    let mut failed = Vec::new();
    for k in tessera_kernels::shipped() {
        for dtype in [tessera_lowering::DType::F32, tessera_lowering::DType::BF16] {
            let r = tessera_kernels::check(k, device, dtype, k.default_shape, 0)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            if !r.passed {
                failed.push(format!("{} {dtype}", k.name));
            }
            println!(
                "{:<12} {:<6} {:<18} {:>12.2e} {:>10.2} {:>10}",
                k.name,
                dtype.name(),
                format!("{:?}", k.default_shape),
                r.max_rel_err,
                r.elapsed.as_secs_f64() * 1e3,
                if r.passed { "ok" } else { "MISMATCH" }
            );
        }
    }
    Ok(failed)
}

/// Median of `runs` timed executions, after a warm-up.
fn median_execute(
    runs: usize,
    mut f: impl FnMut() -> Result<(), CliError>,
) -> Result<Duration, CliError> {
    f()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

pub fn run() -> Result<(), CliError> {
    let device = Device::from_env()?;
    let client = device.client()?;
    println!(
        "device: {} ({} {}, PJRT C API {}.{}, plugin {})",
        device.kind(),
        client.platform_name(),
        client.platform_version(),
        client.plugin().api_version().0,
        client.plugin().api_version().1,
        device
            .plugin_path()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    let mut failed = kernels(&device)?;
    println!();
    println!(
        "{:<46} {:>10} {:>12} {:>12} {:>10}",
        "program", "compile ms", "execute us", "max rel err", "check"
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    for s in samples::all() {
        let t = Instant::now();
        let exe = client.compile_cached(&s.module, &CompileOptions::default())?;
        let compile = t.elapsed();
        let inputs: Vec<Vec<f64>> = s
            .inputs
            .iter()
            .map(|(_, shape)| {
                (0..shape.iter().product::<usize>())
                    .map(|_| rng.gen_range(-1.0..1.0))
                    .collect()
            })
            .collect();
        let hosts: Vec<HostTensor> = s
            .inputs
            .iter()
            .zip(&inputs)
            .map(|((d, shape), v)| HostTensor::from_f64(*d, shape.clone(), v))
            .collect();
        // The reference sees the inputs as the device does (rounded to their dtype).
        let rounded: Vec<Vec<f64>> = hosts.iter().map(HostTensor::to_f64_vec).collect();
        let bufs = hosts
            .iter()
            .map(|h| client.upload(h))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<_> = bufs.iter().collect();
        let exec = median_execute(20, || {
            exe.execute(&refs)?
                .iter()
                .try_for_each(|b| b.block_until_ready())?;
            Ok(())
        })?;
        let out = exe.execute(&refs)?.remove(0).to_host()?;
        let want = (s.reference)(&rounded);
        let err = out
            .to_f64_vec()
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
            .fold(0.0, f64::max);
        let ok = err <= s.tolerance;
        if !ok {
            failed.push(s.name.to_string());
        }
        println!(
            "{:<46} {:>10.1} {:>12.1} {:>12.2e} {:>10}",
            s.name,
            compile.as_secs_f64() * 1e3,
            exec.as_secs_f64() * 1e6,
            err,
            if ok { "ok" } else { "MISMATCH" }
        );
    }
    // A second compile of the same module is an executable-cache hit.
    let first = &samples::all()[0].module;
    let t = Instant::now();
    client.compile_cached(first, &CompileOptions::default())?;
    println!(
        "executable-cache hit: {:.1} us",
        t.elapsed().as_secs_f64() * 1e6
    );
    let st = client.cache_stats();
    println!(
        "cache: {} hit(s), {} miss(es), {:.1} ms compiling in all",
        st.hits,
        st.misses,
        st.compile_time.as_secs_f64() * 1e3
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "mismatch vs the float64 reference: {}",
            failed.join(", ")
        )))
    }
}
