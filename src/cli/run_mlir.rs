//! `tessera run-mlir FILE --input f32[2,3]=random ...`

use super::inputs::{rng, InputSpec};
use super::CliError;
use clap::Args;
use std::time::Instant;
use tessera_runtime::{CompileOptions, Device, DeviceKind, HostTensor, Signature};

#[derive(Args)]
pub struct RunMlirArgs {
    /// A StableHLO module (MLIR text) whose entry point is `@main`: a regular file of at
    /// most 256 MiB, nested at most 256 levels deep ({, (, [ and < together).
    pub file: String,
    /// One per argument of @main, in order: DTYPE[DIMS]=VALUE (VALUE: random, zeros, ones, iota,
    /// a number, or a comma list). Without any, random inputs are made from @main's signature.
    #[arg(long = "input", short = 'i')]
    pub inputs: Vec<InputSpec>,
    /// Device kind (default: $TESSERA_DEVICE, else cpu).
    #[arg(long)]
    pub device: Option<String>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print every element (default: the first 16 of each output).
    #[arg(long)]
    pub full: bool,
    /// After the printed run, execute the program N more times on the same device inputs
    /// (each waited for) and print the median and fastest execution time (at most 1,000,000).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub repeat: u32,
}

pub fn run(args: &RunMlirArgs) -> Result<(), CliError> {
    let text = super::files::read_text(std::path::Path::new(&args.file))?;
    let device = match &args.device {
        Some(d) => Device::new(DeviceKind::parse(d)?)?,
        None => Device::from_env()?,
    };
    let client = device.client()?;
    let specs = if args.inputs.is_empty() {
        match Signature::of_main(&text) {
            Some(sig) => sig.inputs.into_iter().map(InputSpec::random).collect(),
            None => Vec::new(),
        }
    } else {
        args.inputs.clone()
    };
    let start = Instant::now();
    let exe = client.compile_cached(&text, &CompileOptions::default())?;
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut rng = rng(args.seed);
    let hosts = specs
        .iter()
        .map(|s| s.materialize(&mut rng))
        .collect::<Result<Vec<HostTensor>, _>>()?;
    let bufs = hosts
        .iter()
        .map(|h| client.upload(h))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<_> = bufs.iter().collect();
    let start = Instant::now();
    let outs = exe.execute(&refs)?;
    let outs = outs
        .iter()
        .map(|b| b.to_host())
        .collect::<Result<Vec<_>, _>>()?;
    let run_ms = start.elapsed().as_secs_f64() * 1e3;
    for (i, h) in hosts.iter().enumerate() {
        println!("input {i}: {}", render(h, args.full));
    }
    for (i, o) in outs.iter().enumerate() {
        println!("output {i}: {}", render(o, args.full));
    }
    println!(
        "compiled in {compile_ms:.1} ms, ran in {run_ms:.3} ms on {}",
        device.kind()
    );
    if args.repeat > 0 {
        let mut ms = Vec::with_capacity(args.repeat as usize);
        for _ in 0..args.repeat {
            let start = Instant::now();
            for o in exe.execute(&refs)? {
                o.block_until_ready()?;
            }
            ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "execute (inputs on the device, outputs waited for), {} runs: median {:.3} ms, \
             fastest {:.3} ms",
            ms.len(),
            ms[ms.len() / 2],
            ms[0]
        );
    }
    Ok(())
}

fn render(t: &HostTensor, full: bool) -> String {
    let dims: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
    let vals = t.to_f64_vec();
    let shown = if full { vals.len() } else { vals.len().min(16) };
    // Print at the dtype's own precision: an f32 shown with f64 digits suggests false accuracy.
    let narrow = matches!(
        t.dtype(),
        tessera_runtime::DType::F32 | tessera_runtime::DType::F16 | tessera_runtime::DType::BF16
    );
    let body: Vec<String> = vals[..shown]
        .iter()
        .map(|&v| {
            if narrow {
                format!("{}", v as f32)
            } else {
                format!("{v}")
            }
        })
        .collect();
    let more = if shown < vals.len() {
        format!(", ... ({} more)", vals.len() - shown)
    } else {
        String::new()
    };
    format!(
        "{}[{}] = [{}{}]",
        t.dtype(),
        dims.join(","),
        body.join(", "),
        more
    )
}
