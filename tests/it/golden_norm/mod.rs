//! The normal form of a result JSON for the golden tests (tests/golden_json.rs):
//! path classes ([`RULES`]), the tolerance bands of timing values ([`band`]),
//! the walk that turns a document into ordered `types` / `exact` / `timing`
//! maps, and [`check_golden`], which blesses or compares one case.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// `KNEECAP_BLESS=1`: rewrite the goldens instead of comparing.
pub fn blessing() -> bool {
    std::env::var_os("KNEECAP_BLESS").is_some_and(|v| v == "1")
}

/// How a path of the JSON is compared with the golden.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Class {
    /// The value equals the golden's (the default).
    Exact,
    /// A latency, duration, throughput or load-dependent count: within
    /// [`band`] of the golden's, in this unit.
    Timing(Unit, Kind),
    /// Type only; the subtree is still walked for its types.
    TypeOnly,
    /// Type of this node only: its contents may legitimately change shape
    /// (lists that a loaded machine may fill).
    Opaque,
    /// The key is pinned (present, in order), its type and value are not:
    /// `null` or a value depending on the machine's timing.
    Present,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Ms,
    S,
    Us,
    /// Rates, ratios and counts: no absolute slack.
    Plain,
}

/// Which statistic a timing value is, for [`band`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A mean, median, p50/p90, duration, throughput, or a per-request array.
    Central,
    /// A p99, p99.9 or max of a few dozen samples: one stall moves it.
    Tail,
    /// A standard deviation: jitter, with no floor (one stall in the golden
    /// run makes it large, a quiet run makes it tiny).
    Spread,
}

use Class::{Exact, Opaque, Present, Timing, TypeOnly};
use Kind::{Central, Spread, Tail};
use Unit::{Ms, Plain, Us, S};

