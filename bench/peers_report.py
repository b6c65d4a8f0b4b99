#!/usr/bin/env python3
"""Tables for bench/peers.sh: reads DIR/runs.tsv, each run's sim trace and each
tool's own result file, and prints a per-run table and a summary (markdown).

Usage: bench/peers_report.py DIR
"""
import json
import os
import sys

SUSTAIN = 0.95  # server-observed arrival rate >= 95% of offered


def q(xs, p):
    """Nearest-rank percentile (p in [0, 1]) of a non-empty list."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def arrival(r):
    """The server-side arrival: when the kernel received the request's last
    byte (`arrival_rx_s`), or when the sim's handler read it where the sim had
    no kernel stamp."""
    rx = r.get("arrival_rx_s")
    return r["arrival_s"] if rx is None else rx


def trace_stats(path):
    recs = []
    with open(path) as f:
        for line in f:
            v = json.loads(line)
            if "request_id" in v:
                recs.append(v)
    ok = [r for r in recs if r.get("outcome") == "ok" and r.get("first_token_s") is not None]
    arr = sorted(r["arrival_s"] for r in recs)
    span = arr[-1] - arr[0] if len(arr) > 1 else 0.0
    ttft = [(r["first_token_s"] - arrival(r)) * 1e3 for r in ok]
    waits = [(r["arrival_s"] - r["arrival_rx_s"]) * 1e3 for r in recs
             if r.get("arrival_rx_s") is not None]
    return {
        "wait50": q(waits, 0.5) if waits else float("nan"),
        "wait99": q(waits, 0.99) if waits else float("nan"),
        "arrived": len(recs),
        "ok": len(ok),
        "rate": (len(arr) - 1) / span if span > 0 else float("nan"),
        "span": span,
        "events": sum(r.get("output_tokens", 0) for r in recs),
        "ttft50": q(ttft, 0.5) if ttft else float("nan"),
        "ttft99": q(ttft, 0.99) if ttft else float("nan"),
    }


def tool_stats(tool, base):
    """(ttft p50 ms, ttft p99 ms, completed, failed) from the tool's own output file."""
    nan = float("nan")
    try:
        if tool in ("kneecap", "vllm", "vllm-bench"):
            d = json.load(open(base + ".json"))
            return d["p50_ttft_ms"], d["p99_ttft_ms"], d["completed"], d["failed"]
        if tool == "guidellm":
            b = json.load(open(base + ".json"))["benchmarks"][0]["metrics"]
            p = b["time_to_first_token_ms"]["successful"]["percentiles"]
            t = b["request_totals"]
            return p["p50"], p["p99"], t["successful"], t["errored"] + t["incomplete"]
        if tool == "aiperf":
            d = json.load(open(os.path.join(base + ".aiperf", "profile_export_aiperf.json")))
            t = d["time_to_first_token"]
            ok = int(d["request_count"]["avg"])
            done = int(d.get("completed_request_count", {}).get("avg", ok))
            return t["p50"], t["p99"], ok, done - ok
    except (OSError, KeyError, IndexError, ValueError, TypeError):
        pass
    return nan, nan, None, None


def task_stamped(base):
    """kneecap's TTFT p50/p99 as its tasks saw the reads (kernel-stamped TTFT
    plus the client scheduling delay), when it used kernel stamps."""
    try:
        rx = json.load(open(base + ".json"))["kneecap"]["rx_timestamps"]
        t = rx["ttft_task_stamped"]
        return rx["source"], t["p50_ms"], t["p99_ms"], rx["client_scheduling_delay"]
    except (OSError, KeyError, ValueError, TypeError):
        return None


def fmt(x, spec=".1f"):
    if x is None:
        return "–"
    if isinstance(x, float) and x != x:
        return "–"
    return format(x, spec)


