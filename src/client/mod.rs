//! Client: everything that speaks the OpenAI protocols (streamed, and the
//! pooling APIs' single JSON answers). `sse`, `openai`, `reader`, `h1::wire`
//! and `net::proxy` are sans-IO; `net` (TCP, proxy tunnel, TLS), `h1` (the
//! POSTs) and `http` (requests and records; hyper for plain GETs) do the
//! network I/O; `limits` checks the open-file limit the sockets need.

pub mod h1;
pub mod http;
pub mod limits;
pub mod net;
pub mod openai;
pub mod prom_text;
mod reader;
pub mod scrape;
pub mod scrape_gpu;
pub mod scrape_spec;
pub mod server_info;
pub mod sse;
