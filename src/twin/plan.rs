//! The probe design: what `kneecap profile` sends, sized to its time budget
//! from a two-request pilot. Pure: the pilot's numbers and the budget come
//! in, request shapes and level lengths go out.
//!
//! The budget is shared: the pilot and warm-up take what they take, then
//! about [`PREFILL_SHARE`] goes to lone requests (the prefill line and the
//! prefix-cache pairs), [`INTERFERENCE_SHARE`] to decoders with prompts
//! arriving, [`MIXED_SHARE`] to a full batch with prompts arriving
//! ([`super::mixed`]), and the rest, less [`SLACK_SHARE`], to closed-loop
//! decode levels; what those leave (at least [`MORE_PREFILL_SHARE`]) goes to more
//! rounds of lone requests. Lengths shrink before a probe outgrows its
//! share; every level the command runs is also cancelled at the budget's end.

use super::decode::{saturated, slots, MIN_GAPS};
use super::interference::LONG_OVER_SHORT;
use super::observe::{DecodeLevel, KvPoint};
use super::prompt_step::SHORT_PROMPT;
use std::time::Duration;

/// Shares of the budget.
pub const PREFILL_SHARE: f64 = 0.25;
pub const INTERFERENCE_SHARE: f64 = 0.10;
pub const SLACK_SHARE: f64 = 0.08;
/// Left over after the other probes (a small batch limit ends the decode
/// levels early), at least this much goes to more rounds of lone prefills.
pub const MORE_PREFILL_SHARE: f64 = 0.05;
/// Kept from the decode levels for blockers and bursts of prompts sent
/// together ([`super::prefill_batch`]), which also take what the other
/// probes leave.
pub const PREFILL_BATCH_SHARE: f64 = 0.06;
/// Kept from the decode levels for the mixed level ([`super::mixed`]).
pub const MIXED_SHARE: f64 = 0.15;
/// Longest prompt the prefill line uses (vLLM's default token budget, so a
/// lone prompt is one step).
pub const LONGEST_PREFILL: u32 = 2048;
/// Output tokens of a lone prefill request (its first token is what counts).
pub const PREFILL_OUTPUT: u32 = 2;
/// Decoders of the interference probe, fewer on a smaller batch limit.
pub const DECODERS: usize = 3;
/// Most long prompts the interference probe sends: the centre of their
/// shortest half (nearly half of them meet a host stall on vLLM on CPU)
/// wants a dozen or more; six (their mean) read 0.98, 1.28 and 1.48 in
/// three profiles of one vLLM engine. At 90 s of budget the probe's share
/// (halved since the mixed level gives the interference a knee sees,
/// [`super::mixed`]) holds about 12.
pub const LONG_PROMPTS: usize = 24;
/// Prompt and output of a decode-level request.
pub const DECODE_PROMPT: u32 = 8;
pub const DECODE_OUTPUT: u32 = 64;
/// Most and fewest streams of the long-context decode level (the
/// context's cost, [`super::extra_costs`]), and its prompt. On vLLM's CPU
/// engine 4 streams of 1,024 tokens read 0 to 5.5 µs a context token from
/// profile to profile; 16 streams make the context's share of a step four
/// times larger.
pub const CONTEXT_STREAMS: usize = 16;
pub const MIN_CONTEXT_STREAMS: usize = 4;
/// The longest a long-context level may run, as a share of the decode
/// probe's time (it runs up to [`SHAPE_ROUNDS`] times).
pub const CONTEXT_ROOM_SHARE: f64 = 0.1;
pub const CONTEXT_PROMPT: u32 = 1024;
/// How much longer than its prompts' lone prefills a long level's first
/// wave is taken to last (vLLM on CPU: ten 1,024-token prompts took 3.09 s,
/// 1.06 to 1.17 times ten lone ones by two profiles' prefill curves).
pub const WAVE_MARGIN: f64 = 1.25;
/// Rounds of that level at most.
pub const SHAPE_ROUNDS: usize = 2;
/// The highest concurrency the decode levels try.
pub const MAX_LEVEL: usize = 1024;
/// Rounds of decode levels at most (once one saturated, they repeat).
pub const MAX_DECODE_ROUNDS: usize = 4;

/// What the pilot saw: a short and a long lone request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pilot {
    /// TTFT of a short prompt, seconds (about the fixed cost).
    pub short_ttft_s: f64,
    /// Cost per prompt token, seconds (from the long prompt).
    pub per_token_s: f64,
    /// Median token gap of a lone stream, seconds (about the step base).
    pub lone_gap_s: f64,
}

