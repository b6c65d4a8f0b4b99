//! Client: everything that speaks the OpenAI streaming protocol. `sse`,
//! `openai` and `h1::wire` are sans-IO; `h1` (the streaming POSTs) and `http`
//! (requests and records; hyper for plain GETs) do the network I/O; `limits`
//! checks the open-file limit the sockets need.

pub mod h1;
pub mod http;
pub mod limits;
pub mod openai;
pub mod scrape;
pub mod sse;
