//! The server's speculative-decoding numbers in a Prometheus text body.
//! vLLM's counters (`vllm:spec_decode_num_drafts`, `_num_draft_tokens`,
//! `_num_accepted_tokens` and `_num_accepted_tokens_per_pos` by `position`,
//! each exported as `<name>_total`), summed over engines and read as
//! `vllm bench serve` reads them; or, from SGLang, which exports no
//! counters, its gauges `sglang:spec_accept_length` and
//! `sglang:spec_accept_rate` (its last logging interval; mean over ranks).
//! Pure.

use std::collections::BTreeMap;

use super::prom_text::parse_sample_line;

/// vLLM's speculative-decoding counters at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpecCounters {
    /// `vllm:spec_decode_num_drafts_total`.
    pub drafts: f64,
    /// `vllm:spec_decode_num_draft_tokens_total`.
    pub draft_tokens: f64,
    /// `vllm:spec_decode_num_accepted_tokens_total`.
    pub accepted_tokens: f64,
    /// `vllm:spec_decode_num_accepted_tokens_per_pos_total` by `position`.
    pub accepted_per_pos: BTreeMap<u32, f64>,
}

/// SGLang's speculative-decoding gauges at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SglangSpec {
    /// `sglang:spec_accept_length`: tokens per verify step, the bonus token included.
    pub accept_length: f64,
    /// `sglang:spec_accept_rate`: accepted over drafted tokens, 0..=1.
    pub accept_rate: f64,
}

/// What a server's `/metrics` says about speculative decoding.
#[derive(Debug, Clone, PartialEq)]
pub enum SpecReading {
    /// vLLM's counters.
    Vllm(SpecCounters),
    /// SGLang's gauges.
    Sglang(SglangSpec),
}

const DRAFTS: &str = "vllm:spec_decode_num_drafts_total";
const DRAFT_TOKENS: &str = "vllm:spec_decode_num_draft_tokens_total";
const ACCEPTED: &str = "vllm:spec_decode_num_accepted_tokens_total";
const PER_POS: &str = "vllm:spec_decode_num_accepted_tokens_per_pos_total";

/// The speculative-decoding numbers in `text`, `None` when it has none
/// (speculation off, or another server).
pub fn parse_spec(text: &str) -> Option<SpecReading> {
    parse_vllm(text)
        .map(SpecReading::Vllm)
        .or_else(|| parse_sglang(text).map(SpecReading::Sglang))
}

fn parse_vllm(text: &str) -> Option<SpecCounters> {
    let mut c = SpecCounters::default();
    let mut found = false;
    for line in text.lines() {
        let Some((name, v)) = parse_sample_line(line) else {
            continue;
        };
        let slot = match name {
            DRAFTS => &mut c.drafts,
            DRAFT_TOKENS => &mut c.draft_tokens,
            ACCEPTED => &mut c.accepted_tokens,
            PER_POS => match label(line, "position").and_then(|p| p.parse().ok()) {
                Some(pos) => c.accepted_per_pos.entry(pos).or_default(),
                None => continue,
            },
            _ => continue,
        };
        *slot += v;
        found = true;
    }
    found.then_some(c)
}

fn parse_sglang(text: &str) -> Option<SglangSpec> {
    let mean = |want: &str| {
        let vals: Vec<f64> = text
            .lines()
            .filter_map(parse_sample_line)
            .filter(|(n, v)| *n == want && v.is_finite())
            .map(|(_, v)| v)
            .collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    };
    Some(SglangSpec {
        accept_length: mean("sglang:spec_accept_length")?,
        accept_rate: mean("sglang:spec_accept_rate")?,
    })
}

/// The value of label `key` in a sample line's label block (no escapes in
/// the value: vLLM's positions are plain numbers).
fn label<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let block = &line[line.find('{')?..];
    let at = block.find(&format!("{key}=\""))? + key.len() + 2;
    let rest = &block[at..];
    Some(&rest[..rest.find('"')?])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two engines' counters, as vLLM's Prometheus client writes them.
    const VLLM: &str = "# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 100.0
vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} 50.0
vllm:spec_decode_num_drafts_created{engine=\"0\",model_name=\"m\"} 1.7e9
vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine=\"1\",model_name=\"m\"} 150.0
vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 180.0
vllm:spec_decode_num_accepted_tokens_total{engine=\"1\",model_name=\"m\"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"1\",model_name=\"m\",position=\"0\"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"2\"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"1\"} 60.0
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0
";

    #[test]
    fn vllm_counters_are_summed_over_engines_by_position() {
        let Some(SpecReading::Vllm(c)) = parse_spec(VLLM) else {
            panic!("vLLM counters not found");
        };
        assert_eq!(
            (c.drafts, c.draft_tokens, c.accepted_tokens),
            (150.0, 450.0, 270.0)
        );
        let per: Vec<(u32, f64)> = c.accepted_per_pos.into_iter().collect();
        assert_eq!(per, [(0, 120.0), (1, 60.0), (2, 40.0)]);
    }

    #[test]
    fn sglang_gauges_are_averaged_over_ranks() {
        let text = "# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name=\"m\",dp_rank=\"0\"} 2.5
sglang:spec_accept_length{model_name=\"m\",dp_rank=\"1\"} 3.5
sglang:spec_accept_rate{model_name=\"m\",dp_rank=\"0\"} 0.6
";
        let want = SglangSpec {
            accept_length: 3.0,
            accept_rate: 0.6,
        };
        assert_eq!(parse_spec(text), Some(SpecReading::Sglang(want)));
    }

    #[test]
    fn a_server_without_speculation_gives_nothing() {
        assert_eq!(parse_spec("vllm:num_requests_running 1\n"), None);
        // vLLM's bench reads only the `_total` samples.
        assert_eq!(
            parse_spec("vllm:spec_decode_num_drafts_created 1.7e9\n"),
            None
        );
        assert_eq!(parse_spec(""), None);
    }
}