impl PrefillPlan {
    /// The probe's name in its summary: the first rounds, or more.
    pub fn name(&self) -> &'static str {
        match self.twice.is_empty() {
            false => "prefill",
            true => "prefill (more rounds)",
        }
    }

    /// What the probe sends, in a line.
    pub fn describe(&self) -> String {
        match self.twice.is_empty() {
            false => format!(
                "lengths {:?} x {} rounds, the two longest sent twice in a row",
                self.lengths, self.rounds
            ),
            true => format!(
                "lengths {:?} again, in the time the other probes left",
                self.lengths
            ),
        }
    }
}

impl Pilot {
    /// From `(prompt tokens, TTFT)` of the short and long requests and the
    /// short one's gaps; costs never below a microsecond.
    pub fn new(short: (u32, f64), long: (u32, f64), lone_gap_s: f64) -> Self {
        let dn = f64::from(long.0.saturating_sub(short.0).max(1));
        Self {
            short_ttft_s: short.1.max(1e-4),
            per_token_s: ((long.1 - short.1) / dn).max(1e-6),
            lone_gap_s: lone_gap_s.max(1e-4),
        }
    }

    /// A lone request's expected time: prefill plus `output − 1` steps.
    fn lone(&self, prompt: u32, output: u32) -> f64 {
        self.short_ttft_s
            + self.per_token_s * f64::from(prompt)
            + self.lone_gap_s * f64::from(output.saturating_sub(1))
    }
}

/// The lone-request probe.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillPlan {
    /// Prompt lengths, in the order sent: `rounds` rounds of every length.
    pub lengths: Vec<u32>,
    pub rounds: usize,
    /// Lengths whose first sending is sent again right after (prefix cache).
    pub twice: Vec<u32>,
}

impl PrefillPlan {
    /// The same lengths again, as many rounds as the plan allows at most,
    /// none sent twice: for the time the other probes left (the caller
    /// cuts it there).
    pub fn more(&self) -> Self {
        Self {
            lengths: self.lengths.clone(),
            rounds: MAX_PREFILL_ROUNDS,
            twice: Vec::new(),
        }
    }

    /// Every request in order: (prompt tokens, sent again = a repeat).
    pub fn requests(&self) -> Vec<(u32, bool)> {
        let mut out = Vec::new();
        for round in 0..self.rounds {
            for &n in &self.lengths {
                out.push((n, false));
                if round == 0 && self.twice.contains(&n) {
                    out.push((n, true));
                }
            }
        }
        out
    }
}

/// The most rounds of lone prefills a plan sends.
pub const MAX_PREFILL_ROUNDS: usize = 8;

/// Five lengths from 16 to the longest that lets 3 rounds fit the share,
/// as many rounds (3..=[`MAX_PREFILL_ROUNDS`]) as fit.
pub fn prefill(pilot: &Pilot, budget: Duration, max_len: u32) -> PrefillPlan {
    let share = budget.as_secs_f64() * PREFILL_SHARE;
    let mut longest = LONGEST_PREFILL.min(max_len.saturating_sub(PREFILL_OUTPUT + 1));
    let lengths = |l: u32| -> Vec<u32> {
        let mut v: Vec<u32> = [16, l / 4, l / 2, 3 * l / 4, l]
            .iter()
            .map(|&n| n.max(16))
            .collect();
        v.dedup();
        v
    };
    let round = |l: u32| -> f64 {
        lengths(l)
            .iter()
            .map(|&n| pilot.lone(n, PREFILL_OUTPUT))
            .sum::<f64>()
            + 2.0 * pilot.lone(l, PREFILL_OUTPUT)
    };
    while longest > 128 && 3.0 * round(longest) > share {
        longest /= 2;
    }
    let rounds = (share / round(longest))
        .floor()
        .clamp(3.0, MAX_PREFILL_ROUNDS as f64) as usize;
    let ls = lengths(longest);
    let twice = ls.iter().rev().take(2).copied().collect();
    PrefillPlan {
        lengths: ls,
        rounds,
        twice,
    }
}

/// The interference probe: decoders from 0, prompts at `sends`.
#[derive(Debug, Clone, PartialEq)]
pub struct InterferencePlan {
    pub decoder_output: u32,
    pub prompt_tokens: u32,
    /// When each prompt is sent, from the probe's start.
    pub sends: Vec<Duration>,
    /// Short prompts ([`super::prompt_step`]) and when each is sent: two after
    /// each long one's prefill, none when the long ones are not at least
    /// [`LONG_OVER_SHORT`] times longer.
    pub short_tokens: u32,
    pub short_sends: Vec<Duration>,
    /// When the probe is cut.
    pub length: Duration,
}

