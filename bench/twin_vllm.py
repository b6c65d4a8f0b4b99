#!/usr/bin/env python3
"""The twin's held-out accuracy on the real vLLM engine (issue 38, BLIS form).

For each server configuration: start vLLM on CPU (scripts/vllm-server.sh,
dev mode), profile it once (`kneecap profile --budget PROFILE_S`), then for
each workload shape, none of them used by the profile's probes:
  1. predict the knee (`kneecap predict --profile`, SLO p99_ttft_ms<=2000);
  2. measure it: one-step sweeps (`kneecap sweep --rates R`, the prefix cache
     reset before each, fresh prompts per step) starting at the predicted
     knee, going up or down by x1.5 until a pass and a fail bracket it, then
     halving the bracket (in log) until it is at most 20% wide;
  3. measure two loads below the knee, 0.6 and 0.8 of the highest passing
     load, predict the latency there (`predict --at-rates`) and set it
     beside the measured step: TTFT p50, TTFT p99, E2E mean, with the
     absolute percentage error. (Until 2026-12-07 the two loads were the
     two highest passing ones, right under the knee, where a TTFT p99 moves
     several-fold for a few percent of load; their errors are still
     printed, as a second line.)
The verdict of a step is the sweep's own (SLO and steady state).

usage: bench/twin_vllm.py OUT_DIR [CONFIG...]   (configs: default, small)
       bench/twin_vllm.py --table OUT_DIR/results.json   (the table again)
       bench/twin_vllm.py --repredict OUT_DIR [PROFILE_DIR]   (the same
         measured steps, predicted again from PROFILE_DIR/profile-CONFIG.json)
env:   KNEECAP (default target/release/kneecap), PROFILE_S (120),
       STEP_S (40: measured seconds per step), SHAPES (all; e.g. 128/32,512/16),
       PREDICT_FLAGS (more `kneecap predict` flags, e.g. --draw-stalls)
Writes OUT_DIR/results.json and prints the table as Markdown.
"""
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K = os.environ.get("KNEECAP", os.path.join(ROOT, "target/release/kneecap"))
PROFILE_S = os.environ.get("PROFILE_S", "120")
STEP_S = os.environ.get("STEP_S", "40")
PREDICT_FLAGS = os.environ.get("PREDICT_FLAGS", "").split()
SLO = "p99_ttft_ms<=2000"
CONFIGS = {
    "default": [],
    "small": ["--max-num-seqs", "8", "--max-num-batched-tokens", "256"],
}
# name: (own prompt tokens, output tokens, shared prefix tokens)
SHAPES = {
    "128/32": (128, 32, 0),
    "512/16": (512, 16, 0),
    "32/256": (32, 256, 0),
    "1024/64": (1024, 64, 0),
    "256/64 80% shared": (51, 64, 205),
}
WIDTH = 1.2  # bracket: first fail / last pass
MAX_STEPS = 9
FRACTIONS = (0.6, 0.8)  # the latency loads, of the highest passing load
ERRS = (("ttft_ms", "p50", "ttft_p50"), ("ttft_ms", "p99", "ttft_p99"), ("e2el_ms", "mean", "e2e_mean"))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def start_server(flags):
    out = subprocess.run(
        [os.path.join(ROOT, "scripts/vllm-server.sh"), "start", "--dev-mode", *flags],
        capture_output=True, text=True, check=True,
    ).stdout
    kv = dict(l.split("=", 1) for l in out.split() if "=" in l)
    return kv["URL"], int(kv["PID"])


def shape_flags(shape):
    own, out, prefix = SHAPES[shape]
    flags = ["--random-input-len", str(own), "--random-output-len", str(out)]
    return flags + (["--random-prefix-len", str(prefix)] if prefix else [])


def predict(profile, shape, rates=None):
    out = profile + ".predict.json"
    cmd = [K, "predict", "--profile", profile, "--slo", SLO, *shape_flags(shape), *PREDICT_FLAGS, "-o", out]
    if rates:
        cmd += ["--at-rates", ",".join(f"{r:.4g}" for r in rates)]
    t = time.time()
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    j = json.load(open(out))
    j["_wall_s"] = time.time() - t
    return j


