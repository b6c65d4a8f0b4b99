//! Golden tests of the result JSON, against the built-in simulator: a seeded
//! `kneecap run`, a seeded `kneecap sweep --rates`, and three `kneecap run
//! --shard i/3` processes plus `kneecap merge` of their files. The shards
//! share one simulator, a `kneecap sim --preset tiny --port 0` child process
//! (not the tests/common TestServer), so every case measures the same `tiny`
//! simulator; run and sweep start it in-process.
//!
//! Each document is normalized to three ordered maps, stored as
//! `tests/golden/<case>.json`:
//! - `types`: every path of the JSON tree, in key order, with its type (null,
//!   bool, int, float, string, array, object; int vs float as serde_json
//!   stores the number). Array elements share one path segment `*`; a path
//!   whose elements differ in type lists the union, e.g. `null|string`.
//! - `exact`: values that must not change at all: everything the seed and the
//!   flags determine (the request schedule `kneecap.due_times`, `input_lens`,
//!   `output_lens`, counts, seed, rates, labels, step windows, verdicts…).
//!   This is the default class of a path. Keys are concrete paths; an array
//!   of scalars (or of arrays of scalars) is one entry.
//! - `timing`: reference latencies, durations and throughputs, compared
//!   within a band (see [`band`]).
//!
//! Paths whose values legitimately vary run to run are compared by type only
//! and are listed in [`RULES`] as `TypeOnly` (or `Opaque` when even their
//! shape may change, `Present` when even their type may: null when a sampled
//! gauge has no reading). `KNEECAP_BLESS=1 cargo test --test golden_json`
//! rewrites the goldens; without it the tests compare, and on a difference
//! write the run's normalized form under `target/tmp/golden-actual/` to diff.

use assert_cmd::Command;
use serde_json::{Map, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The cases measure timing: run them one at a time so that they do not load
/// the two cores for each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn kneecap() -> Command {
    let mut c = Command::cargo_bin("kneecap").unwrap();
    c.timeout(Duration::from_secs(60));
    c.env_remove("OPENAI_API_KEY");
    c
}

fn blessing() -> bool {
    std::env::var_os("KNEECAP_BLESS").is_some_and(|v| v == "1")
}

/// The seeded workload shared by the run case and the shards (same flags, so
/// the shards' schedules must add up to the run's). 40 Poisson arrivals at 20
/// req/s: about 2 s of load; lengths vary (range ratio 0.5) so that the
/// seed shows in `input_lens` and `output_lens`.
const WORKLOAD: &[&str] = &[
    "--seed",
    "7",
    "--num-prompts",
    "40",
    "--request-rate",
    "20",
    "--random-input-len",
    "64",
    "--random-output-len",
    "8",
    "--random-range-ratio",
    "0.5",
    "--percentile-metrics",
    "ttft,tpot,itl,e2el",
    "--metric-percentiles",
    "50,90,99",
    "--save-result",
    "--save-detailed",
    "--disable-tqdm",
];

// ---------------------------------------------------------------- classes

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
    let class = rule(pattern).unwrap_or(inherited);
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