def main():
    d = sys.argv[1]
    runs = []
    with open(os.path.join(d, "runs.tsv")) as f:
        for line in f:
            tool, rate, n, label, rc, *t = line.rstrip("\n").split("\t")
            user, sys_, wall = (float(x) for x in t[0].split()) if t and t[0].strip() else (0, 0, 0)
            runs.append(dict(tool=tool, rate=rate, n=int(n), label=label, rc=int(rc),
                             cpu=user + sys_, wall=wall))
    startup = {r["tool"]: r for r in runs if r["rate"] == "startup"}
    tools = list(dict.fromkeys(r["tool"] for r in runs))

    print("\n### Start-up cost (1 request; subtracted from every run's CPU below)\n")
    print("| tool | CPU s (user+sys) | wall s |")
    print("|---|---|---|")
    for t in tools:
        s = startup.get(t)
        if s:
            print(f"| {t} | {s['cpu']:.2f} | {s['wall']:.1f} |")

    print("\n### Per run\n")
    print("TTFT inflation = the tool's TTFT − the server's TTFT (sim trace: first token "
          "handed to the connection − the kernel's receive time of the request's last "
          "byte), at the same percentile. Sim wait = the sim's handler read − that "
          "kernel receive time: server-side time a handler-stamped trace would charge "
          "to the client. Busy CPU = the tool's user+sys − its start-up CPU.\n")
    print("| offered req/s | tool | rc | server-seen req/s | arrived/ok (of N) | tool completed/failed "
          "| server TTFT p50/p99 ms | sim wait p50/p99 ms | tool TTFT p50/p99 ms "
          "| inflation p50/p99 ms | busy CPU s "
          "| CPU s per 1k events | events per core-s | wall s | sustained |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    res = {}
    for r in runs:
        if r["rate"] == "startup":
            continue
        base = os.path.join(d, r["label"])
        try:
            s = trace_stats(base + ".trace.jsonl")
        except (OSError, ValueError):
            s = dict(arrived=0, ok=0, rate=float("nan"), span=0, events=0,
                     ttft50=float("nan"), ttft99=float("nan"),
                     wait50=float("nan"), wait99=float("nan"))
        t50, t99, comp, fail = tool_stats(r["tool"], base)
        busy = r["cpu"] - startup.get(r["tool"], {"cpu": 0.0})["cpu"]
        ev = s["events"]
        rate = float(r["rate"])
        sustained = (s["rate"] >= SUSTAIN * rate and s["ok"] == r["n"] and r["rc"] == 0
                     and fail == 0)
        res[(r["tool"], r["rate"])] = dict(s=s, busy=busy, sustained=sustained,
                                           eps=ev / busy if busy > 0 else float("nan"))
        print(f"| {r['rate']} | {r['tool']} | {r['rc']} | {fmt(s['rate'])} | "
              f"{s['arrived']}/{s['ok']} ({r['n']}) | {fmt(comp, 'd')}/{fmt(fail, 'd')} | "
              f"{fmt(s['ttft50'], '.2f')} / {fmt(s['ttft99'], '.2f')} | "
              f"{fmt(s['wait50'], '.2f')} / {fmt(s['wait99'], '.2f')} | "
              f"{fmt(t50, '.2f')} / {fmt(t99, '.2f')} | "
              f"{fmt(t50 - s['ttft50'], '.2f')} / {fmt(t99 - s['ttft99'], '.2f')} | "
              f"{busy:.2f} | {fmt(1000 * busy / ev if ev else float('nan'), '.3f')} | "
              f"{fmt(ev / busy if busy > 0 else float('nan'), ',.0f')} | {r['wall']:.1f} | "
              f"{'yes' if sustained else '**no**'} |")
        ts = task_stamped(base) if r["tool"] == "kneecap" else None
        if ts:
            src, a50, a99, delay = ts
            print(f"| {r['rate']} | kneecap, same run, task stamps | | | | | | | "
                  f"{fmt(a50, '.2f')} / {fmt(a99, '.2f')} | "
                  f"{fmt(a50 - s['ttft50'], '.2f')} / {fmt(a99 - s['ttft99'], '.2f')} | "
                  f"stamps: {src}; scheduling delay p50/p99 "
                  f"{fmt(delay.get('p50_ms'), '.2f')} / {fmt(delay.get('p99_ms'), '.2f')} ms | | | | |")

    rates = list(dict.fromkeys(r["rate"] for r in runs if r["rate"] != "startup"))
    out_tokens = 64
    print("\n### Summary\n")
    print("A level is sustained when the server saw ≥ 95% of the offered arrival rate and "
          "every request completed (all N arrived and streamed all tokens, no tool-reported "
          "failure). Events = streamed output tokens (one SSE event each). "
          f"kneecap/peer ratios: events per busy core-second at each level, and highest "
          "sustained level.\n")
    hdr = "| tool | highest sustained level | " + " | ".join(
        f"events per core-s @ {x} req/s" for x in rates) + " | " + " | ".join(
        f"kneecap/tool events per core-s @ {x}" for x in rates) + " | kneecap/tool highest sustained |"
    print(hdr)
    print("|" + "---|" * (3 + 2 * len(rates)))

    def best(t):
        ok = [float(x) for x in rates if res.get((t, x), {}).get("sustained")]
        return max(ok) if ok else 0.0

    kb = best("kneecap")
    for t in tools:
        b = best(t)
        lvl = f"{b:g} req/s = {b * out_tokens:,.0f} events/s" if b else "none"
        cells = [fmt(res.get((t, x), {}).get("eps"), ",.0f") for x in rates]
        ratios = []
        for x in rates:
            k = res.get(("kneecap", x), {}).get("eps")
            p = res.get((t, x), {}).get("eps")
            ratios.append(f"{k / p:.1f}×" if k and p and k == k and p == p else "–")
        # kneecap sustaining the top level means its own ceiling was not reached.
        k_top = res.get(("kneecap", rates[-1]), {}).get("sustained", False)
        if t == "kneecap":
            hr = "1×"
        elif not b:
            hr = "– (the peer sustained no level)"
        else:
            hr = f"{'≥ ' if k_top else ''}{kb / b:.1f}×"
        print(f"| {t} | {lvl} | " + " | ".join(cells) + " | " + " | ".join(ratios) + f" | {hr} |")


if __name__ == "__main__":
    main()