def step(url, shape, rate, seed, out_dir, e2e_s):
    """One measured step. A request's time in the system sets the warm-up
    (the in-flight count needs about that long to reach its level: with a
    3 s warm-up and 18 s requests the window's finishes fall short of its
    arrivals, which the sweep reads as not steady), the window and the
    drain (a request cut by the drain counts as failed)."""
    path = os.path.join(out_dir, f"step-{seed}.json")
    warm = max(3.0, 1.5 * e2e_s)
    length = max(float(STEP_S), 3.0 * e2e_s)
    cmd = [
        K, "sweep", "--base-url", url, "--rates", f"{rate:.4g}", "--slo", SLO,
        *shape_flags(shape), "--reset-prefix-cache", "--seed", str(seed),
        "--step-warmup", f"{warm:.0f}s", "--step-duration", f"{length:.0f}s",
        "--step-min-requests", "150", "--step-max-duration", f"{warm + length + 60:.0f}s",
        "--step-drain", f"{max(30.0, 3.0 * e2e_s):.0f}s",
        "--max-lateness-ms", "50", "--ui", "none", "-o", path,
    ]
    subprocess.run(cmd, capture_output=True, text=True)
    s = json.load(open(path))["steps"][0]
    return {
        "rate": rate,
        "verdict": s["verdict"],
        "reasons": s.get("reasons", []),
        "requests": s["n_requests"],
        "ttft_p50": s["ttft_ms"]["p50"],
        "ttft_p99": s["ttft_ms"]["p99"],
        "e2e_mean": s["e2el_ms"]["mean"],
    }


def bracket(url, shape, start, seed0, out_dir, e2e_s):
    steps, seed = [], seed0
    rate = float(f"{start:.3g}")
    lo = hi = None
    while len(steps) < MAX_STEPS:
        s = step(url, shape, rate, seed, out_dir, e2e_s)
        seed += 1
        steps.append(s)
        log(f"  {shape} @ {rate:.3g} req/s: {s['verdict']} (p99 TTFT {s['ttft_p99']:.0f} ms) {'; '.join(s['reasons'])[:120]}")
        if s["verdict"] == "pass":
            lo = max(lo or 0, rate)
        else:
            hi = min(hi or math.inf, rate)
        if lo is None:
            rate = hi / 1.5
        elif hi is None:
            rate = lo * 1.5
        elif hi / lo > WIDTH:
            rate = math.sqrt(lo * hi)
        else:
            break
    return steps, lo, hi


def main():
    out_dir = sys.argv[1]
    configs = sys.argv[2:] or list(CONFIGS)
    shapes = os.environ.get("SHAPES", ",".join(SHAPES)).split(",")
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for c in configs:
        t0 = time.time()
        url, pid = start_server(CONFIGS[c])
        log(f"{c}: vLLM at {url} ready in {time.time() - t0:.0f} s")
        try:
            profile = os.path.join(out_dir, f"profile-{c}.json")
            t = time.time()
            subprocess.run([K, "profile", "--base-url", url, "--budget", PROFILE_S, "-o", profile],
                           check=True, capture_output=True)
            profile_s = time.time() - t
            for shape in shapes:
                i = list(SHAPES).index(shape)
                t = time.time()
                p = predict(profile, shape)
                knee = p["knee"]
                start = max(knee["knee_req_s"], 0.05)
                e2e_s = predict(profile, shape, [start])["at_rates"][0]["e2el_ms"]["mean"] / 1e3
                steps, lo, hi = bracket(url, shape, start, 1000 * (i + 1), out_dir, e2e_s)
                passing = sorted((s for s in steps if s["verdict"] == "pass"), key=lambda s: -s["rate"])[:2]
                at = predict(profile, shape, [s["rate"] for s in passing]) if passing else {"at_rates": []}
                below = [float(f"{f * lo:.3g}") for f in FRACTIONS] if lo else []
                measured = [step(url, shape, r, 1000 * (i + 1) + 100 + j, out_dir, e2e_s) for j, r in enumerate(below)]
                for m in measured:
                    log(f"  {shape} @ {m['rate']:.3g} req/s (latency load): {m['verdict']} (p99 TTFT {m['ttft_p99']:.0f} ms)")
                fixed = predict(profile, shape, below) if below else {"at_rates": []}
                results.append({
                    "config": c, "shape": shape, "profile_s": profile_s,
                    "predicted": knee["knee_req_s"], "interval": [knee["low_req_s"], knee["high_req_s"]],
                    "predict_wall_s": p["_wall_s"], "bracket": [lo, hi], "steps": steps,
                    "at": [{"measured": s, "predicted": a} for s, a in zip(passing, at["at_rates"])],
                    "below": [{"measured": m, "predicted": a} for m, a in zip(measured, fixed["at_rates"])],
                    "measure_s": time.time() - t,
                })
                json.dump(results, open(os.path.join(out_dir, "results.json"), "w"), indent=1)
        finally:
            subprocess.run(["kill", str(pid)])
            time.sleep(5)
    table(results)


