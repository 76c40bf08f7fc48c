//! Line charts as SVG text, for the plots the benchmarks write beside their tables.
//!
//! A figure is panels stacked vertically; each panel has its own axes (linear, or
//! logarithmic on y for latencies that span decades) and one polyline per series. No
//! fonts are measured: labels are SVG `<text>` left to the viewer, so the output is the
//! same on every machine and diffs cleanly when committed.

use std::fmt::Write as _;

const WIDTH: f64 = 760.0;
const PANEL_HEIGHT: f64 = 280.0;
const TITLE_HEIGHT: f64 = 34.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 46.0;
/// Series colours, in order (colour-blind safe, Okabe–Ito).
const COLOURS: [&str; 6] = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"];

/// One line of a panel.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points in x order; points with a non-finite coordinate (or ≤ 0 on a log axis) are skipped.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from its name and points.
    #[must_use]
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self { name: name.to_owned(), points }
    }
}

/// How a panel's y axis is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    /// Linear from 0 (or below, for negative values).
    #[default]
    Linear,
    /// Base 10, for values spanning decades (positive values only).
    Log,
}

/// One chart with its own axes.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    /// Heading above the plot area.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// The y axis scale.
    pub y_scale: Scale,
    /// The lines.
    pub series: Vec<Series>,
}

/// The SVG document of `panels` stacked under `title`.
#[must_use]
pub fn figure(title: &str, panels: &[Panel]) -> String {
    let height = TITLE_HEIGHT + PANEL_HEIGHT * panels.len() as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{x}" y="22" font-size="15" text-anchor="middle">{t}</text>
"#,
        x = WIDTH / 2.0,
        t = escape(title)
    );
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut svg, panel, TITLE_HEIGHT + PANEL_HEIGHT * i as f64);
    }
    svg.push_str("</svg>\n");
    svg
}

/// The plot area of a panel in document coordinates and the data ranges mapped onto it.
struct Frame {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    x: (f64, f64),
    y: (f64, f64),
    log: bool,
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        self.left + (x - self.x.0) / (self.x.1 - self.x.0) * self.width
    }

    fn py(&self, y: f64) -> f64 {
        let y = if self.log { y.log10() } else { y };
        self.top + self.height - (y - self.y.0) / (self.y.1 - self.y.0) * self.height
    }
}

fn draw_panel(svg: &mut String, panel: &Panel, top: f64) {
    let log = panel.y_scale == Scale::Log;
    let points: Vec<(f64, f64)> = panel.series.iter().flat_map(|s| usable(&s.points, log)).collect();
    let frame = Frame {
        left: LEFT,
        top: top + TOP,
        width: WIDTH - LEFT - RIGHT,
        height: PANEL_HEIGHT - TOP - BOTTOM,
        x: x_range(&points),
        y: y_range(&points, log),
        log,
    };
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
        frame.left,
        top + TOP - 10.0,
        escape(&panel.title)
    );
    axes(svg, &frame, panel);
    for (i, series) in panel.series.iter().enumerate() {
        line(svg, &frame, &usable(&series.points, log), COLOURS[i % COLOURS.len()]);
        legend(svg, &frame, i, &series.name);
    }
}

fn usable(points: &[(f64, f64)], log: bool) -> Vec<(f64, f64)> {
    points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite() && (!log || *y > 0.0)).collect()
}

fn x_range(points: &[(f64, f64)]) -> (f64, f64) {
    let (lo, hi) = bounds(points.iter().map(|p| p.0));
    widen(lo, hi)
}

