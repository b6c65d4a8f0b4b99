//! How numbers and loads are printed in tables, knee lines, charts and the
//! misses table: one place, below every renderer that prints one.

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

/// A finite number with `prec` decimals, `-` otherwise.
pub fn num(v: f64, prec: usize) -> String {
    if v.is_finite() {
        format!("{v:.prec$}")
    } else {
        "-".into()
    }
}

/// A load bound without a needless `.0` (`64`, `2.5`; below 1, two
/// significant digits: `0.25`), `-` when not finite.
pub fn compact(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else {
        load_label(v)
    }
}

/// `title` centred in a `width`-wide line of `fill`, as Python's
/// `'{:=^50}'.format(title)` prints the banners of `vllm bench serve`.
pub fn centered(title: &str, fill: char, width: usize) -> String {
    let len = title.chars().count();
    if len >= width {
        return title.to_string();
    }
    let left = (width - len) / 2;
    let right = width - len - left;
    format!(
        "{}{title}{}",
        fill.to_string().repeat(left),
        fill.to_string().repeat(right)
    )
}
