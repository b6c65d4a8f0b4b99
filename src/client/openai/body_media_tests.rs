//! The chat body of a prompt with images: vLLM's shape (one user message,
//! the text part first, then one `image_url` part per image).

use super::*;
use crate::workload::media::{ImageUrl, MediaPrompt};
use std::sync::Arc;

fn media() -> Prompt {
    let pieces: Vec<Arc<str>> = vec![
        "data:image/jpeg;base64,".into(),
        "/9j/".into(),
        "AAAA".into(),
    ];
    Prompt::Media(MediaPrompt {
        text: "what is \"this\"?".into(),
        images: vec![
            ImageUrl::from_pieces(pieces),
            ImageUrl::whole("https://example.com/b.png"),
        ],
    })
}

#[test]
fn chat_media_prompt_is_a_text_part_then_image_parts() {
    let opts = BodyOptions {
        model: "m".into(),
        ignore_eos: true,
        ..BodyOptions::default()
    };
    let body = request_body(Api::Chat, &opts, &media(), 16);
    let text = String::from_utf8(body).unwrap();
    let expected = concat!(
        r#"{"model":"m","messages":[{"role":"user","content":["#,
        r#"{"type":"text","text":"what is \"this\"?"},"#,
        r#"{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/AAAA"}},"#,
        r#"{"type":"image_url","image_url":{"url":"https://example.com/b.png"}}]}],"#,
        r#""max_completion_tokens":16,"stream":true,"stream_options":{"include_usage":true},"#,
        r#""ignore_eos":true}"#
    );
    assert_eq!(text, expected);
}

#[test]
fn other_apis_send_the_text_alone() {
    let opts = BodyOptions::default();
    let body = request_body(Api::Completions, &opts, &media(), 4);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["prompt"], "what is \"this\"?");
    assert_eq!(input_sequences(Api::Chat, &media()), 1);
}
