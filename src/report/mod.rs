//! Report: the renderings of the results of [`crate::result`] — a run's
//! console summary, a sweep's table, charts and HTML report, the misses
//! table and knee lines — and writing results to files ([`save`]: a run as
//! [`crate::result::json::RunJson`]). Renderers are pure functions of the
//! result.

pub mod chart;
pub mod console;
pub mod gpu_text;
pub mod html;
pub mod knee_text;
pub mod misses;
pub mod numbers;
pub mod save;
pub mod sessions;
pub mod table;

/// Python's `str(float)` for the few values vLLM prints that way (`10.0`, `inf`, `2.5`).
pub fn python_float(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v.fract() == 0.0 && v.abs() < 1e16 {
        return format!("{v:.1}");
    }
    format!("{v}")
}

#[cfg(test)]
mod tests {
    use super::python_float;

    #[test]
    fn floats_print_like_python() {
        assert_eq!(python_float(10.0), "10.0");
        assert_eq!(python_float(2.5), "2.5");
        assert_eq!(python_float(f64::INFINITY), "inf");
    }
}
