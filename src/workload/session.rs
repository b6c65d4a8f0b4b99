//! Sessions (multi-turn conversations): what each turn adds, how long the
//! user thinks between turns, and the chat history a turn sends.
//!
//! Pure and seeded: every random draw (turn counts, think times) is made here
//! from a given RNG, so the engine only replays the plan. The server's answer
//! of each turn is not known in advance: [`History`] takes it as it arrives.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

use super::{Prompt, RequestSpec};

/// Who said a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    /// The `role` string on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// What the user adds in one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSpec {
    /// The new user message.
    pub user: String,
    /// Its tokens as counted by the client (0 when unknown).
    pub input_len: u32,
    /// `max_completion_tokens` of this turn.
    pub output_len: u32,
}

/// One planned conversation: its turns and the think time after each turn
/// but the last (`think.len() == turns.len() - 1`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSpec {
    pub turns: Vec<TurnSpec>,
    pub think: Vec<Duration>,
}

/// Think time between a turn's answer and the next turn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThinkTime {
    /// Always this long (`--multi-turn-delay-ms`).
    Fixed(Duration),
    /// Exponentially distributed with this mean (`--multi-turn-delay-dist exponential`).
    Exponential(Duration),
}

impl ThinkTime {
    /// One think time.
    pub fn draw(&self, rng: &mut StdRng) -> Duration {
        match *self {
            ThinkTime::Fixed(d) => d,
            ThinkTime::Exponential(mean) => {
                // Inverse CDF; 1 - u lies in (0, 1], so the log is finite.
                let u: f64 = rng.random();
                Duration::from_secs_f64(-mean.as_secs_f64() * (1.0 - u).ln())
            }
        }
    }
}

/// How many turns a session has: fixed (`min == max`) or uniform in `[min, max]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnCount {
    pub min: u32,
    pub max: u32,
}

impl TurnCount {
    /// One turn count.
    pub fn draw(&self, rng: &mut StdRng) -> u32 {
        if self.min >= self.max {
            self.max.max(1)
        } else {
            rng.random_range(self.min..=self.max)
        }
    }
}

/// The session settings a workload is planned with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionParams {
    pub turns: TurnCount,
    pub think: ThinkTime,
}

/// Synthetic sessions: session `i` opens with `first[i]`; its later turns
/// take the `later` prompts in order (cycled). Turn counts and think times
/// are drawn from `rng`.
pub fn synthetic(
    first: &[RequestSpec],
    later: &[RequestSpec],
    params: &SessionParams,
    rng: &mut StdRng,
) -> Vec<SessionSpec> {
    let mut next_later = 0usize;
    first
        .iter()
        .map(|opening| {
            let n = params.turns.draw(rng) as usize;
            let mut turns = vec![turn_of(opening)];
            for _ in 1..n {
                if later.is_empty() {
                    break;
                }
                turns.push(turn_of(&later[next_later % later.len()]));
                next_later += 1;
            }
            with_think_times(turns, params.think, rng)
        })
        .collect()
}

/// A session from a conversation's user turns, with think times drawn.
pub fn with_think_times(turns: Vec<TurnSpec>, think: ThinkTime, rng: &mut StdRng) -> SessionSpec {
    let gaps = turns.len().saturating_sub(1);
    let think = (0..gaps).map(|_| think.draw(rng)).collect();
    SessionSpec { turns, think }
}

fn turn_of(spec: &RequestSpec) -> TurnSpec {
    let user = match &spec.prompt {
        Prompt::Text(t) => t.clone(),
        // Sessions carry text only: the images stay with the first request.
        Prompt::Media(m) => m.text.clone(),
        Prompt::Batch(texts) => texts.join("\n"),
        Prompt::Tokens(ids) => ids.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
        Prompt::Chat(messages) => messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    };
    TurnSpec {
        user,
        input_len: spec.prompt_len,
        output_len: spec.output_len,
    }
}

/// The conversation so far: every user message and every answer the server
/// actually gave, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    messages: Vec<ChatMessage>,
    /// Client-side token count of everything in the history.
    tokens: u32,
}

impl History {
    /// Add the user's message of the next turn.
    pub fn push_user(&mut self, turn: &TurnSpec) {
        self.tokens = self.tokens.saturating_add(turn.input_len);
        self.messages.push(ChatMessage {
            role: Role::User,
            content: turn.user.clone(),
        });
    }

