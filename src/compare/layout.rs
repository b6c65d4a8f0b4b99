//! A small table type rendered as aligned text, GitHub Markdown or CSV, shared
//! by `kneecap report` and `kneecap compare`. PURE: returns Strings.

/// Headers and rows of already formatted cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers and no rows yet.
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Append one row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Aligned columns: the first and any column holding words left-aligned,
    /// numeric columns right-aligned.
    pub fn to_text(&self) -> String {
        let widths = self.widths();
        let words: Vec<bool> = (0..self.headers.len())
            .map(|i| {
                i == 0
                    || self.rows.iter().any(|r| {
                        r.get(i)
                            .is_some_and(|c| c.chars().any(char::is_alphabetic) && c != "inf")
                    })
            })
            .collect();
        let mut out = String::new();
        for cells in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                let pad = " ".repeat(w.saturating_sub(c.chars().count()));
                if words.get(i).copied().unwrap_or(false) {
                    line.push_str(&format!("{c}{pad}  "));
                } else {
                    line.push_str(&format!("{pad}{c}  "));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// A GitHub-flavoured Markdown table (pipes in cells escaped).
    pub fn to_markdown(&self) -> String {
        let row = |cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = row(&self.headers);
        let rule: Vec<String> = (0..self.headers.len())
            .map(|i| if i == 0 { ":--" } else { "--:" }.to_string())
            .collect();
        out.push_str(&row(&rule));
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }

    /// RFC 4180 CSV with a header line.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for cells in std::iter::once(&self.headers).chain(&self.rows) {
            let cells: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        widths
    }
}

/// Quote a CSV cell when it holds a comma, quote or line break.
fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}

/// A number with up to `prec` decimals, `-` when not finite or absent.
pub fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.prec$}"),
        Some(x) if x.is_infinite() => "inf".into(),
        _ => "-".into(),
    }
}

/// A signed relative change, `+12.3%`, or `-` when undefined.
pub fn fmt_change(pct: Option<f64>) -> String {
    match pct {
        Some(x) if x.is_finite() => format!("{x:+.1}%"),
        _ => "-".into(),
    }
}

/// (b − a) / a in percent; `None` when a is 0 or either is not finite.
pub fn change_pct(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (a.is_finite() && b.is_finite() && a.abs() > f64::EPSILON).then(|| (b - a) / a.abs() * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&["load", "p99"]);
        t.push(vec!["8".into(), "12.5".into()]);
        t.push(vec!["16, hi".into(), "a|\"b\"".into()]);
        t
    }

    #[test]
    fn text_markdown_and_csv_render_every_row() {
        let t = table();
        assert_eq!(t.to_text().lines().count(), 3);
        let md = t.to_markdown();
        assert!(md.starts_with("| load | p99 |\n| :-- | --: |\n"), "{md}");
        assert!(md.contains("a\\|\"b\""));
        assert_eq!(t.to_csv(), "load,p99\n8,12.5\n\"16, hi\",\"a|\"\"b\"\"\"\n");
    }

    #[test]
    fn changes_are_relative_to_the_baseline() {
        assert_eq!(change_pct(Some(100.0), Some(130.0)), Some(30.0));
        assert_eq!(change_pct(Some(0.0), Some(1.0)), None);
        assert_eq!(fmt_change(Some(-5.0)), "-5.0%");
        assert_eq!(fmt_opt(None, 1), "-");
    }
}
