//! Client: everything that speaks the OpenAI streaming protocol. `sse` and
//! `openai` are sans-IO; `http` is the only module that does network I/O.

pub mod http;
pub mod openai;
pub mod scrape;
pub mod sse;
