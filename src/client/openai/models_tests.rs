//! Tests of the model listing parser (`GET /v1/models`): vLLM's and llama.cpp's shapes.
use super::*;

#[test]
fn parses_model_listings() {
    let vllm = br#"{"object":"list","data":[{"id":"served","object":"model","created":1,"owned_by":"vllm","root":"/models/x","parent":null,"max_model_len":4096,"permission":[]}]}"#;
    assert_eq!(
        parse_models(vllm),
        Ok(vec![ModelEntry {
            id: "served".into(),
            root: Some("/models/x".into()),
            max_model_len: Some(4096),
            slot_context: None,
        }])
    );
    let llama = br#"{"object":"list","data":[{"id":"smollm2.gguf","object":"model","created":1,"owned_by":"llamacpp","meta":{"n_ctx_train":8192}}],"models":[]}"#;
    assert_eq!(
        parse_models(llama),
        Ok(vec![ModelEntry {
            id: "smollm2.gguf".into(),
            root: None,
            max_model_len: None,
            slot_context: None,
        }])
    );
    // llama.cpp's `meta.n_ctx` is one slot's context; a `meta` of another shape is ignored.
    let slots = br#"{"data":[{"id":"a","meta":{"n_ctx":2048}},{"id":"m","meta":"v2"},{"id":"n","meta":{"n_ctx":"big"}}]}"#;
    let ctx: Vec<_> = parse_models(slots)
        .unwrap()
        .iter()
        .map(|m| m.slot_context)
        .collect();
    assert_eq!(ctx, [Some(2048), None, None]);
    assert_eq!(parse_models(br#"{"data":[]}"#), Ok(vec![]));
    assert!(parse_models(b"{}").is_err());
    assert!(parse_models(br#"{"data":[{"root":"x"}]}"#).is_err());
    assert!(parse_models(b"not json").is_err());
}
