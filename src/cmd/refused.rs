//! What kneecap says when the server refuses the workload's requests (an
//! HTTP 4xx other than 408 / 429, [`crate::metrics::refusal`]): one line with
//! the server's own message and what to change, for the ready check and for
//! a level whose first requests were all refused the same way.

use crate::metrics::refusal::{Refusal, SAME_REFUSALS_TO_STOP};

/// The line that stops a run or sweep whose first requests were all refused.
pub fn level_refused(r: &Refusal) -> String {
    refused_line(
        &format!(
            "the first {} requests were all",
            r.count.max(SAME_REFUSALS_TO_STOP)
        ),
        r.status,
        &r.message,
    )
}

/// The line that stops the ready check when its request is refused.
pub fn ready_check_refused(status: u16, message: &str) -> String {
    refused_line(
        "the ready check's request (the workload's first) was",
        status,
        message,
    )
}

fn refused_line(what: &str, status: u16, message: &str) -> String {
    format!(
        "{what} refused by the server with HTTP {status}: \"{}\"; {}",
        message.trim(),
        fix(status, message)
    )
}

/// What to change, from the status and the server's message.
fn fix(status: u16, message: &str) -> &'static str {
    let m = message.to_lowercase();
    let too_long = [
        "context length",
        "context window",
        "max_model_len",
        "maximum length",
        "too long",
        "too many tokens",
        "must have less than",
    ]
    .iter()
    .any(|k| m.contains(k));
    match status {
        413 => "the requests are larger than the server accepts: send shorter ones (e.g. a smaller --random-input-len) or raise the server's request size limit",
        _ if too_long => "the requests are longer than the server's context: send shorter ones (e.g. a smaller --random-input-len or --random-output-len) or start the server with a longer context (vLLM: --max-model-len)",
        401 | 403 => "the server does not accept the credentials: check the API key (OPENAI_API_KEY) and any --header it needs",
        404 => "check --base-url, --endpoint and --model (GET /v1/models lists the models the server serves)",
        _ => "the server rejects these requests as kneecap sends them: check --endpoint, --model, --backend and the body options (--extra-body, the sampling flags)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_length_refusal_names_the_input_length_and_the_servers_limit() {
        let line = level_refused(&Refusal {
            status: 400,
            message: "This model's maximum context length is 4096 tokens. However, your request has 4096 input tokens.".into(),
            count: SAME_REFUSALS_TO_STOP,
        });
        assert!(
            line.starts_with("the first 10 requests were all refused by the server with HTTP 400: \"This model's maximum context length is 4096 tokens."),
            "{line}"
        );
        assert!(
            line.contains("--random-input-len") && line.contains("--max-model-len"),
            "{line}"
        );
        assert!(!line.contains('\n'), "one line");
    }

    #[test]
    fn each_kind_of_refusal_gets_its_own_fix() {
        let tgi = "Input validation error: `inputs` must have less than 2048 tokens";
        assert!(ready_check_refused(422, tgi).contains("--max-model-len"));
        assert!(ready_check_refused(413, "Payload Too Large").contains("request size limit"));
        assert!(ready_check_refused(401, "invalid key").contains("OPENAI_API_KEY"));
        assert!(ready_check_refused(404, "The model `x` does not exist.").contains("--model"));
        let other = ready_check_refused(400, "temperature must be positive");
        assert!(other.contains("--extra-body"), "{other}");
        assert!(other.starts_with("the ready check's request (the workload's first) was refused by the server with HTTP 400: \"temperature must be positive\""), "{other}");
    }
}
