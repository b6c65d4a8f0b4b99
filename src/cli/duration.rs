//! Duration values on the command line (`90`, `500ms`, `2m`): one parser
//! under every argument group that takes a time.

/// Parse a duration: `90`, `90s`, `500ms`, `2m`, `1h`, `1.5s`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 30s, 500ms, 5m)"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{s}' (use ms, s, m or h)"
            ))
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("'{s}' is not a valid duration"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_accept_units_and_bare_seconds() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }
}
