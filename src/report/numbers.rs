//! How a load is printed in tables, knee lines and the misses table: one
//! place, below every renderer that prints one.

/// A load as the table and knee lines print it: one decimal from 1 up
/// (`32.0`, `2.5`), two significant digits below 1 (`0.25`, `0.033`), so
/// small loads do not all read `0.0`.
pub fn load_label(v: f64) -> String {
    if !v.is_finite() || v.abs() >= 1.0 || v == 0.0 {
        return format!("{v:.1}");
    }
    let magnitude = v.abs().log10().floor() as i64;
    let prec = (1 - magnitude).clamp(1, 6) as usize;
    format!("{v:.prec$}")
}
