"""Rebuild a server's engine steps from a run's own token times, and fit
what a step costs.

A run saved with `kneecap run ... --save-detailed -o run.json` (or `vllm
bench serve --save-detailed`) holds each request's start time, TTFT,
inter-token gaps and prompt length. One engine step emits one token for
each running sequence, and the first token of each prompt it computed, all
within a few ms: clustering every token's arrival time (a new step when the
gap to the previous token exceeds GAP_S, or when a request shows up twice)
gives the steps. Each step's duration is the time from the previous step's
tokens to its own; its content is the decoders, the prompts whose first
token it emitted, their tokens, and the decoders' context.

Then least squares over the steps under twice the median (a stalled step,
see docs/benchmarks/2026-12-07.md, "Stalls", would pull the fit):
  step = base + a * decoders + c * context + F * [prompt in step] + b * prompt tokens

Usage: PYTHON bench/vllm_steps.py run.json [GAP_S]   (numpy needed: the
vLLM venv's python has it; GAP_S 0.008 by default)
"""
import json
import sys

import numpy as np


def events(j):
    st, tt, itl = j["start_times"], j["ttfts"], j["itls"]
    out = []
    for i in range(len(st)):
        if not tt[i]:
            continue
        t = st[i] + tt[i]
        out.append((t, i, 0))
        for k, g in enumerate(itl[i]):
            t += g
            out.append((t, i, k + 1))
    out.sort()
    return out


def clusters(ev, gap_s):
    out, cur, seen = [], [], set()
    for e in ev:
        if cur and (e[0] - cur[-1][0] > gap_s or e[1] in seen):
            out.append(cur)
            cur, seen = [], set()
        cur.append(e)
        seen.add(e[1])
    out.append(cur)
    return out


def steps(cl, input_lens):
    rows = []
    for a, b in zip(cl, cl[1:]):
        firsts = [e for e in b if e[2] == 0]
        decs = [e for e in b if e[2] > 0]
        rows.append((
            (b[0][0] - a[0][0]) * 1e3,
            len(decs),
            len(firsts),
            sum(input_lens[e[1]] for e in firsts),
            sum(input_lens[e[1]] + e[2] for e in decs),
        ))
    return np.array(rows)


def fit(R, mask, cols, names):
    X = np.column_stack([np.ones(mask.sum())] + [c[mask] for c in cols])
    y = R[mask, 0]
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    r = y - X @ coef
    s2 = r @ r / max(1, len(y) - X.shape[1])
    se = np.sqrt(np.diag(s2 * np.linalg.pinv(X.T @ X)))
    terms = ", ".join(f"{n} {v:.4g} ± {e:.2g}" for n, v, e in zip(["base ms"] + names, coef, se))
    print(f"  {terms}; residual sd {np.sqrt(s2):.1f} ms over {mask.sum()} steps")


def main():
    j = json.load(open(sys.argv[1]))
    gap_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.008
    R = steps(clusters(events(j), gap_s), j["input_lens"])
    d, dec, nf, ptok, ctx = R.T
    print(f"{len(R)} steps; by prompts computed: "
          + ", ".join(f"{int(k)}: {int((nf == k).sum())}" for k in np.unique(nf)))
    for k in np.unique(nf)[:4]:
        m = nf == k
        print(f"  {int(k)} prompts: median {np.median(d[m]):.1f} ms, decoders {dec[m].mean():.1f}, "
              f"prompt tokens {ptok[m].mean():.0f}")
    ok = d < 2 * np.median(d)
    print("step = base + a*decoders + c*context + F*[prompt] + b*prompt tokens (ms):")
    fit(R, ok, [dec, ctx, (nf > 0).astype(float), ptok],
        ["a per decoder", "c per context token", "F", "b per prompt token"])


if __name__ == "__main__":
    main()