/// Explicit classes, first match wins; a path without a rule inherits its
/// parent's class, and the root is `Exact`. A `*` matches any part of one
/// segment (array elements are the segment `*`).
const RULES: &[(&str, Class)] = &[
    // Counts of a distribution are fixed by the seed (no request fails).
    ("/kneecap/*/count", Exact),
    ("/steps/*/*_ms/count", Exact),
    // Wall clock, addresses and versions.
    ("/date", TypeOnly),
    ("/started_at", TypeOnly),
    ("/kneecap_version", TypeOnly),
    ("/kneecap/version", TypeOnly),
    ("/kneecap/started_at", TypeOnly),
    ("/kneecap/target", TypeOnly),
    ("/workload/target", TypeOnly),
    ("/kneecap/shard/start_at", TypeOnly),
    ("/kneecap/shard/start_at_unix_ns", TypeOnly),
    ("/kneecap/shard/window_start_unix_s", TypeOnly),
    ("/kneecap/shard/window_end_unix_s", TypeOnly),
    ("/kneecap/merged/start_at", TypeOnly),
    ("/kneecap/merged/window_start_unix_s", TypeOnly),
    ("/kneecap/merged/window_end_unix_s", TypeOnly),
    // The generator's own noise: dispatch lateness, client queue time, CPU,
    // runtime lag, start lateness. Sub-millisecond and at the mercy of the
    // machine; no reference value is meaningful.
    ("/queue_times", TypeOnly),
    ("/kneecap/dispatch_lateness/*_ms", TypeOnly),
    ("/kneecap/generator/limited", TypeOnly),
    ("/kneecap/generator/reasons", Opaque),
    ("/kneecap/generator/warnings", Opaque),
    ("/kneecap/generator/lateness_p99_ms", TypeOnly),
    ("/kneecap/generator/cpu_busy_fraction", TypeOnly),
    ("/kneecap/generator/runtime_lag_p99_ms", TypeOnly),
    // Receive stamps: the kernel's where the platform gives them (the source
    // and counts may differ off Linux), and the client's own scheduling delay.
    (
        "/kneecap/generator/client_scheduling_delay_p99_ms",
        TypeOnly,
    ),
    ("/kneecap/rx_timestamps", TypeOnly),
    ("/kneecap/first_token_delays", Opaque),
    ("/steps/*/generator/scheduling_delay_p99_ms", TypeOnly),
    ("/kneecap/shard/start_lateness_ms", TypeOnly),
    ("/kneecap/shard/generator_limited", TypeOnly),
    ("/kneecap/merged/start_lateness_ms", TypeOnly),
    (
        "/kneecap/shard/histograms/dispatch_lateness/sum_us",
        TypeOnly,
    ),
    (
        "/kneecap/shard/histograms/client_queue_time/sum_us",
        TypeOnly,
    ),
    ("/steps/*/lateness_ms/*", TypeOnly),
    ("/steps/*/generator/lateness_*", TypeOnly),
    ("/steps/*/generator/cpu_busy_fraction", TypeOnly),
    ("/steps/*/generator/event_loop_lag_p99_ms", TypeOnly),
    // A step's warnings also carry generator CPU warnings on a busy machine;
    // the SLO warnings are pinned exactly in `slo_outcomes`.
    ("/steps/*/warnings", Opaque),
    // Serialized latency histograms (and their u128 sums of squares, strings).
    (
        "/kneecap/shard/histograms/*/hdr_v2_deflate_base64",
        TypeOnly,
    ),
    ("/kneecap/shard/histograms/*/sum_sq_us2", TypeOnly),
    // Steady-state evidence that depends on where completions fall relative
    // to the window edges.
    ("/steps/*/steady/littles_gap", TypeOnly),
    ("/steps/*/steady/in_flight_slope_per_s", TypeOnly),
    ("/steps/*/steady/backlog_at_end", TypeOnly),
    // The scraped /metrics gauges: sampled every 250 ms with skipped ticks
    // and a back-off after misses, so how many samples land in a 1 s window
    // varies, and with none the source and the means are null.
    ("/steps/*/queue_source", Present),
    // A step's prefix-cache counts: what a later step finds cached depends
    // on what the earlier ones left (exact against the sim's trace in
    // tests/sim_sweep_cache.rs).
    ("/steps/*/prefix_cache/queried_tokens", TypeOnly),
    ("/steps/*/prefix_cache/hit_tokens", TypeOnly),
    ("/steps/*/prefix_cache/hit_rate", TypeOnly),
    ("/steps/*/queue", Opaque),
    ("/steps/*/mean_waiting", Present),
    ("/steps/*/max_waiting", Present),
    ("/steps/*/mean_running", Present),
    // Latencies in ms (vLLM's stats keys and kneecap's distributions).
    ("/std_*_ms", Timing(Ms, Spread)),
    ("/kneecap/*/std_ms", Timing(Ms, Spread)),
    ("/p99_*_ms", Timing(Ms, Tail)),
    ("/kneecap/*/p99*_ms", Timing(Ms, Tail)),
    ("/kneecap/*/max_ms", Timing(Ms, Tail)),
    ("/steps/*/*_ms/p99*", Timing(Ms, Tail)),
    ("/steps/*/*_ms/max", Timing(Ms, Tail)),
    ("/steps/*/slo_outcomes/*/observed_ms", Timing(Ms, Tail)),
    ("/*_ms", Timing(Ms, Central)),
    ("/kneecap/ttft_from_due", Timing(Ms, Central)),
    ("/kneecap/e2el_from_due", Timing(Ms, Central)),
    ("/kneecap/e2el", Timing(Ms, Central)),
    ("/steps/*/*_ms", Timing(Ms, Central)),
    ("/kneecap/shard/histograms/*/sum_us", Timing(Us, Central)),
    // Per-request times and durations in seconds.
    ("/duration", Timing(S, Central)),
    ("/ttfts", Timing(S, Central)),
    ("/itls", Timing(S, Central)),
    ("/start_times", Timing(S, Central)),
    ("/latencies", Timing(S, Central)),
    ("/steps/*/steady/mean_time_in_system_s", Timing(S, Central)),
    // Throughputs, peaks and load-dependent ratios.
    ("/request_throughput", Timing(Plain, Central)),
    ("/output_throughput", Timing(Plain, Central)),
    ("/total_token_throughput", Timing(Plain, Central)),
    ("/max_output_tokens_per_s", Timing(Plain, Central)),
    ("/max_concurrent_requests", Timing(Plain, Central)),
    (
        "/kneecap/shard/counters/max_output_tokens_per_s",
        Timing(Plain, Central),
    ),
    (
        "/kneecap/shard/counters/max_concurrent_requests",
        Timing(Plain, Central),
    ),
    ("/steps/*/achieved_rate", Timing(Plain, Central)),
    ("/steps/*/steady/throughput_ratio", Timing(Plain, Central)),
    ("/steps/*/steady/mean_in_flight", Timing(Plain, Central)),
];

