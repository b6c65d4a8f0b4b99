//! Hidden parameter sets for the twin's benchmarks (issue 27): drawn,
//! seeded, from the documented range, and the engine flags that start the
//! built-in simulator with them. Included by `twin_recovery.rs` and
//! `twin_prior_calibration.rs` (`#[path]`), not an example of its own.
#![allow(dead_code)]

/// splitmix64: a tiny seeded generator, the same on every platform.
pub struct Draw(pub u64);

impl Draw {
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + self.next() * (hi.ln() - lo.ln())).exp()
    }
}

/// One hidden parameter set.
#[derive(Debug, Clone)]
pub struct Hidden {
    pub max_num_seqs: u32,
    pub prefill_us: f64,
    pub step_ms: f64,
    pub decode_us: f64,
    pub kv_tokens: u32,
    pub interference: f64,
    pub prefix_caching: bool,
}

impl Hidden {
    pub fn draw(seed: u64) -> Self {
        let mut d = Draw(seed);
        let r3 = |x: f64| (x * 1e3).round() / 1e3;
        Hidden {
            max_num_seqs: d.log_uniform(4.0, 256.0).round() as u32,
            prefill_us: r3(d.log_uniform(20.0, 2000.0)),
            step_ms: r3(d.log_uniform(5.0, 40.0)),
            decode_us: r3(d.log_uniform(50.0, 1000.0)),
            kv_tokens: (d.log_uniform(20e3, 2e6) / 1e3).round() as u32 * 1000,
            interference: r3(d.next()),
            prefix_caching: d.next() < 0.5,
        }
    }

    /// The engine flags `sim`, `profile` and `predict` share.
    pub fn flags(&self) -> Vec<String> {
        let mut f: Vec<String> = [
            ("--max-num-seqs", self.max_num_seqs.to_string()),
            ("--prefill-token-us", self.prefill_us.to_string()),
            ("--step-base-ms", self.step_ms.to_string()),
            ("--decode-seq-us", self.decode_us.to_string()),
            ("--kv-cache-tokens", self.kv_tokens.to_string()),
            ("--prefill-interference", self.interference.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect();
        if !self.prefix_caching {
            f.push("--no-enable-prefix-caching".into());
        }
        f
    }
}

impl Hidden {
    /// The simulator's engine parameters these flags start it with (the
    /// rest is the `tiny` preset, as for `kneecap sim`).
    pub fn params(&self) -> kneecap::sim::ModelParams {
        use std::time::Duration;
        kneecap::sim::ModelParams {
            max_num_seqs: self.max_num_seqs,
            kv_cache_tokens: self.kv_tokens,
            step_base: Duration::from_secs_f64(self.step_ms / 1e3),
            per_prefill_token: Duration::from_secs_f64(self.prefill_us / 1e6),
            per_decode_seq: Duration::from_secs_f64(self.decode_us / 1e6),
            prefill_interference: self.interference,
            block_tokens: kneecap::sim::blocks::BLOCK_TOKENS,
            ..kneecap::sim::preset::tiny()
        }
    }
}