fn normalize(doc: &Value) -> Norm {
    let mut n = Norm::default();
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

fn compare_ordered(what: &str, want: &Value, got: &Map<String, Value>, errs: &mut Vec<String>) {
    let want = want
        .as_object()
        .unwrap_or_else(|| panic!("golden {what} is not an object"));
    let wk: Vec<&String> = want.keys().collect();
    let gk: Vec<&String> = got.keys().collect();
    if wk != gk {
        for k in &wk {
            if !got.contains_key(*k) {
                errs.push(format!("{what}: path {k} is gone"));
            }
        }
        for k in &gk {
            if !want.contains_key(*k) {
                errs.push(format!("{what}: new path {k}"));
            }
        }
        if let Some((i, (w, g))) = wk.iter().zip(&gk).enumerate().find(|(_, (w, g))| w != g) {
            errs.push(format!(
                "{what}: order differs at entry {i}: golden {w}, now {g}"
            ));
        }
    }
    for (k, w) in want {
        if let Some(g) = got.get(k) {
            if what != "timing" && w != g {
                let (w, g) = (short(w), short(g));
                errs.push(format!("{what} {k}: golden {w}, now {g}"));
            }
        }
    }
}

/// The numbers of a (nested) array, or `None` when its shape is not `want`'s.
fn same_shape_numbers(want: &Value, got: &Value, out: &mut Vec<(f64, f64)>) -> bool {
    match (want, got) {
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(w, g)| same_shape_numbers(w, g, out))
        }
        (Value::Number(w), Value::Number(g)) => {
            out.push((w.as_f64().unwrap(), g.as_f64().unwrap()));
            true
        }
        _ => false,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Why a timing value is outside its band (see [`band`]), if it is.
fn timing_error(want: &Value, got: &Value, unit: Unit, kind: Kind) -> Option<String> {
    match (want, got) {
        (Value::Number(w), Value::Number(g)) => {
            let (w, g) = (w.as_f64().unwrap(), g.as_f64().unwrap());
            let (lo, hi) = band(w, unit, kind);
            (!(g >= lo && g <= hi)).then(|| format!("outside [{lo}, {hi}]"))
        }
        (Value::Array(_), Value::Array(_)) => {
            let mut pairs = Vec::new();
            if !same_shape_numbers(want, got, &mut pairs) {
                return Some("the per-request array changed shape".into());
            }
            if let Some((i, (w, g))) = pairs
                .iter()
                .enumerate()
                .find(|(_, (w, g))| !(*g >= 0.0 && *g <= w * 10.0 + 1000.0 * ms(unit)))
            {
                return Some(format!("element {i} (flattened) is {g}, golden {w}"));
            }
            if pairs.is_empty() {
                return None;
            }
            let wm = median(pairs.iter().map(|p| p.0).collect());
            let gm = median(pairs.iter().map(|p| p.1).collect());
            let (lo, hi) = band(wm, unit, Central);
            (!(gm >= lo && gm <= hi))
                .then(|| format!("median {gm} outside [{lo}, {hi}] (golden median {wm})"))
        }
        (w, g) => (w != g).then(|| "differs".into()),
    }
}

/// Every difference between a golden (`want`, as stored) and a document.
fn differences(want: &Value, got: &Norm) -> Vec<String> {
    let mut errs = Vec::new();
    compare_ordered("types", &want["types"], &got.types, &mut errs);
    compare_ordered("exact", &want["exact"], &got.exact, &mut errs);
    compare_ordered("timing", &want["timing"], &got.timing, &mut errs);
    for (path, unit, kind) in &got.units {
        let (Some(w), Some(g)) = (want["timing"].get(path), got.timing.get(path)) else {
            continue;
        };
        if let Some(why) = timing_error(w, g, *unit, *kind) {
            let (w, g) = (short(w), short(g));
            errs.push(format!(
                "timing {path} ({unit:?}, {kind:?}): {why}: golden {w}, now {g}"
            ));
        }
    }
    errs
}

// ---------------------------------------------------------------- goldens

fn golden_path(case: &str) -> PathBuf {
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
fn check_golden(case: &str, about: &str, args: &[String], docs: &[(&str, &Value)]) {
    let norms: Vec<(&str, Norm)> = docs.iter().map(|(k, d)| (*k, normalize(d))).collect();
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

// ---------------------------------------------------------------- invariants

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|x| match x {
            Value::Array(a) => a.iter().map(|y| y.as_f64().unwrap()).collect(),
            y => vec![y.as_f64().unwrap()],
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// A detailed run result agrees with itself: the stats keys come from the
/// per-request arrays they summarize (a mis-wired key fails here whatever
/// the machine's load).
fn check_run_invariants(name: &str, d: &Value) {
    let sum = |k: &str| f64s(&d[k]).iter().sum::<f64>();
    assert_eq!(
        sum("input_lens"),
        d["total_input_tokens"].as_f64().unwrap(),
        "{name}"
    );
    assert_eq!(
        sum("output_lens"),
        d["total_output_tokens"].as_f64().unwrap(),
        "{name}"
    );
    for (array, stat) in [
        ("ttfts", "mean_ttft_ms"),
        ("itls", "mean_itl_ms"),
        ("latencies", "mean_e2el_ms"),
    ] {
        let from_array = mean(&f64s(&d[array])) * 1e3;
        let stated = d[stat].as_f64().unwrap();
        assert!(
            close(from_array, stated),
            "{name}: {stat} {stated} vs mean of {array} {from_array}"
        );
    }
    assert_eq!(d["kneecap"]["e2el"]["mean_ms"], d["mean_e2el_ms"], "{name}");
    let duration = d["duration"].as_f64().unwrap();
    let completed = d["completed"].as_f64().unwrap();
    assert!(
        close(
            d["request_throughput"].as_f64().unwrap(),
            completed / duration
        ),
        "{name}"
    );
    let out_tokens = d["total_output_tokens"].as_f64().unwrap();
    assert!(
        close(
            d["output_throughput"].as_f64().unwrap(),
            out_tokens / duration
        ),
        "{name}"
    );
}

// ---------------------------------------------------------------- helpers

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn assert_ok(what: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{what} exited {:?}:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One `kneecap sim` child process on 127.0.0.1 with a free port, killed on drop.
struct Sim {
    child: Child,
    url: String,
}

impl Sim {
    fn start() -> Sim {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kneecap"))
            .args([
                "sim",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--preset",
                "tiny",
            ])
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads every line, so the simulator never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut sim = Sim {
            child,
            url: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while sim.url.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("`kneecap sim --port 0` printed no address");
            if let Some(at) = line.find("http://127.0.0.1:") {
                let url = line[at..].split_whitespace().next().unwrap();
                sim.url = url.to_string();
            }
        }
        sim
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn a_seeded_run_writes_the_golden_json() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut args = strings(&["run", "--sim-preset", "tiny"]);
    args.extend(strings(WORKLOAD));
    args.extend(strings(&["--result-filename", "x.json"]));
    let mut cmd_args = args.clone();
    cmd_args.extend(strings(&["--result-dir", dir.path().to_str().unwrap()]));
    let out = kneecap().args(&cmd_args).output().unwrap();
    assert_ok("kneecap run", &out);
    let doc = read_json(&dir.path().join("x.json"));
    check_run_invariants("run", &doc);
    check_golden(
        "run",
        "kneecap run against the built-in simulator (tiny), seed 7, 40 requests at 20 req/s",
        &args,
        &[("result", &doc)],
    );
}

#[test]
fn a_seeded_two_rate_sweep_writes_the_golden_json() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let args = strings(&[
        "sweep",
        "--sim-preset",
        "tiny",
        "--seed",
        "7",
        "--random-input-len",
        "64",
        "--random-output-len",
        "8",
        "--random-range-ratio",
        "0.5",
        "--rates",
        "10,20",
        "--slo",
        "p99_ttft_ms<=1000",
        "--step-duration",
        "1s",
        "--step-warmup",
        "0.5s",
        "--step-min-requests",
        "10",
        "--step-drain",
        "5s",
        // The verdicts are pinned: a busy machine's dispatch lateness must
        // not turn a step into a "generator-limited" one.
        "--max-lateness-ms",
        "1000",
        "--disable-tqdm",
    ]);
    let path = dir.path().join("sweep.json");
    let mut cmd_args = args.clone();
    cmd_args.extend(strings(&["-o", path.to_str().unwrap()]));
    let out = kneecap().args(&cmd_args).output().unwrap();
    assert_ok("kneecap sweep", &out);
    let doc = read_json(&path);
    // The SLO is judged on the step's own p99 TTFT.
    for step in doc["steps"].as_array().unwrap() {
        assert_eq!(
            step["slo_outcomes"][0]["observed_ms"], step["ttft_ms"]["p99"],
            "{step}"
        );
    }
    check_golden(
        "sweep",
        "kneecap sweep --rates 10,20 against the built-in simulator (tiny), seed 7, 1 s steps",
        &args,
        &[("sweep", &doc)],
    );
}

#[test]
fn three_shards_and_their_merge_write_the_golden_json() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start();
    let start_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2;
    // The shard's own flags; --base-url and --start-at vary and are left out
    // of the pinned command line.
    let shard_args = |i: usize| -> Vec<String> {
        let mut a = strings(&["run"]);
        a.extend(strings(WORKLOAD));
        a.extend([
            "--shard".to_string(),
            format!("{i}/3"),
            "--result-filename".into(),
            format!("shard-{i}.json"),
        ]);
        a
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let mut a = shard_args(i);
                a.extend([
                    "--base-url".to_string(),
                    sim.url.clone(),
                    "--start-at".into(),
                    start_at.to_string(),
                    "--result-dir".into(),
                    dir.path().display().to_string(),
                ]);
                s.spawn(move || kneecap().args(a).output().unwrap())
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_ok(&format!("shard {i}/3"), &h.join().unwrap());
        }
    });
    drop(sim);
    let merge_args = strings(&[
        "merge",
        "shard-0.json",
        "shard-1.json",
        "shard-2.json",
        "-o",
        "merged.json",
    ]);
    let out = kneecap()
        .current_dir(dir.path())
        .args(&merge_args)
        .output()
        .unwrap();
    assert_ok("kneecap merge", &out);
    let shards: Vec<Value> = (0..3)
        .map(|i| read_json(&dir.path().join(format!("shard-{i}.json"))))
        .collect();
    let merged = read_json(&dir.path().join("merged.json"));
    for (i, s) in shards.iter().enumerate() {
        check_run_invariants(&format!("shard {i}"), s);
    }
    let total = |k: &str| shards.iter().map(|s| s[k].as_u64().unwrap()).sum::<u64>();
    for k in ["completed", "total_input_tokens", "total_output_tokens"] {
        assert_eq!(merged[k].as_u64().unwrap(), total(k), "{k}");
    }
    // The shards split the single run's seeded schedule between them.
    let run_golden = golden_path("run");
    if !blessing() && run_golden.exists() {
        let mut union: Vec<f64> = shards
            .iter()
            .flat_map(|s| f64s(&s["kneecap"]["due_times"]))
            .collect();
        union.sort_by(f64::total_cmp);
        let run = read_json(&run_golden);
        let mut single = f64s(&run["result"]["exact"]["/kneecap/due_times"]);
        single.sort_by(f64::total_cmp);
        assert_eq!(union, single, "shards' due times vs the run golden's");
    }
    let mut args: Vec<String> = Vec::new();
    for i in 0..3 {
        args.extend(shard_args(i));
        args.push(";".into());
    }
    args.extend(merge_args);
    check_golden(
        "merge",
        "3 x kneecap run --shard i/3 (same workload as the run golden) against one `kneecap sim --preset tiny`, then kneecap merge",
        &args,
        &[
            ("shard-0", &shards[0]),
            ("shard-1", &shards[1]),
            ("shard-2", &shards[2]),
            ("merged", &merged),
        ],
    );
}