impl InterferencePlan {
    /// What the probe sends, in a line.
    pub fn describe(&self, decoders: usize) -> String {
        let short = match self.short_sends.len() {
            0 => String::new(),
            n => format!(" and {n} of {}", self.short_tokens),
        };
        format!(
            "{decoders} streams decoding, {} prompts of {} tokens{short} arriving",
            self.sends.len(),
            self.prompt_tokens,
        )
    }
}

/// Prompts whose prefill costs about 5 decode steps (at least 50 ms), as
/// many as fit the share (3..=[`LONG_PROMPTS`]), spaced so each prefill
/// ends well before the next begins; after each, two short ones.
pub fn interference(pilot: &Pilot, budget: Duration, max_len: u32) -> InterferencePlan {
    let share = budget.as_secs_f64() * INTERFERENCE_SHARE;
    let g = pilot.lone_gap_s;
    let cap = max_len.saturating_sub(2).clamp(16, 8192);
    let mut n = ((5.0 * g).max(0.05) / pilot.per_token_s).clamp(64.0, f64::from(cap)) as u32;
    let spacing = |n: u32| 2.0 * (pilot.short_ttft_s + pilot.per_token_s * f64::from(n)) + 6.0 * g;
    let mut count = LONG_PROMPTS;
    while count > 3 && (count + 1) as f64 * spacing(n) > share {
        count -= 1;
    }
    while n > 16 && (count + 1) as f64 * spacing(n) > share {
        n /= 2;
    }
    let s = spacing(n);
    let sends: Vec<Duration> = (1..=count)
        .map(|k| Duration::from_secs_f64(s * k as f64 + 3.0 * g))
        .collect();
    let length = Duration::from_secs_f64(s * (count + 1) as f64);
    let want = (1.5 * length.as_secs_f64() / g) as u32 + 16;
    // A long prefill ends before half the spacing; the short prompts come
    // after it, each with room for its one step.
    let short_sends = if n >= LONG_OVER_SHORT * SHORT_PROMPT {
        sends
            .iter()
            .flat_map(|&t| {
                [
                    t + Duration::from_secs_f64(0.55 * s),
                    t + Duration::from_secs_f64(0.775 * s),
                ]
            })
            .collect()
    } else {
        Vec::new()
    };
    InterferencePlan {
        decoder_output: want.min(max_len.saturating_sub(DECODE_PROMPT + 1)).max(2),
        prompt_tokens: n,
        sends,
        short_tokens: SHORT_PROMPT,
        short_sends,
        length,
    }
}

/// Decoders for the interference probe: [`DECODERS`], or fewer when a
/// decode level showed a batch limit, so that one slot stays free for each
/// arriving prompt (on a full batch it would queue, not run beside them).
/// 0 on a server of one slot: no prompt can run beside a decoder there.
pub fn decoders(levels: &[DecodeLevel]) -> usize {
    levels
        .iter()
        .filter(|l| saturated(l))
        .map(|l| slots(l).round() as usize)
        .min()
        .map_or(DECODERS, |limit| DECODERS.min(limit.saturating_sub(1)))
}

/// The next decode level `(concurrency, length)`, given the levels run so
/// far as `(concurrency, saturated, mean gap s)`, the time they took and
/// the share left; `None` to stop (the top, no time, or enough rounds).
/// Concurrency doubles until a level saturates; then the levels up to that
/// one run again, as rounds, up to [`MAX_DECODE_ROUNDS`] in all: a small
/// batch limit leaves few levels, and repeats steady their fit.
pub fn next_decode_level(
    done: &[(usize, bool, f64)],
    pilot: &Pilot,
    left: Duration,
) -> Option<(usize, Duration)> {
    let (k, gap) = match done.iter().position(|d| d.1) {
        Some(top) => {
            let round = top + 1;
            if done.len() >= round * MAX_DECODE_ROUNDS {
                return None;
            }
            let (k, _, gap) = done[done.len() % round];
            (k, gap)
        }
        None => climb(done, pilot)?,
    };
    let length = level_length(k, gap, pilot);
    (length <= left).then_some((k, length))
}

