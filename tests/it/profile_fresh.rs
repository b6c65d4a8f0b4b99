//! A second `kneecap profile` of the same server sends prompts the first did
//! not: a prompt the server has already seen comes back from its prefix
//! cache, and its TTFT is then not its prefill cost (against vLLM 0.32 a
//! repeated profile read 106 µs a prompt token instead of 430). The
//! simulator's server log says how many of each request's prompt tokens
//! its prefix cache served.

use crate::common;
use std::collections::BTreeMap;

/// Cached prompt tokens per profile, profiles told apart by their request
/// ids' random prefix (`bench-<8 hex>-`), in the order they ran.
fn cached_by_profile(log: &std::path::Path) -> Vec<(String, u64, usize)> {
    let (requests, _) = common::sim::requests(log, "bench-");
    let mut order: Vec<String> = Vec::new();
    let mut sums: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    for r in &requests {
        let id = r["request_id"].as_str().unwrap();
        let prefix = id[..15].to_string();
        if !order.contains(&prefix) {
            order.push(prefix.clone());
        }
        let e = sums.entry(prefix).or_default();
        e.0 += r["cached_tokens"].as_u64().unwrap_or(0);
        e.1 += 1;
    }
    order
        .into_iter()
        .map(|p| {
            let (c, n) = sums[&p];
            (p, c, n)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_profile_of_the_same_server_is_not_served_from_its_prefix_cache() {
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::tiny(dir.path().join("sim.jsonl")).await;
    for i in 0..2 {
        let out = dir.path().join(format!("p{i}.json"));
        let args = ["profile", "--base-url", &sim.url, "--budget", "10", "-o"];
        let mut args = common::cli::strings(&args);
        args.push(out.display().to_string());
        let o = common::cli::run(args, Vec::new()).await;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let log = sim.log.clone();
    sim.handle.shutdown().await.unwrap();
    let profiles = cached_by_profile(&log);
    assert_eq!(profiles.len(), 2, "{profiles:?}");
    let (first, second) = (&profiles[0], &profiles[1]);
    assert!(first.2 > 20 && second.2 > 20, "{profiles:?}");
    // Each profile sends two prompts twice on purpose (the prefix-cache
    // probe): the first profile's only cache hits. The second may hit as
    // often, not more (with the first's prompts again, every lone prompt of
    // its prefill probe would).
    assert!(
        first.1 > 0,
        "the deliberate repeats hit the cache: {profiles:?}"
    );
    assert!(
        second.1 <= first.1 + first.1 / 2 + 256,
        "the second profile was served from the cache the first filled: {profiles:?}"
    );
}
