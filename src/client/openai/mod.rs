//! OpenAI-compatible wire format: the request bodies we send (`body.rs`) and
//! what we read back (`chunk.rs`). Owns the JSON that goes on the wire. Sans-IO:
//! no sockets, no clock.

mod body;
mod chunk;

pub use body::*;
pub use chunk::*;

#[cfg(test)]
mod tests;