/// The next concurrency while climbing (double the last, up to
/// [`MAX_LEVEL`]) and its expected token gap: the step grows about
/// linearly with the batch, so the last two levels are extrapolated.
fn climb(done: &[(usize, bool, f64)], pilot: &Pilot) -> Option<(usize, f64)> {
    let k = done.last().map_or(1, |d| d.0 * 2);
    if k > MAX_LEVEL {
        return None;
    }
    let gap = match done {
        [.., a, b] => b.2 + (b.2 - a.2).max(0.0) / (b.0 - a.0) as f64 * (k - b.0) as f64,
        [b] => b.2 * 1.5,
        [] => pilot.lone_gap_s,
    };
    Some((k, gap))
}

/// A decode level of another shape than the doubling levels'.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeLevel {
    pub streams: usize,
    pub prompt: u32,
    pub output: u32,
    pub length: Duration,
}

/// The levels that vary what the doubling levels hold fixed: long prompts
/// at [`CONTEXT_STREAMS`] or at most `limit` streams
/// ([`context_stream_limit`]), halved down to [`MIN_CONTEXT_STREAMS`] until
/// the level fits in `room` (more streams, a larger share of the step that
/// the context takes); none when `max_len` leaves
/// no prompt 8 times [`DECODE_PROMPT`]. `gap(k)` is the expected token gap
/// at `k` streams; `prompt_s(n)` a lone prompt of `n` tokens' prefill,
/// seconds, taken no lower than the pilot's line (the prefill probe's
/// curve, when it has one: the pilot's straight line from two
/// lone prompts left out the attention pairs and made vLLM's level of ten
/// 1,024-token prompts end before their first wave was through, with no
/// plain decode step in it).
pub fn shape_levels(
    pilot: &Pilot,
    max_len: u32,
    limit: usize,
    room: Duration,
    (gap, prompt_s): (impl Fn(usize) -> f64, impl Fn(u32) -> f64),
) -> Vec<ShapeLevel> {
    let prompt = CONTEXT_PROMPT.min(max_len.saturating_sub(DECODE_OUTPUT + 1));
    if prompt < 8 * DECODE_PROMPT {
        return Vec::new();
    }
    let level = |k: usize| {
        // The first wave's prefill (with a quarter more for the steps it
        // shares with the decoders it started), then 36 steps.
        let wave = prompt_s(prompt).max(pilot.per_token_s * f64::from(prompt));
        let first = pilot.short_ttft_s + WAVE_MARGIN * wave * k as f64;
        ShapeLevel {
            streams: k,
            prompt,
            output: DECODE_OUTPUT.min(max_len - prompt - 1),
            length: Duration::from_secs_f64(first + 36.0 * gap(k)),
        }
    };
    let mut k = CONTEXT_STREAMS.min(limit).max(1);
    while k > MIN_CONTEXT_STREAMS.min(limit).max(1) && level(k).length > room {
        k /= 2;
    }
    vec![level(k)]
}

/// Most streams a long-context level may run: the batch limit a saturated
/// level showed, and 80% of the KV capacity the climb's KV readings point
/// to (the fullest reading's tokens over its usage) over a long request's
/// tokens: a level that fills the cache preempts and gives no point.
pub fn context_stream_limit(levels: &[DecodeLevel], kv: &[KvPoint]) -> usize {
    let slots = batch_limit(levels);
    let fullest = kv
        .iter()
        .filter(|p| p.usage >= 0.01)
        .max_by(|a, b| a.usage.total_cmp(&b.usage));
    let cache = fullest.map_or(usize::MAX, |p| {
        let capacity = p.tokens / p.usage;
        (0.8 * capacity / f64::from(CONTEXT_PROMPT + DECODE_OUTPUT)).floor() as usize
    });
    slots.min(cache)
}

/// The batch limit the saturated decode levels show (the fewest slots of
/// any), `usize::MAX` when none saturated.
pub fn batch_limit(levels: &[DecodeLevel]) -> usize {
    levels
        .iter()
        .filter(|l| saturated(l))
        .map(|l| slots(l).floor() as usize)
        .min()
        .unwrap_or(usize::MAX)
}

/// How long a level of `k` streams runs: the first wave's prefill, then 24
/// steps of steady decoding of `gap` each (more at low concurrency: twice
/// the gaps the fit needs, as a slow or busy server's steps come out
/// longer than the pilot's); at least 0.4 s.
fn level_length(k: usize, gap: f64, pilot: &Pilot) -> Duration {
    let first = pilot.short_ttft_s + pilot.per_token_s * f64::from(DECODE_PROMPT) * k as f64;
    let steps = (2 * MIN_GAPS).div_ceil(k).max(24) as f64;
    Duration::from_secs_f64((first + steps * gap).max(0.4))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
