//! An SVG plot of a tuning run: time per evaluated config, in evaluation order, with the
//! best so far as a line (what the search bought with each evaluation).

use plotters::prelude::*;
use std::path::Path;
use tessera_runtime::autotune::TuneReport;

/// Writes the plot of `report`'s measured configs to `path`. Failed and rejected configs have
/// no time and are left out.
pub fn plot_history(report: &TuneReport, path: &Path) -> Result<(), String> {
    let points: Vec<(f64, f64)> = report
        .history
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some(((i + 1) as f64, e.time()?.as_secs_f64() * 1e3)))
        .collect();
    if points.is_empty() {
        return Err("no measured config to plot".into());
    }
    let best_so_far: Vec<(f64, f64)> = points
        .iter()
        .scan(f64::INFINITY, |best, &(x, y)| {
            *best = best.min(y);
            Some((x, *best))
        })
        .collect();
    let x_max = report.history.len().max(2) as f64;
    let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    let err = |e: &dyn std::fmt::Display| format!("plotting to {}: {e}", path.display());

    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let caption = format!(
        "{} ({}): ms per evaluated config",
        report.kernel, report.strategy
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max + 1.0, 0.0..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("evaluation")
        .y_desc("ms (median undisturbed run)")
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))
        .map_err(|e| err(&e))?
        .label("config")
        .legend(|(x, y)| Circle::new((x, y), 4, BLUE.filled()));
    chart
        .draw_series(LineSeries::new(best_so_far, RED))
        .map_err(|e| err(&e))?
        .label("best so far")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