/// `*` in `pat` matches any run of characters (including none).
fn glob(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, tail)) => {
            let Some(rest) = s.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| glob(tail, &rest[i..]))
        }
    }
}

fn rule(pattern: &str) -> Option<Class> {
    let segs: Vec<&str> = pattern.split('/').collect();
    RULES.iter().find_map(|(p, class)| {
        let ps: Vec<&str> = p.split('/').collect();
        (ps.len() == segs.len() && ps.iter().zip(&segs).all(|(p, s)| glob(p, s))).then_some(*class)
    })
}

/// The band a timing value must fall in: `want/8 − 0.25 ms ≤ got ≤ 10·want +
/// 250 ms`, the slack expressed in the field's unit (none for rates and
/// counts). Tails (p99, p99.9, max) get 1 s of upper slack; standard
/// deviations too, and no lower bound but 0. A per-request array (`ttfts`,
/// `itls`…) keeps the golden's shape exactly, its median is within the band
/// of the golden's median, and each element is within `0 ≤ got ≤ 10·want +
/// 1 s`: one stalled request must not fail the test, and a stalled stream
/// delivers several tokens at once (an ITL near zero).
///
/// Why: the simulator's service times are fixed by its preset (TTFT ≈ 7 ms,
/// ITL ≈ 5 ms, E2EL ≈ 45 ms here), so they cannot shrink much, while a loaded
/// 2-core CI machine inflates them, and a single scheduling stall of a few
/// hundred ms lands in a p99 or a max of 40 samples: the upper side is
/// generous (×10 + 250 ms) and the lower side tighter (÷8, room for a tail
/// value that a hiccup inflated in the golden run). A switch from ms to s
/// (÷1000) or to µs (×1000) fails either way (e.g. mean TTFT 8 ms read as
/// 0.008 or 8000), as does wiring a value from a field an order of magnitude
/// away; the invariant checks below catch the subtler mis-wirings (a stats
/// key computed from the wrong array).
fn band(want: f64, unit: Unit, kind: Kind) -> (f64, f64) {
    let lo = if kind == Spread {
        0.0
    } else {
        want / 8.0 - 0.25 * ms(unit)
    };
    let slack = if kind == Central { 250.0 } else { 1000.0 };
    (lo, want * 10.0 + slack * ms(unit))
}

/// One millisecond in `unit` (0 for rates and counts: no absolute slack).
fn ms(unit: Unit) -> f64 {
    match unit {
        Ms => 1.0,
        S => 1e-3,
        Us => 1e3,
        Plain => 0.0,
    }
}

// ---------------------------------------------------------------- normalize

#[derive(Default)]
struct Norm {
    types: Map<String, Value>,
    exact: Map<String, Value>,
    timing: Map<String, Value>,
    /// The unit and kind of each `timing` entry (not stored in the golden).
    units: Vec<(String, Unit, Kind)>,
    /// This case's own `TypeOnly` patterns, matched before [`RULES`].
    type_only: &'static [&'static str],
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn note_type(types: &mut Map<String, Value>, pattern: &str, t: &str) {
    match types.get_mut(pattern) {
        None => {
            types.insert(pattern.to_string(), Value::from(t));
        }
        Some(Value::String(s)) => {
            let mut set: Vec<&str> = s.split('|').collect();
            if !set.contains(&t) {
                set.push(t);
                set.sort_unstable();
                let joined = set.join("|");
                *s = joined;
            }
        }
        Some(other) => panic!("types entry {pattern} is {other}"),
    }
}

fn holds_object(v: &Value) -> bool {
    match v {
        Value::Object(_) => true,
        Value::Array(a) => a.iter().any(holds_object),
        _ => false,
    }
}

