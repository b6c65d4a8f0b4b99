//! The Responses API (`POST /v1/responses`) as the simulator streams it:
//! `response.created`, one `response.output_text.delta` per answer token (a
//! `response.reasoning_text.delta` per reasoning token, as vLLM streams
//! reasoning there), then `response.completed` with usage. No `[DONE]`.
//! Pure: values in, strings out.

use super::api::ResponseIds;

impl ResponseIds {
    /// `response.created` (not a token event).
    pub fn responses_created_event(&self) -> String {
        format!(
            "event: response.created\ndata: {{\"type\":\"response.created\",\"sequence_number\":0,\"response\":{}}}\n\n",
            self.response_object("in_progress", "", None)
        )
    }

    /// One text delta (`reasoning`: a reasoning delta) with its sequence number.
    pub fn responses_delta_event(&self, text: &str, reasoning: bool, seq: u32) -> String {
        let kind = if reasoning {
            "response.reasoning_text.delta"
        } else {
            "response.output_text.delta"
        };
        format!(
            "event: {kind}\ndata: {{\"type\":\"{kind}\",\"item_id\":\"msg_{}\",\"output_index\":0,\"content_index\":0,\"delta\":\"{text}\",\"sequence_number\":{seq}}}\n\n",
            self.id
        )
    }

    /// `response.completed` with usage (`reasoning` of the `completion` tokens).
    pub fn responses_completed_event(
        &self,
        prompt: u32,
        completion: u32,
        reasoning: u32,
        seq: u32,
    ) -> String {
        let usage = (prompt, completion, reasoning);
        format!(
            "event: response.completed\ndata: {{\"type\":\"response.completed\",\"sequence_number\":{seq},\"response\":{}}}\n\n",
            self.response_object("completed", "", Some(usage))
        )
    }

    /// The non-streamed response: the whole answer `text` and usage.
    pub fn responses_full(&self, text: &str, prompt: u32, completion: u32) -> String {
        self.response_object("completed", text, Some((prompt, completion, 0)))
    }

    fn response_object(&self, status: &str, text: &str, usage: Option<(u32, u32, u32)>) -> String {
        let output = if text.is_empty() {
            "[]".to_owned()
        } else {
            format!(
                "[{{\"type\":\"message\",\"id\":\"msg_{}\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{{\"type\":\"output_text\",\"text\":\"{text}\",\"annotations\":[]}}]}}]",
                self.id
            )
        };
        let usage = match usage {
            None => "null".to_owned(),
            Some((p, c, r)) => format!(
                "{{\"input_tokens\":{p},\"input_tokens_details\":{{\"cached_tokens\":0}},\"output_tokens\":{c},\"output_tokens_details\":{{\"reasoning_tokens\":{r}}},\"total_tokens\":{}}}",
                u64::from(p) + u64::from(c)
            ),
        };
        format!(
            "{{\"id\":\"{}\",\"object\":\"response\",\"created_at\":{},\"model\":{},\"status\":\"{status}\",\"output\":{output},\"usage\":{usage}}}",
            self.id, self.created, self.model_json
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::Endpoint;
    use super::*;
    use serde_json::Value;

    fn data(event: &str) -> Value {
        let line = event
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap();
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn events_are_valid_json_with_the_spec_types() {
        let ids = ResponseIds::new(Endpoint::Responses, 3, 0, "m");
        assert!(ids.id.starts_with("resp_"));
        assert_eq!(
            data(&ids.responses_created_event())["type"],
            "response.created"
        );
        let d = data(&ids.responses_delta_event(" tok", false, 1));
        assert_eq!(
            (d["type"].as_str(), d["delta"].as_str()),
            (Some("response.output_text.delta"), Some(" tok"))
        );
        let r = data(&ids.responses_delta_event(" hm", true, 2));
        assert_eq!(r["type"], "response.reasoning_text.delta");
        let c = data(&ids.responses_completed_event(5, 9, 4, 10));
        assert_eq!(c["response"]["usage"]["output_tokens"], 9);
        assert_eq!(c["response"]["usage"]["input_tokens"], 5);
        assert_eq!(
            c["response"]["usage"]["output_tokens_details"]["reasoning_tokens"],
            4
        );
        let full: Value = serde_json::from_str(&ids.responses_full(" a b", 5, 2)).unwrap();
        assert_eq!(full["output"][0]["content"][0]["text"], " a b");
        assert_eq!(full["usage"]["total_tokens"], 7);
    }
}
