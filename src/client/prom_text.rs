//! One sample line of Prometheus' text format, read by every `/metrics`
//! scraper of the client (queue gauges, speculative decoding, DCGM GPU
//! gauges): the metric name and its value, labels skipped; and the labels
//! of an info metric (vLLM's `vllm:cache_config_info`), which carry its data.

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

/// The labels of one sample line named `name` (`name{k="v",...} 1`), in
/// order, with their values unescaped; `None` for another name, a comment or
/// a malformed block.
pub fn parse_labels(line: &str, name: &str) -> Option<Vec<(String, String)>> {
    let rest = line.trim().strip_prefix(name)?;
    if !rest.starts_with('{') {
        return rest.starts_with(char::is_whitespace).then(Vec::new);
    }
    let block = &rest[1..label_block_len(rest)? - 1];
    let mut labels = Vec::new();
    let mut chars = block.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(labels);
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                c => value.push(c),
            }
        }
        labels.push((key.trim().to_string(), value));
    }
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

    #[test]
    fn info_labels_are_read_in_order_and_unescaped() {
        let line = r#"vllm:cache_config_info{block_size="128",note="a \"b\", c}",enable_prefix_caching="True"} 1.0"#;
        let labels = parse_labels(line, "vllm:cache_config_info").unwrap();
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("block_size", "128"),
                ("note", "a \"b\", c}"),
                ("enable_prefix_caching", "True")
            ]
        );
        assert_eq!(parse_labels(line, "vllm:cache_config"), None);
        assert_eq!(parse_labels("x_info 1", "x_info"), Some(vec![]));
        assert_eq!(parse_labels("x_info{a=1} 1", "x_info"), None);
        assert_eq!(parse_labels("# HELP x_info y", "x_info"), None);
    }
}
