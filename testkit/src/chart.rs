//! A hand-written SVG chart of latency CDFs: one panel per operation, stacked, a log-scale x
//! axis in ms shared by the panels, one curve per subject.

use std::fmt::Write;
use std::time::Duration;

/// One subject's samples, sorted ascending.
pub struct Series<'a> {
    /// The subject's name in the legend.
    pub label: &'a str,
    /// Its curve's colour (an SVG colour).
    pub color: &'a str,
    /// Its samples, sorted ascending.
    pub sorted: &'a [Duration],
}

/// One panel: a title and its curves (empty series are left out).
pub struct Panel<'a> {
    /// Shown above the panel.
    pub title: String,
    /// One curve per subject.
    pub series: Vec<Series<'a>>,
}

const WIDTH: f64 = 1100.0;
const PANEL_HEIGHT: f64 = 330.0;
const LEFT: f64 = 70.0;
/// Room for the legend.
const RIGHT: f64 = 370.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 45.0;
/// Points per curve at most: every sample would make the file large for no visible gain.
const MAX_POINTS: usize = 600;

/// The SVG document: `title` above the panels.
pub fn cdf_svg(title: &str, panels: &[Panel<'_>]) -> String {
    let all = panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|s| s.sorted.iter().map(|d| d.as_secs_f64() * 1e3));
    let (min, max) = all.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (min, max) = if max > 0.0 {
        (min.max(1e-3), max)
    } else {
        (1e-3, 1.0)
    };
    let axis = LogAxis {
        lo: min.log10().floor(),
        hi: max.log10().ceil().max(min.log10().floor() + 1.0),
    };
    let height = TOP + panels.len() as f64 * PANEL_HEIGHT;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="28" font-size="16" font-weight="bold" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut svg, &axis, panel, TOP + i as f64 * PANEL_HEIGHT);
    }
    svg.push_str("</svg>\n");
    svg
}

/// Decades `10^lo ..= 10^hi` ms across the plot width.
struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    fn x(&self, value_ms: f64) -> f64 {
        let plot = WIDTH - LEFT - RIGHT;
        let v = value_ms.max(10f64.powf(self.lo)).log10();
        LEFT + (v - self.lo) / (self.hi - self.lo) * plot
    }
}

fn draw_panel(svg: &mut String, axis: &LogAxis, panel: &Panel<'_>, top: f64) {
    let plot_top = top + 20.0;
    let plot_bottom = top + PANEL_HEIGHT - BOTTOM;
    let y = |fraction: f64| plot_bottom - fraction * (plot_bottom - plot_top);
    let right = WIDTH - RIGHT;
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        top + 12.0,
        escape(&panel.title)
    );
    // Grid and y ticks: quartiles, plus 0.9 and 0.99 dashed (0.99 unlabelled: too close to 1).
    for (fraction, label, dashed) in [
        (0.0, "0", false),
        (0.25, "0.25", false),
        (0.5, "0.5", false),
        (0.75, "0.75", false),
        (0.9, "0.9", true),
        (0.99, "", true),
        (1.0, "1", false),
    ] {
        let dash = if dashed {
            r#" stroke-dasharray="4 3""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{right}" y1="{0:.1}" y2="{0:.1}" stroke="#ddd"{dash}/><text x="{1}" y="{2:.1}" text-anchor="end">{label}</text>"##,
            y(fraction),
            LEFT - 6.0,
            y(fraction) + 4.0,
        );
    }
    // x ticks: every decade labelled, 2..9 of each as minor grid lines.
    let mut decade = axis.lo;
    while decade <= axis.hi {
        let base = 10f64.powf(decade);
        let x = axis.x(base);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{plot_top}" y2="{0}" stroke="#bbb"/><text x="{x:.1}" y="{1}" text-anchor="middle">{2}</text>"##,
            plot_bottom + 5.0,
            plot_bottom + 18.0,
            tick_label(base),
        );
        if decade < axis.hi {
            for m in 2..10 {
                let x = axis.x(base * f64::from(m));
                let _ = writeln!(
                    svg,
                    r##"<line x1="{x:.1}" x2="{x:.1}" y1="{plot_top}" y2="{plot_bottom}" stroke="#eee"/>"##
                );
            }
        }
        decade += 1.0;
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{LEFT}" y="{plot_top}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        right - LEFT,
        plot_bottom - plot_top
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">latency (ms, log scale)</text>"#,
        (LEFT + right) / 2.0,
        plot_bottom + 36.0
    );
    let _ = writeln!(
        svg,
        r#"<text transform="translate(18 {0:.1}) rotate(-90)" text-anchor="middle">fraction ≤ x (dashed: 0.9, 0.99)</text>"#,
        (plot_top + plot_bottom) / 2.0
    );
    let mut legend_y = plot_top + 10.0;
    for s in panel.series.iter().filter(|s| !s.sorted.is_empty()) {
        let points: Vec<String> = cdf_points(s.sorted)
            .map(|(ms, fraction)| format!("{:.1},{:.1}", axis.x(ms), y(fraction)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            s.color,
            points.join(" ")
        );
        let p50 = s.sorted[(s.sorted.len() - 1) / 2].as_secs_f64() * 1e3;
        let lx = right + 15.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" x2="{0}" y1="{legend_y:.1}" y2="{legend_y:.1}" stroke="{1}" stroke-width="3"/><text x="{2}" y="{3:.1}">{4} (p50 {p50:.3} ms)</text>"#,
            lx + 22.0,
            s.color,
            lx + 28.0,
            legend_y + 4.0,
            escape(s.label),
        );
        legend_y += 20.0;
    }
}

/// (value in ms, fraction ≤ value) of a CDF of `sorted`: at most [`MAX_POINTS`], evenly spaced
/// in rank, the first and the last sample always included.
fn cdf_points(sorted: &[Duration]) -> impl Iterator<Item = (f64, f64)> + '_ {
    let n = sorted.len();
    let step = n.div_ceil(MAX_POINTS).max(1);
    (0..n)
        .step_by(step)
        .chain((n > 1 && (n - 1) % step != 0).then_some(n - 1))
        .map(move |i| (sorted[i].as_secs_f64() * 1e3, (i + 1) as f64 / n as f64))
}

fn tick_label(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.0}")
    } else {
        // 0.1, 0.01, 0.001
        let digits = (-ms.log10()).round() as usize;
        format!("{ms:.digits$}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