    /// Add the server's answer (as streamed) of `tokens` tokens.
    pub fn push_answer(&mut self, text: String, tokens: u32) {
        self.tokens = self.tokens.saturating_add(tokens);
        self.messages.push(ChatMessage {
            role: Role::Assistant,
            content: text,
        });
    }

    /// The request of the turn just added: the whole history as chat messages.
    pub fn request(&self, turn: &TurnSpec) -> RequestSpec {
        RequestSpec {
            index: 0,
            prompt: Prompt::Chat(self.messages.clone()),
            prompt_len: self.tokens,
            output_len: turn.output_len,
        }
    }

    /// Messages so far.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// No message yet.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn spec(text: &str, len: u32, out: u32) -> RequestSpec {
        RequestSpec {
            index: 0,
            prompt: Prompt::Text(text.into()),
            prompt_len: len,
            output_len: out,
        }
    }

    fn params(min: u32, max: u32, think: ThinkTime) -> SessionParams {
        SessionParams {
            turns: TurnCount { min, max },
            think,
        }
    }

    #[test]
    fn synthetic_sessions_open_with_their_own_prompt_and_share_the_later_ones_in_order() {
        let first = [spec("a", 10, 5), spec("b", 11, 5)];
        let later = [spec("x", 3, 7), spec("y", 4, 7), spec("z", 5, 7)];
        let p = params(3, 3, ThinkTime::Fixed(Duration::from_millis(40)));
        let got = synthetic(&first, &later, &p, &mut StdRng::seed_from_u64(1));
        let users: Vec<Vec<&str>> = got
            .iter()
            .map(|s| s.turns.iter().map(|t| t.user.as_str()).collect())
            .collect();
        assert_eq!(users, vec![vec!["a", "x", "y"], vec!["b", "z", "x"]]);
        assert_eq!(got[1].turns[1].output_len, 7);
        assert_eq!(got[0].think, vec![Duration::from_millis(40); 2]);
    }

    #[test]
    fn turn_counts_stay_in_their_range_and_cover_it() {
        let count = TurnCount { min: 2, max: 5 };
        let mut rng = StdRng::seed_from_u64(7);
        let draws: Vec<u32> = (0..400).map(|_| count.draw(&mut rng)).collect();
        assert!(draws.iter().all(|n| (2..=5).contains(n)), "{draws:?}");
        for n in 2..=5 {
            assert!(draws.contains(&n), "{n} never drawn");
        }
        assert_eq!(TurnCount { min: 4, max: 4 }.draw(&mut rng), 4);
    }

    #[test]
    fn exponential_think_times_have_their_mean_and_spread() {
        let think = ThinkTime::Exponential(Duration::from_millis(100));
        let mut rng = StdRng::seed_from_u64(3);
        let ms: Vec<f64> = (0..20_000)
            .map(|_| think.draw(&mut rng).as_secs_f64() * 1e3)
            .collect();
        let mean = ms.iter().sum::<f64>() / ms.len() as f64;
        assert!((mean - 100.0).abs() < 4.0, "mean {mean} ms");
        // P(X > mean) = 1/e for an exponential, not 1/2.
        let above = ms.iter().filter(|&&x| x > 100.0).count() as f64 / ms.len() as f64;
        assert!((above - (-1f64).exp()).abs() < 0.02, "{above}");
    }

    #[test]
    fn each_turn_sends_the_whole_history_with_the_servers_answers() {
        let turns = [
            TurnSpec {
                user: "hello".into(),
                input_len: 1,
                output_len: 4,
            },
            TurnSpec {
                user: "more please".into(),
                input_len: 2,
                output_len: 4,
            },
        ];
        let mut h = History::default();
        h.push_user(&turns[0]);
        let first = h.request(&turns[0]);
        h.push_answer("the knee is here".into(), 4);
        h.push_user(&turns[1]);
        let second = h.request(&turns[1]);
        assert_eq!((first.prompt_len, second.prompt_len), (1, 7));
        let Prompt::Chat(messages) = second.prompt else {
            panic!("a chat prompt")
        };
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(messages[1].content, "the knee is here");
        assert_eq!(messages[2].content, "more please");
    }
}
