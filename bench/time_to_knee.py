#!/usr/bin/env python3
"""Summarize bench/time_to_knee.sh: one row per method (wall time, steps,
the knee bracket it reports, and its error against the true knee)."""
import glob
import json
import os
import re
import sys

tmp, bound = sys.argv[1], float(sys.argv[2])


def walls():
    out = {}
    for line in open(os.path.join(tmp, "walls.txt")):
        name, secs = line.split()
        out[name] = float(secs)
    return out


def truth():
    text = open(os.path.join(tmp, "truth.txt")).read()
    m = re.search(r"true knee[^:]*:\s*([0-9.]+)", text)
    return float(m.group(1)) if m else None


def bracket_from(points):
    """points: [(rate, p99_ttft_ms)] -> (highest passing rate, lowest failing rate above it)."""
    points = sorted(points)
    passing = [r for r, p in points if p <= bound]
    last = max(passing) if passing else None
    fails = [r for r, p in points if p > bound and (last is None or r > last)]
    return last, (min(fails) if fails else None), len(points)


def kneecap():
    path = os.path.join(tmp, "kneecap-sweep.json")
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    k = d["knee"]
    cal = d.get("calibration") or {}
    return {
        "pass": k.get("last_pass"),
        "fail": k.get("first_fail"),
        "steps": len(d["steps"]),
        "pass_conf": k.get("last_pass_confidence"),
        "fail_conf": k.get("first_fail_confidence"),
        "noise": k.get("last_pass_within_noise", False),
        "pooled": k.get("last_pass_pooled", []),
        "probe_s": cal.get("duration_s", 0.0),
        "mu": cal.get("service_rate"),
        "step_s": [(s["load"], s["window_end_s"], s["verdict"]) for s in d["steps"]],
    }


def vllm_files(pattern):
    pts = []
    for f in glob.glob(pattern):
        try:
            d = json.load(open(f))
        except (OSError, ValueError):
            continue
        if "p99_ttft_ms" in d and d.get("request_rate") not in (None, "inf"):
            pts.append((float(d["request_rate"]), float(d["p99_ttft_ms"])))
    return pts


def guidellm():
    path = os.path.join(tmp, "guidellm.json")
    if not os.path.exists(path):
        return []
    d = json.load(open(path))
    pts = []
    for b in d.get("benchmarks", []):
        m = b.get("metrics", {})
        ttft = m.get("time_to_first_token_ms", {}).get("successful", {})
        p99 = (ttft.get("percentiles") or {}).get("p99")
        rps = m.get("requests_per_second", {}).get("successful", {}).get("mean")
        strategy = (b.get("config") or {}).get("strategy") or b.get("args", {}).get("strategy", {})
        rate = strategy.get("rate") if isinstance(strategy, dict) else None
        if p99 is not None:
            pts.append((float(rate if rate else rps or 0.0), float(p99)))
    return pts


def err(x, t):
    return f"{(x / t - 1) * 100:+.1f}%" if (x is not None and t) else "—"


w, t = walls(), truth()
print(f"\ntrue knee (virtual-time simulation): {t} req/s; SLO p99 TTFT <= {bound:g} ms\n")
print("| method | wall s | steps | knee bracket (req/s) | pass end vs truth | fail end vs truth | notes |")
print("|---|---|---|---|---|---|---|")
k = kneecap()
if k and "kneecap" in w:
    below = sum(s for load, s, _ in k["step_s"] if t and load < t / 2)
    conf = f"confidence pass {k['pass_conf'] or 0:.2f} / fail {k['fail_conf'] or 0:.2f}"
    if k["noise"]:
        conf += " (pass end within noise: no pass decided)"
    if k["pooled"]:
        conf += f" (pass end pooled over the steps at {', '.join(f'{x:.1f}' for x in k['pooled'])})"
    print(f"| kneecap sweep | {w['kneecap']:.0f} | {k['steps']} (+ {k['probe_s']:.0f} s probe, μ≈{k['mu'] or 0:.1f}) | "
          f"{k['pass'] or 0:.1f} – {k['fail'] or 0:.1f} | {err(k['pass'], t)} | {err(k['fail'], t)} | "
          f"{conf}; {below:.0f} s below half the knee |")
for name, label, pts in [
    ("grid", "vllm bench serve grid 2–32 × 500", vllm_files(os.path.join(tmp, "grid", "*.json"))),
    ("vllm-bench", "vllm-bench --sweep-request-rate 2–32 × 500", vllm_files(os.path.join(tmp, "vllm-bench", "*.json"))),
    ("guidellm", "GuideLLM sweep profile, 30 s each", guidellm()),
]:
    if name not in w:
        continue
    last, fail, n = bracket_from(pts)
    fmt = lambda x: f"{x:.1f}" if x is not None else "none"
    print(f"| {label} | {w[name]:.0f} | {n} | {fmt(last)} – {fmt(fail)} | {err(last, t)} | {err(fail, t)} | |")
