#!/usr/bin/env python3
"""Generate data/trace-sample.jsonl: a small synthetic trace in vLLM's
timed_trace format (one JSON object per line: timestamp in seconds,
input_length, output_length, hash_ids of 16-token blocks).

It imitates chat/agent traffic, not any real service:
- 400 requests over about 145 s. Arrivals are a Gamma renewal process with
  burstiness 0.5 (coefficient of variation 1.41, burstier than Poisson) whose
  rate is 2.5 req/s, doubled between 50 s and 70 s (a burst).
- 12 system prompts of 8-40 blocks, picked with Zipf(1.2) popularity: every
  request starts with one, so most prompts share a long prefix.
- 35% of requests continue an earlier conversation with the same system
  prompt: they resend that request's blocks and add 1-6 new ones (a later
  turn: the previous prompt plus the answer plus the new message).
- Otherwise a new conversation adds 2-20 blocks of its own after the system
  prompt.
- input_length is 16 tokens per block minus 0-15 (the last block is partial);
  output_length is log-normal (median 120 tokens, clipped to 16-1024).

Block ids are unique integers; equal ids mean equal 16-token blocks, as in
the Mooncake traces. Deterministic: `python3 data/make_trace.py` rewrites
the same file (seed 20261201).
"""
import json
import math
import os
import random

rng = random.Random(20261201)
N, BASE_RATE, BURSTINESS = 400, 2.5, 0.5
next_id = 0


def new_blocks(k):
    global next_id
    ids = list(range(next_id, next_id + k))
    next_id += k
    return ids


systems = [new_blocks(rng.randint(8, 40)) for _ in range(12)]
weights = [1 / (i + 1) ** 1.2 for i in range(len(systems))]
history = {i: [] for i in range(len(systems))}  # earlier prompts per system prompt

rows, t = [], 0.0
for _ in range(N):
    rate = BASE_RATE * (2 if 50 <= t < 70 else 1)
    t += rng.gammavariate(BURSTINESS, 1 / (rate * BURSTINESS))
    s = rng.choices(range(len(systems)), weights)[0]
    if history[s] and rng.random() < 0.35:
        ids = rng.choice(history[s]) + new_blocks(rng.randint(1, 6))
    else:
        ids = systems[s] + new_blocks(rng.randint(2, 20))
    history[s].append(ids)
    input_length = 16 * len(ids) - rng.randint(0, 15)
    output_length = min(1024, max(16, round(math.exp(rng.gauss(math.log(120), 0.7)))))
    rows.append({"timestamp": round(t, 3), "input_length": input_length,
                 "output_length": output_length, "hash_ids": ids})

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace-sample.jsonl")
with open(path, "w") as f:
    for r in rows:
        f.write(json.dumps(r, separators=(",", ":")) + "\n")
print(f"{path}: {len(rows)} requests over {rows[-1]['timestamp']:.1f} s")
