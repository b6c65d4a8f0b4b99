//! The console text of a prediction and of a grid.

use super::*;
use crate::result::explain::{Evidence, ExplainSource, KneeExplain, MovedKnee, Moves};
use crate::sim::preset;
use crate::sim::virtual_time::VirtualLoad;
use crate::twin::grid::GridCell;
use crate::twin::knee::TruthConfig;

fn header() -> PredictJson {
    let cfg = TruthConfig {
        params: preset::tiny(),
        load: VirtualLoad::fixed(1024, 128, 100, 1_000),
        slos: vec!["p99_ttft_ms<=500".parse().unwrap()],
        range_ratio: (0.0, 0.0),
        burstiness: 1.0,
        seeds: vec![0, 1, 2],
        precision: 0.0025,
        tail: crate::sim::params::HostStalls::NONE,
    };
    let mut j = PredictJson::new("0.1.0", "preset tiny", &cfg, 0);
    (j.cpu_s, j.wall_s) = (3.25, 1.5);
    j
}

fn prediction(knee: f64, binds: Binding) -> Prediction {
    Prediction {
        knee_req_s: knee,
        low_req_s: knee * 0.9,
        high_req_s: knee * 1.1,
        kind: KneeKind::Knee,
        mu_req_s: knee * 1.2,
        seed_spread_req_s: (knee * 0.9, knee * 1.1),
        corner_knees_req_s: Vec::new(),
        runs: 40,
        explain: Some(KneeExplain {
            binds,
            source: ExplainSource::Model,
            line: format!("{}: because", binds.label()),
            failed_slos: vec!["p99_ttft_ms<=500".into()],
            evidence: Evidence::default(),
            moves: None,
        }),
        misfit: None,
    }
}

#[test]
fn the_knee_text_says_predicted_with_its_interval_binding_moves_and_cost() {
    let mut j = header();
    let mut p = prediction(20.0, Binding::BatchSlots);
    p.explain.as_mut().unwrap().moves = Some(Moves {
        parameter: "max_num_seqs".into(),
        value: 32.0,
        minus_25: MovedKnee {
            value: 24.0,
            knee: Some(15.0),
        },
        plus_25: MovedKnee {
            value: 40.0,
            knee: Some(25.0),
        },
    });
    j.target = Some(crate::twin::predict::replicas(100.0, &p));
    j.knee = Some(p);
    let text = knee_text(&j);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "PREDICTED knee: 20.0 req/s (interval 18.0–22.0) — a virtual-time simulation of the engine model, not a measurement"
    );
    assert_eq!(
        lines[1],
        "  for p99_ttft_ms<=500; 1024 in / 128 out tokens, Poisson arrivals"
    );
    assert!(
        lines[2].contains("engine preset tiny: max-num-seqs 32")
            && lines[2].contains("seeds' spread")
    );
    assert_eq!(lines[3], "  binds: batch slots full: because");
    assert_eq!(
        lines[4],
        "  what moves it: max_num_seqs 32: at 24 (−25%) 15.0 req/s, at 40 (+25%) 25.0 req/s"
    );
    assert_eq!(
        lines[5],
        "  replicas for 100 req/s within the SLO: 5 (5–6 over the interval)"
    );
    assert!(lines[6].starts_with("  computed in 3.2 CPU s (1.5 s wall): 3 seed(s) × 1000 requests per run, 40 virtual-time runs"), "{}", lines[6]);
}

#[test]
fn the_grid_text_is_one_table_per_prefix_share_with_refused_shapes_below() {
    let mut j = header();
    let cell = |i, o, share, knee: Option<f64>| GridCell {
        input_len: i,
        output_len: o,
        prefix_share: share,
        prediction: knee.map(|k| prediction(k, Binding::PrefillCompute)),
        error: knee.is_none().then(|| "too long".to_string()),
        replicas: None,
    };
    j.grid = Some(vec![
        cell(256, 64, 0.0, Some(41.25)),
        cell(256, 256, 0.0, Some(20.0)),
        cell(4096, 64, 0.0, Some(3.0)),
        cell(4096, 256, 0.0, None),
        cell(256, 64, 0.5, Some(50.0)),
        cell(256, 256, 0.5, Some(25.0)),
        cell(4096, 64, 0.5, Some(6.0)),
        cell(4096, 256, 0.5, Some(5.0)),
    ]);
    let text = grid_text(&j);
    assert!(text.starts_with("PREDICTED knee (req/s, [interval] binding) over the grid"));
    assert!(text.contains("for p99_ttft_ms<=500; lengths per cell, Poisson arrivals"));
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .collect();
    assert_eq!(rows.len(), 5, "{text}");
    assert!(
        rows[0].trim_start().starts_with("256") && rows[0].contains("41.2 [37.1–45.4] prefill"),
        "{}",
        rows[0]
    );
    assert!(
        rows[1].contains("3.0 [2.7–3.3] prefill") && rows[1].contains("refused"),
        "{}",
        rows[1]
    );
    assert!(text.contains("  prefix share 50%:"));
    assert!(text.contains("4096 in / 256 out, prefix 0%: too long"));
}
