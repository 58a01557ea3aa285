//! `--plot FILE.svg`: traffic share over time per candidate (one panel per policy) and error
//! rate over time per policy, in 1 s bins summed over seeds.

use std::path::Path;

use plotters::prelude::*;

use super::report::{Report, Series, ALL_TRACKED_UP_TO};

const MAX_LINES: usize = 12;

/// Writes the SVG.
pub fn plot_svg(report: &Report, path: &Path) -> Result<(), String> {
    let panels = report.policies.len() + 1;
    let cols = 2usize;
    let rows = panels.div_ceil(cols);
    let root = SVGBackend::new(path, (1200, 320 * rows as u32)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let areas = root.split_evenly((rows, cols));
    let bins: Vec<_> = report.series.iter().map(Series::seconds).collect();
    let x_max = bins.iter().map(Vec::len).max().unwrap_or(1).max(1) as f64;

    for (p, policy) in report.policies.iter().enumerate() {
        let series = &report.series[p];
        let mut chart = ChartBuilder::on(&areas[p])
            .caption(
                format!("{}: traffic share per candidate", policy.policy),
                ("sans-serif", 16),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(40)
            .build_cartesian_2d(0.0..x_max, 0.0..1.0)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("virtual seconds")
            .y_desc("share")
            .draw()
            .map_err(|e| err(&e))?;
        if series.tracked.is_empty() {
            let why = format!(
                "no share series: over {ALL_TRACKED_UP_TO} candidates, only those the timeline \
                 names are followed"
            );
            areas[p]
                .draw(&Text::new(why, (60, 40), ("sans-serif", 13)))
                .map_err(|e| err(&e))?;
        }
        for (k, &cand) in series.tracked.iter().enumerate().take(MAX_LINES) {
            let color = Palette99::pick(k).to_rgba();
            let points = bins[p]
                .iter()
                .enumerate()
                .filter(|(_, b)| b.0 > 0)
                .map(|(i, b)| (i as f64 + 0.5, b.3[k] as f64 / b.0 as f64));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(report.candidates[cand].clone())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
        }
        if !series.tracked.is_empty() {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
        }
    }

    // Error rates are often small: scale to the highest one seen.
    let y_max = bins
        .iter()
        .flatten()
        .filter(|b| b.1 > 0)
        .map(|b| b.2 as f64 / b.1 as f64)
        .fold(0.0f64, f64::max)
        .clamp(0.01, 1.0)
        * 1.05;
    let mut chart = ChartBuilder::on(&areas[panels - 1])
        .caption(
            "error rate per policy (failed / finished requests)",
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("virtual seconds")
        .y_desc("error rate")
        .draw()
        .map_err(|e| err(&e))?;
    for (p, policy) in report.policies.iter().enumerate() {
        let color = Palette99::pick(p).to_rgba();
        let points = bins[p]
            .iter()
            .enumerate()
            .filter(|(_, b)| b.1 > 0)
            .map(|(i, b)| (i as f64 + 0.5, b.2 as f64 / b.1 as f64));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(policy.policy.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
