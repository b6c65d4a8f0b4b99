//! Arguments to configs: each command's parsed clap arguments become its
//! validated, clap-free config here, once. Every cross-field rule lives in
//! these files, each with a message naming the flag and the fix, and each
//! with a unit test.

pub mod dataset;
pub mod gpu;
pub mod live;
pub mod predict;
pub mod profile;
pub mod run;
pub mod session;
pub mod sim;
pub mod sweep;

#[cfg(test)]
pub(crate) mod tests_support;