def err(pred, meas):
    return abs(pred - meas) / meas * 100 if meas else math.nan


def errors(pairs):
    """TTFT p50, TTFT p99 and E2E mean errors (%) of each measured/predicted pair."""
    return [[err(a["predicted"][k][q], a["measured"][m]) for a in pairs] for k, q, m in ERRS]


def med(v):
    v = sorted(e for e in v if not math.isnan(e))
    if not v:
        return math.nan
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def table(results):
    within = 0
    for r in results:
        lo, hi = r["bracket"]
        if lo and hi and abs(r["predicted"] / math.sqrt(lo * hi) - 1) <= 0.15:
            within += 1
    # The latency loads: 0.6 and 0.8 of the highest passing load (older
    # results: the two highest passing loads).
    key = "below" if all("below" in r for r in results) else "at"
    pooled = lambda k: [sum(col, []) for col in zip(*(errors(r[k]) for r in results))] or [[], [], []]
    e = pooled(key)
    where = "0.6 and 0.8 of the highest passing load" if key == "below" else "the two highest passing loads"
    print(f"knee within ±15% of the bracket's middle: {within} of {len(results)}; median absolute error over "
          f"{len(e[0])} loads ({where}): TTFT p50 {med(e[0]):.0f}%, TTFT p99 {med(e[1]):.0f}%, E2E mean {med(e[2]):.0f}%")
    if key == "below":
        a = pooled("at")
        print(f"(at the two highest passing loads, right under the knee, over {len(a[0])} loads: TTFT p50 "
              f"{med(a[0]):.0f}%, TTFT p99 {med(a[1]):.0f}%, E2E mean {med(a[2]):.0f}%)")
    print()
    print("| config | shape | predicted knee (interval) | measured bracket | within ±15% of its middle | loads | TTFT p50 err | TTFT p99 err | E2E mean err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        lo, hi = r["bracket"]
        mid = math.sqrt(lo * hi) if lo and hi else None
        ok = "–" if mid is None else ("yes" if abs(r["predicted"] / mid - 1) <= 0.15 else "no")
        loads = ", ".join(f"{a['measured']['rate']:.3g}" for a in r[key])
        errs = errors(r[key])
        cell = lambda es: " / ".join(f"{e:.0f}%" for e in es) or "–"
        br = f"{lo or 0:.3g} – " + (f"{hi:.3g}" if hi else "∞")
        print(f"| {r['config']} | {r['shape']} | {r['predicted']:.3g} ({r['interval'][0]:.3g}–{r['interval'][1]:.3g}) | {br} | {ok} | {loads} | {cell(errs[0])} | {cell(errs[1])} | {cell(errs[2])} |")


def repredict(old_dir, profile_dir):
    """The same measured steps, predicted again: from PROFILE_DIR's
    profile-CONFIG.json (a new profile of the same server configuration),
    else the run's own. For a model change, without measuring again."""
    results = json.load(open(os.path.join(old_dir, "results.json")))
    for r in results:
        profile = os.path.join(profile_dir, f"profile-{r['config']}.json")
        copy = os.path.join(profile_dir, f"repredict-{r['config']}.json")
        with open(profile) as src, open(copy, "w") as dst:
            dst.write(src.read())
        p = predict(copy, r["shape"])
        r["predicted"] = p["knee"]["knee_req_s"]
        r["interval"] = [p["knee"]["low_req_s"], p["knee"]["high_req_s"]]
        r["predict_wall_s"] = p["_wall_s"]
        for key in ("at", "below"):
            rates = [a["measured"]["rate"] for a in r.get(key, [])]
            if rates:
                at = predict(copy, r["shape"], rates)["at_rates"]
                r[key] = [{"measured": a["measured"], "predicted": q} for a, q in zip(r[key], at)]
    table(results)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--table":
        table(json.load(open(sys.argv[2])))
    elif len(sys.argv) > 2 and sys.argv[1] == "--repredict":
        repredict(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else sys.argv[2])
    else:
        main()