/// The y range: linear ranges include 0 and end on a tick; log ranges are whole decades.
fn y_range(points: &[(f64, f64)], log: bool) -> (f64, f64) {
    let (lo, hi) = bounds(points.iter().map(|p| p.1));
    if log {
        let (lo, hi) = if lo.is_finite() { (lo.log10().floor(), hi.log10().ceil()) } else { (0.0, 1.0) };
        return if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
    }
    // Ranges include 0; an all-zero series (no errors) gets 0..1, not a range below zero.
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let hi = if hi > lo { hi } else { lo + 1.0 };
    let step = tick_step(lo, hi);
    ((lo / step).floor() * step, (hi / step).ceil() * step)
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// A non-empty range: an empty or single-valued one becomes one unit wide.
fn widen(lo: f64, hi: f64) -> (f64, f64) {
    match (lo.is_finite(), hi > lo) {
        (false, _) => (0.0, 1.0),
        (true, true) => (lo, hi),
        (true, false) => (lo - 0.5, hi + 0.5),
    }
}

/// A 1, 2 or 5 × 10^k step giving about five ticks over `lo..hi`.
fn tick_step(lo: f64, hi: f64) -> f64 {
    let raw = (hi - lo) / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let nice = [1.0, 2.0, 5.0, 10.0].into_iter().find(|m| m * magnitude >= raw).unwrap_or(10.0);
    nice * magnitude
}

fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let step = tick_step(lo, hi);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

fn axes(svg: &mut String, f: &Frame, panel: &Panel) {
    let (bottom, right) = (f.top + f.height, f.left + f.width);
    let _ = writeln!(
        svg,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        f.left, f.top, f.width, f.height
    );
    for x in ticks(f.x.0, f.x.1) {
        let px = f.px(x);
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" y1="{bottom}" x2="{px:.1}" y2="{}" stroke="#444"/><text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 4.0,
            bottom + 17.0,
            number(x)
        );
    }
    let y_ticks: Vec<f64> =
        if f.log { (f.y.0 as i64..=f.y.1 as i64).map(|k| 10f64.powi(k as i32)).collect() } else { ticks(f.y.0, f.y.1) };
    for y in y_ticks {
        let py = f.py(y);
        let _ = writeln!(
            svg,
            r##"<line x1="{}" y1="{py:.1}" x2="{right}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            f.left,
            f.left - 6.0,
            py + 4.0,
            number(y)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text><text transform="translate({},{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        f.left + f.width / 2.0,
        bottom + 36.0,
        escape(&panel.x_label),
        f.left - 52.0,
        f.top + f.height / 2.0,
        escape(&panel.y_label)
    );
}

fn line(svg: &mut String, f: &Frame, points: &[(f64, f64)], colour: &str) {
    let coords: Vec<String> = points.iter().map(|&(x, y)| format!("{:.1},{:.1}", f.px(x), f.py(y))).collect();
    let _ =
        writeln!(svg, r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#, coords.join(" "));
    if points.len() <= 24 {
        for c in &coords {
            let (x, y) = c.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(svg, r#"<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>"#);
        }
    }
}

fn legend(svg: &mut String, f: &Frame, index: usize, name: &str) {
    let (x, y) = (f.left + f.width + 14.0, f.top + 12.0 + 18.0 * index as f64);
    let colour = COLOURS[index % COLOURS.len()];
    let _ = writeln!(
        svg,
        r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
        x + 20.0,
        x + 26.0,
        y + 4.0,
        escape(name)
    );
}

/// A tick label: integers without decimals, small values with as many as they need.
fn number(v: f64) -> String {
    if v == v.round() && v.abs() < 1e9 {
        return format!("{}", v as i64);
    }
    let text = format!("{v:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers_covering_the_range() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 5000.0), vec![0.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0]);
        assert_eq!(y_range(&[(0.0, 0.3), (1.0, 3.7)], false), (0.0, 4.0));
        assert_eq!(y_range(&[(0.0, 0.2), (1.0, 376.0)], true), (-1.0, 3.0));
        assert_eq!(y_range(&[(0.0, 0.0), (1.0, 0.0)], false), (0.0, 1.0));
        assert_eq!(y_range(&[], false), (0.0, 1.0));
    }

    #[test]
    fn a_figure_draws_every_series_and_escapes_text() {
        let panel = Panel {
            title: "p99 <ms>".into(),
            series: vec![Series::new("a & b", vec![(1.0, 2.0), (2.0, 3.0)]), Series::new("c", vec![(1.0, 1.0)])],
            ..Panel::default()
        };
        let svg = figure("t", &[panel.clone(), panel]);
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert!(svg.contains("p99 &lt;ms&gt;") && svg.contains("a &amp; b"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn log_panels_skip_values_they_cannot_show() {
        let panel = Panel {
            y_scale: Scale::Log,
            series: vec![Series::new("s", vec![(1.0, -1.0), (2.0, 0.0), (3.0, 10.0), (4.0, f64::NAN)])],
            ..Panel::default()
        };
        let svg = figure("t", &[panel]);
        assert_eq!(svg.matches("<circle").count(), 1);
    }
}
