//! `tessera ops coverage`: the ATen op table merged with the last sweep's results.

use super::CliError;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use tessera_ops::coverage::{coverage, Coverage, Status, Sweep};

#[derive(Subcommand)]
pub enum OpsAction {
    /// Per-op status (implemented / overridden / missing), dtypes and sweep results; totals
    /// for Core ATen and for all.
    Coverage(CoverageArgs),
}

#[derive(Args)]
pub struct CoverageArgs {
    /// Print JSON: {"core_total", "core_passing", "total", "passing" (overloads), "ops_total",
    /// "ops_passing" (distinct ops), ..., "ops": [...]}.
    #[arg(long)]
    json: bool,
    /// The sweep results to merge (default: ops/coverage/sweep.json, as `make ops-coverage`
    /// writes): a regular file of at most 256 MiB.
    #[arg(long)]
    sweep: Option<PathBuf>,
    /// List every op, not only those that are not passing.
    #[arg(long)]
    all: bool,
}

pub fn run(action: OpsAction) -> Result<(), CliError> {
    match action {
        OpsAction::Coverage(args) => coverage_cmd(&args),
    }
}

fn default_sweep() -> PathBuf {
    let local = PathBuf::from("ops/coverage/sweep.json");
    if local.exists() {
        local
    } else {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/ops/coverage/sweep.json"
        ))
    }
}

fn coverage_cmd(args: &CoverageArgs) -> Result<(), CliError> {
    let path = args.sweep.clone().unwrap_or_else(default_sweep);
    let text = super::files::read_text(&path)?;
    let sweep: Sweep = serde_json::from_str(&text).map_err(|e| {
        CliError::Usage(format!(
            "the sweep results {} are not valid: {e}",
            path.display()
        ))
    })?;
    let c = coverage(&sweep);
    if args.json {
        let text = serde_json::to_string_pretty(&c).map_err(|e| CliError::Usage(e.to_string()))?;
        println!("{text}");
        return Ok(());
    }
    print_table(&c, args.all);
    Ok(())
}

fn print_table(c: &Coverage, all: bool) {
    for o in c.ops.iter().filter(|o| all || !o.passing) {
        let status = match o.status {
            Status::Implemented => "implemented",
            Status::Overridden => "overridden",
            Status::Missing => "missing",
        };
        println!(
            "{:<6} {:<40} {:<12} {:>4} passed {:>3} failed  {}",
            if o.passing { "PASS" } else { "FAIL" },
            format!("{}{}", o.name, if o.core { " (core)" } else { "" }),
            status,
            o.passed,
            o.failed,
            o.dtypes.join(",")
        );
        if let Some(e) = o.errors.first() {
            println!("       {e}");
        }
        for (dtype, reason) in &o.refused_dtypes {
            if !dtype.starts_with("complex") {
                println!("       refuses {dtype}: {reason}");
            }
        }
    }
    println!(
        "Core ATen: {}/{} passing ({} implemented); all: {}/{} overloads passing ({} implemented), {}/{} distinct ops; sweep: torch {}, {:.0} s",
        c.core_passing,
        c.core_total,
        c.core_implemented,
        c.passing,
        c.total,
        c.implemented,
        c.ops_passing,
        c.ops_total,
        c.torch_version,
        c.sweep_wall_s
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_report_has_distinct_op_counts_beside_the_overload_counts() {
        let file = tempfile::Builder::new()
            .prefix("tessera-sweep-")
            .suffix(".json")
            .tempfile()
            .unwrap();
        let path = file.path();
        std::fs::write(
            path,
            r#"{"torch_version": "2.15.0", "wall_s": 1.0, "ops": {"abs": {"passed": 2, "failed": 0}, "abs_": {"passed": 1, "failed": 0}, "abs.out": {"passed": 1, "failed": 0}, "add.Tensor": {"passed": 1, "failed": 1}}}"#,
        )
        .unwrap();
        let sweep = Sweep::load(path).unwrap();
        let json = serde_json::to_value(coverage(&sweep)).unwrap();
        for key in [
            "core_total",
            "core_passing",
            "total",
            "passing",
            "ops_total",
            "ops_passing",
        ] {
            assert!(json[key].is_u64(), "{key} missing");
        }
        assert_eq!(
            json["ops_passing"], 1,
            "abs (all three overloads) passes, add does not"
        );
        assert!(json["ops_total"].as_u64().unwrap() < json["total"].as_u64().unwrap());
    }
}
