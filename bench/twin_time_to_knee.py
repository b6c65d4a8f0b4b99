#!/usr/bin/env python3
"""Time to a knee bracket: `sweep --predict` against `sweep --calibrate`.

Both sweeps run against the built-in simulator's 7b-24gb preset (random
1024-token prompts, 128-token outputs, Poisson arrivals, adaptive steps)
with the SLO p99_ttft_ms<=500, alternating, RUNS times each. While a sweep
runs its JSON (rewritten after every step) is polled; the clock stops the
first time the sweep's own knee bracket (last pass .. first fail) contains
the true knee (the simulator's model in virtual time, `kneecap sim
--explain`, a simulation: 3.30 req/s, seeds' spread 3.12-3.33), or at CAP
seconds. The wall time includes the calibration probe, or the profile and
the prediction.

Run k uses --seed k (arrivals and prompts); with one seed the runs repeat
each other to within a second, the simulator being deterministic.

usage: bench/twin_time_to_knee.py [RUNS] [CAP_S] [FIRST_SEED]
       (TTK_METHODS=calibrate,prior: the prior method is --predict with
       --twin-prior-weight 2000; the default pair is calibrate,predict)
env:   KNEECAP (default target/release/kneecap), TTK_TRUTH (3.30)
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
CAP = float(sys.argv[2]) if len(sys.argv) > 2 else 600.0
FIRST_SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 1
K = os.environ.get("KNEECAP", "target/release/kneecap")
TRUTH = float(os.environ.get("TTK_TRUTH", "3.30"))
COMMON = [
    "sweep", "--sim-preset", "7b-24gb", "--adaptive",
    "--slo", "p99_ttft_ms<=500", "--ui", "none",
]
METHODS = {
    "calibrate": ["--calibrate"],
    "predict": ["--predict"],
    "prior": ["--predict", "--twin-prior-weight", "2000"],
}
# TTK_METHODS=calibrate,prior picks which run (alternating, in that order).
ORDER = os.environ.get("TTK_METHODS", "calibrate,predict").split(",")


def read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def contains(knee):
    lo, hi = knee.get("last_pass"), knee.get("first_fail")
    return lo is not None and hi is not None and lo < TRUTH < hi


def one(method, run, tmp):
    out = os.path.join(tmp, f"{method}-{run}.json")
    seed = str(FIRST_SEED + run - 1)
    cmd = [K] + COMMON + METHODS[method] + ["--seed", seed, "-o", out]
    err = open(os.path.join(tmp, f"{method}-{run}.err"), "w")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    hit, d = None, None
    while p.poll() is None and time.monotonic() - t0 < CAP:
        time.sleep(0.5)
        d = read(out) or d
        if d and contains(d["knee"]):
            hit = time.monotonic() - t0
            break
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    d = read(out) or d or {"knee": {}, "steps": []}
    k = d["knee"]
    pred = d.get("prediction") or {}
    return {
        "method": method,
        "run": run,
        "contained_s": hit,
        "steps": len(d["steps"]),
        "loads": [round(s["load"], 2) for s in d["steps"]],
        "bracket": (k.get("last_pass"), k.get("first_fail")),
        "pass_within_noise": k.get("last_pass_within_noise", False),
        "confidence": (k.get("last_pass_confidence"), k.get("first_fail_confidence")),
        "probe_s": (d.get("calibration") or {}).get("duration_s"),
        "profile_s": pred.get("profile_s"),
        "predict_cpu_s": pred.get("cpu_s"),
        "predict_wall_s": pred.get("wall_s"),
        "predicted": (pred.get("knee_req_s"), pred.get("low_req_s"), pred.get("high_req_s")),
    }


def fmt(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def main():
    tmp = tempfile.mkdtemp(prefix="ttk-twin-")
    rows = []
    for run in range(1, RUNS + 1):
        for method in ORDER:
            r = one(method, run, tmp)
            print(json.dumps(r), flush=True)
            rows.append(r)
    print()
    print("| method | run | wall s to a bracket holding the truth | steps by then | bracket | pass end within noise | probe / profile s | prediction (interval) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["bracket"]
        pre = r["predicted"]
        pred = "—" if pre[0] is None else f"{fmt(pre[0])} ({fmt(pre[1])}–{fmt(pre[2])})"
        setup = r["probe_s"] if r["method"] == "calibrate" else r["profile_s"]
        held = fmt(r["contained_s"], 0) if r["contained_s"] is not None else f"not within {CAP:.0f}"
        print(f"| {r['method']} | {r['run']} | {held} | {r['steps']} | {fmt(lo)} – {fmt(hi)} | "
              f"{'yes' if r['pass_within_noise'] else 'no'} | {fmt(setup, 1)} | {pred} |")
    for method in ORDER:
        ts = [r["contained_s"] if r["contained_s"] is not None else CAP for r in rows if r["method"] == method]
        print(f"\nmean {method}: {sum(ts) / len(ts):.0f} s over {len(ts)} runs (a run that never held the truth counts as {CAP:.0f} s)")
    print(f"\nfiles in {tmp}")


if __name__ == "__main__":
    main()
