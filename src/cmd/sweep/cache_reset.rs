//! `--reset-prefix-cache`: before each step, ask the server to drop its
//! prefix cache. vLLM serves `POST /reset_prefix_cache` (only when started
//! with `VLLM_SERVER_DEV_MODE=1`), SGLang `POST /flush_cache`; they are
//! tried in turn, the first that answers 2xx is kept for the later steps,
//! and a server that offers neither is told so once, in one line, after
//! which the sweep goes on without resetting.

use super::{say, Ctx};
use crate::client::http::HttpClient;
use std::sync::Mutex;

/// With `--reset-prefix-cache`, ask the server to drop its prefix cache
/// now (saying so when it cannot); whether it did.
pub(crate) async fn before_step(ctx: &Ctx<'_>) -> bool {
    let Some(reset) = &ctx.reset else {
        return false;
    };
    let (done, line) = reset.before_step(&ctx.prepared.client).await;
    if let Some(line) = line {
        say(ctx, line);
    }
    done
}

/// The reset paths, in the order they are tried.
pub(crate) const PATHS: [&str; 2] = ["/reset_prefix_cache", "/flush_cache"];

/// What the server was found to offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Untried,
    Offers(&'static str),
    Neither,
}

/// The reset, remembered across steps.
pub(crate) struct CacheReset {
    state: Mutex<State>,
}

/// What one POST got: a 2xx, "no such route", or another answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Done,
    Missing(String),
    Failed(String),
}

impl CacheReset {
    pub(crate) fn new() -> Self {
        CacheReset {
            state: Mutex::new(State::Untried),
        }
    }

    /// Ask the server to drop its prefix cache; whether it did, and a line
    /// to print (the first time, or when a reset that worked fails).
    pub(crate) async fn before_step(&self, client: &HttpClient) -> (bool, Option<String>) {
        let state = self.state.lock().map_or(State::Neither, |s| *s);
        match state {
            State::Neither => (false, None),
            State::Offers(path) => match post(client, path).await {
                Answer::Done => (true, None),
                Answer::Missing(why) | Answer::Failed(why) => (
                    false,
                    Some(format!(
                        "kneecap sweep: --reset-prefix-cache: POST {path} {why}; this step runs on whatever the cache holds"
                    )),
                ),
            },
            State::Untried => {
                let mut answers = Vec::new();
                for path in PATHS {
                    let answer = post(client, path).await;
                    let offered = !matches!(answer, Answer::Missing(_));
                    answers.push(answer);
                    if offered {
                        break;
                    }
                }
                let (next, done, line) = first_offered(&answers);
                if let Ok(mut s) = self.state.lock() {
                    *s = next;
                }
                (done, Some(line))
            }
        }
    }
}

/// The state the first round's answers (one per [`PATHS`] entry, in order)
/// leave, whether the cache was dropped, and the line that says so.
pub(crate) fn first_offered(answers: &[Answer]) -> (State, bool, String) {
    for (path, answer) in PATHS.iter().zip(answers) {
        match answer {
            Answer::Done => {
                return (
                    State::Offers(path),
                    true,
                    format!("kneecap sweep: --reset-prefix-cache: the server drops its prefix cache on POST {path}, before each step"),
                )
            }
            Answer::Failed(why) => {
                return (
                    State::Offers(path),
                    false,
                    format!("kneecap sweep: --reset-prefix-cache: POST {path} {why}; this step runs on whatever the cache holds"),
                )
            }
            Answer::Missing(_) => {}
        }
    }
    let said: Vec<String> = PATHS
        .iter()
        .zip(answers)
        .map(|(path, a)| match a {
            Answer::Missing(why) | Answer::Failed(why) => format!("{path} {why}"),
            Answer::Done => String::new(),
        })
        .collect();
    (
        State::Neither,
        false,
        format!(
            "kneecap sweep: --reset-prefix-cache: the server offers neither POST /reset_prefix_cache (vLLM, started with VLLM_SERVER_DEV_MODE=1) nor POST /flush_cache (SGLang) ({}); the steps run without a reset",
            said.join(", ")
        ),
    )
}

/// POST `path` with an empty body.
async fn post(client: &HttpClient, path: &str) -> Answer {
    match client.post_empty(path).await {
        Ok((status, _)) if (200..300).contains(&status) => Answer::Done,
        // No such route, or not this method: the server does not offer it.
        Ok((status @ (404 | 405 | 501), _)) => Answer::Missing(format!("answered HTTP {status}")),
        Ok((status, body)) => Answer::Failed(format!(
            "answered HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
        )),
        Err(e) => Answer::Failed(format!("failed: {e:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing() -> Answer {
        Answer::Missing("answered HTTP 404".into())
    }

    #[test]
    fn the_first_path_that_answers_is_kept() {
        let (state, done, line) = first_offered(&[Answer::Done, missing()]);
        assert_eq!((state, done), (State::Offers("/reset_prefix_cache"), true));
        assert!(line.contains("POST /reset_prefix_cache"), "{line}");
        let (state, done, _) = first_offered(&[missing(), Answer::Done]);
        assert_eq!((state, done), (State::Offers("/flush_cache"), true));
    }

    #[test]
    fn a_server_with_neither_is_told_once_in_one_line() {
        let (state, done, line) = first_offered(&[missing(), missing()]);
        assert_eq!((state, done), (State::Neither, false));
        assert_eq!(line.lines().count(), 1);
        for want in [
            "neither",
            "VLLM_SERVER_DEV_MODE=1",
            "/flush_cache answered HTTP 404",
        ] {
            assert!(line.contains(want), "{want}: {line}");
        }
    }

    #[test]
    fn a_route_that_exists_but_fails_is_kept_and_named() {
        // vLLM refuses while requests still hold blocks: the route exists.
        let busy = Answer::Failed("answered HTTP 500: blocks in use".into());
        let (state, done, line) = first_offered(&[busy, missing()]);
        assert_eq!((state, done), (State::Offers("/reset_prefix_cache"), false));
        assert!(line.contains("HTTP 500: blocks in use"), "{line}");
    }
}
