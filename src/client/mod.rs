//! Client: everything that speaks the OpenAI streaming protocol. `sse`,
//! `openai` and `h1::wire` are sans-IO; `h1` (the streaming POSTs) and `http`
//! (requests and records; hyper for plain GETs) do the network I/O.

pub mod h1;
pub mod http;
pub mod openai;
pub mod scrape;
pub mod sse;
