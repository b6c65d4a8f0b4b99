//! A request the simulator refuses: the HTTP status and OpenAI's error body.

/// A request the server refuses, with the HTTP status to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// OpenAI-style error `type`.
    pub kind: &'static str,
    /// Human-readable message.
    pub message: String,
}

impl ApiError {
    /// A 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: 400,
            kind: "BadRequestError",
            message: message.into(),
        }
    }

    /// The OpenAI-style JSON body: `{"error":{"message","type","param","code"}}`.
    pub fn body(&self) -> String {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": null,
                "code": self.status,
            }
        })
        .to_string()
    }
}
