//! Which API a run speaks: vLLM's `--backend` names ([`Backend`]) and the
//! wire APIs they map to ([`Api`]). The one place that answers "is this a
//! pooling backend" ([`Api::is_pooling`]; a backend asks its API,
//! [`Backend::is_pooling`], and a result's backend name asks its backend,
//! [`Backend::is_pooling_name`]). Pure.

/// Which API the requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/completions` (`--backend vllm|openai`).
    Completions,
    /// `/v1/chat/completions` (`--backend openai-chat`).
    Chat,
    /// `/v1/responses` (`--backend openai-responses`): typed SSE events.
    Responses,
    /// `/v1/embeddings` (`--backend openai-embeddings`): one JSON answer, no stream.
    Embeddings,
    /// vLLM's `/v1/rerank` (`--backend vllm-rerank`): a query and documents, one JSON answer.
    Rerank,
    /// vLLM's `/pooling` (`--backend vllm-pooling`): one JSON answer, no stream.
    Pooling,
}

impl Api {
    /// A pooling API (embeddings, rerank, pooling): the answer is one JSON
    /// body, so a request has an end-to-end latency and nothing streamed.
    pub fn is_pooling(self) -> bool {
        matches!(self, Api::Embeddings | Api::Rerank | Api::Pooling)
    }
}

/// Which API family a run speaks (vLLM's `--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// vLLM's own name for its completions backend.
    Vllm,
    /// OpenAI completions (`/v1/completions`).
    Openai,
    /// OpenAI chat completions (`/v1/chat/completions`).
    OpenaiChat,
    /// OpenAI Responses API (`/v1/responses`).
    OpenaiResponses,
    /// OpenAI embeddings (`/v1/embeddings`), not streamed.
    OpenaiEmbeddings,
    /// vLLM's rerank API (`/v1/rerank`), not streamed.
    VllmRerank,
    /// vLLM's pooling API (`/pooling`), not streamed.
    VllmPooling,
}

impl Backend {
    /// Every backend kneecap speaks.
    pub const ALL: [Backend; 7] = [
        Backend::Vllm,
        Backend::Openai,
        Backend::OpenaiChat,
        Backend::OpenaiResponses,
        Backend::OpenaiEmbeddings,
        Backend::VllmRerank,
        Backend::VllmPooling,
    ];

    /// The name vLLM writes in its result JSON (`backend`, `endpoint_type`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Vllm => "vllm",
            Backend::Openai => "openai",
            Backend::OpenaiChat => "openai-chat",
            Backend::OpenaiResponses => "openai-responses",
            Backend::OpenaiEmbeddings => "openai-embeddings",
            Backend::VllmRerank => "vllm-rerank",
            Backend::VllmPooling => "vllm-pooling",
        }
    }

    /// The backend vLLM calls `name` (a result's `backend` key), if kneecap
    /// speaks it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The wire API this backend speaks.
    pub fn api(self) -> Api {
        match self {
            Backend::OpenaiChat => Api::Chat,
            Backend::OpenaiResponses => Api::Responses,
            Backend::Vllm | Backend::Openai => Api::Completions,
            Backend::OpenaiEmbeddings => Api::Embeddings,
            Backend::VllmRerank => Api::Rerank,
            Backend::VllmPooling => Api::Pooling,
        }
    }

    /// A pooling backend (one JSON answer per request: E2EL only).
    pub fn is_pooling(self) -> bool {
        self.api().is_pooling()
    }

    /// Whether a result's `backend` name is a pooling backend's (a name
    /// kneecap does not speak is not).
    pub fn is_pooling_name(name: &str) -> bool {
        Self::from_name(name).is_some_and(Backend::is_pooling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_is_found_by_its_name() {
        for b in Backend::ALL {
            assert_eq!(Backend::from_name(b.name()), Some(b));
        }
        assert_eq!(Backend::from_name("tgi"), None);
    }

    #[test]
    fn the_pooling_backends_are_embeddings_rerank_and_pooling() {
        let pooling: Vec<&str> = Backend::ALL
            .into_iter()
            .filter(|b| b.is_pooling())
            .map(Backend::name)
            .collect();
        assert_eq!(
            pooling,
            ["openai-embeddings", "vllm-rerank", "vllm-pooling"]
        );
        for b in Backend::ALL {
            assert_eq!(Backend::is_pooling_name(b.name()), b.is_pooling(), "{b:?}");
        }
        assert!(!Backend::is_pooling_name("tgi"));
    }
}