/// Walk `v` at concrete `path` (pattern `pattern`); `record` is false inside
/// an array already recorded whole.
fn walk(v: &Value, path: &str, pattern: &str, inherited: Class, record: bool, n: &mut Norm) {
    note_type(&mut n.types, pattern, type_name(v));
    let case_rule = n.type_only.iter().any(|p| glob(p, pattern));
    let class = match case_rule {
        true => TypeOnly,
        false => rule(pattern).unwrap_or(inherited),
    };
    if class == Present {
        n.types.insert(pattern.to_string(), Value::from("any"));
        return;
    }
    if class == Opaque {
        return;
    }
    let leaf = match v {
        Value::Object(m) => {
            for (k, x) in m {
                let (p, q) = (format!("{path}/{k}"), format!("{pattern}/{k}"));
                walk(x, &p, &q, class, record, n);
            }
            false
        }
        Value::Array(a) => {
            // Arrays of scalars (or of arrays of scalars) are one value.
            let whole = !holds_object(v);
            for (i, x) in a.iter().enumerate() {
                let p = format!("{path}/{i}");
                walk(x, &p, &format!("{pattern}/*"), class, record && !whole, n);
            }
            whole
        }
        _ => true,
    };
    if leaf && record {
        match class {
            Exact => {
                n.exact.insert(path.to_string(), v.clone());
            }
            Timing(unit, kind) => {
                n.timing.insert(path.to_string(), v.clone());
                n.units.push((path.to_string(), unit, kind));
            }
            TypeOnly | Opaque | Present => {}
        }
    }
}

fn normalize(doc: &Value, type_only: &'static [&'static str]) -> Norm {
    let mut n = Norm {
        type_only,
        ..Norm::default()
    };
    walk(doc, "", "", Exact, true, &mut n);
    n
}

fn norm_json(n: &Norm) -> Value {
    let mut m = Map::new();
    m.insert("types".into(), Value::Object(n.types.clone()));
    m.insert("exact".into(), Value::Object(n.exact.clone()));
    m.insert("timing".into(), Value::Object(n.timing.clone()));
    Value::Object(m)
}

// ---------------------------------------------------------------- compare

/// `v` as JSON, cut to 300 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

mod compare;
use compare::differences;

pub fn golden_path(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{case}.json"))
}

/// JSON with objects laid out one entry per line down to `levels` deep and
/// everything deeper on one line: one path per line, readable in a diff.
fn layout(v: &Value, levels: usize, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if levels > 0 && !m.is_empty() => {
            out.push_str("{\n");
            for (i, (k, x)) in m.iter().enumerate() {
                out.push_str(&"  ".repeat(indent + 1));
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push_str(": ");
                layout(x, levels - 1, indent + 1, out);
                out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
            }
            out.push_str(&"  ".repeat(indent));
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// Bless or compare one case: `docs` are (name, document) pairs; `args` is
/// the command line (without temporary paths), pinned too.
pub fn check_golden(case: &str, about: &str, args: &[String], docs: &[(&str, &Value)]) {
    check_golden_but(case, about, args, docs, &[]);
}

/// [`check_golden`] with paths of this case's documents pinned by type only
/// (whole paths, `*` as in [`RULES`]), on top of [`RULES`].
pub fn check_golden_but(
    case: &str,
    about: &str,
    args: &[String],
    docs: &[(&str, &Value)],
    type_only: &'static [&'static str],
) {
    let norms: Vec<(&str, Norm)> = docs
        .iter()
        .map(|(k, d)| (*k, normalize(d, type_only)))
        .collect();
    let mut g = Map::new();
    g.insert("about".into(), Value::from(about));
    g.insert("args".into(), Value::from(args.to_vec()));
    for (k, n) in &norms {
        g.insert(k.to_string(), norm_json(n));
    }
    let mut actual = String::new();
    layout(&Value::Object(g), 3, 0, &mut actual);
    actual.push('\n');
    let path = golden_path(case);
    if blessing() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        eprintln!("blessed {}", path.display());
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with KNEECAP_BLESS=1 cargo test --test golden_json",
            path.display()
        )
    });
    let golden: Value = serde_json::from_str(&text).unwrap();
    let mut errs = Vec::new();
    if golden["args"] != Value::from(args.to_vec()) {
        errs.push(format!(
            "args: golden {}, now {:?} (re-bless after changing the command)",
            golden["args"], args
        ));
    }
    for (k, n) in &norms {
        errs.extend(
            differences(&golden[*k], n)
                .into_iter()
                .map(|e| format!("{k}: {e}")),
        );
    }
    if errs.is_empty() {
        return;
    }
    let dump = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("golden-actual")
        .join(format!("{case}.json"));
    std::fs::create_dir_all(dump.parent().unwrap()).unwrap();
    std::fs::write(&dump, actual).unwrap();
    let shown: Vec<&str> = errs.iter().take(60).map(|s| s.as_str()).collect();
    panic!(
        "{case} differs from {} in {} place(s); this run's normalized form is in {} \
         (KNEECAP_BLESS=1 rewrites the golden if the change is intended):\n{}",
        path.display(),
        errs.len(),
        dump.display(),
        shown.join("\n")
    );
}
