//! One sample line of Prometheus' text format, read by every `/metrics`
//! scraper of the client (queue gauges, speculative decoding, DCGM GPU
//! gauges): the metric name and its value, labels skipped.

/// One sample line of the Prometheus text format: `name{labels} value [ts]`.
/// Comments and malformed lines give `None`. Hand-written because the
/// `prometheus-parse` crate rejects the `:` that vLLM and llama.cpp put in
/// metric names; labels are skipped (quoted values may hold `}` or `,`).
pub fn parse_sample_line(line: &str) -> Option<(&str, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let (name, mut rest) = line.split_at(name_end);
    if rest.starts_with('{') {
        rest = &rest[label_block_len(rest)?..];
    }
    let value = rest.split_whitespace().next()?;
    let v = match value {
        "NaN" => f64::NAN,
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => value.parse().ok()?,
    };
    Some((name, v))
}

/// Length of a `{...}` label block, honouring quotes and backslash escapes.
fn label_block_len(s: &str) -> Option<usize> {
    let (mut in_quotes, mut escaped) = (false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some(i + 1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_may_hold_braces_commas_and_escaped_quotes() {
        let line =
            r#"vllm:num_requests_waiting{model_name="a,b}c",note="say \"hi\""} 5 1700000000"#;
        assert_eq!(
            parse_sample_line(line),
            Some(("vllm:num_requests_waiting", 5.0))
        );
        assert_eq!(
            parse_sample_line("x_total +Inf").map(|(_, v)| v),
            Some(f64::INFINITY)
        );
        assert_eq!(parse_sample_line("# HELP x y"), None);
        assert_eq!(parse_sample_line("broken{a=\"1\" 3"), None);
    }
}
