//! OpenAI-compatible wire format: which API a run speaks (`api.rs`), the
//! request bodies we send (`body.rs`) and
//! what we read back (`chunk.rs`; the Responses API's typed events in
//! `event.rs`; the pooling APIs' single answers in `pooling.rs`). Owns the
//! JSON that goes on the wire. Sans-IO: no sockets, no clock.

mod api;
mod body;
mod chunk;
mod event;
mod pooling;

pub use api::*;
pub use body::*;
pub use chunk::*;
pub use event::*;
pub use pooling::*;

#[cfg(test)]
mod models_tests;
#[cfg(test)]
mod tests;
