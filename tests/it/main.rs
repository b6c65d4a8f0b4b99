//! Every integration test in one binary: one link of the crate instead of one
//! per file (the slow part of a fresh `cargo test` on 2 cores). Each module
//! is one former `tests/*.rs` file; `cargo test --test it MODULE::` runs one.

mod common;
mod golden_norm;

mod architecture;
mod bench_serve_default;
mod compare_cli;
mod docs_commands;
mod explain_knee;
mod faults;
mod file_datasets;
mod generator;
mod golden_json;
mod gpu_merge;
mod gpu_power;
mod h1_client;
mod interrupt;
mod kernel_stamps;
mod live_cli;
mod pooling_sim;
mod predict_cli;
mod predict_robust;
mod profile_fresh;
mod profile_predict;
mod proto_props;
mod random_mm;
mod reasoning_sim;
mod responses_sim;
mod result_types;
mod run_cli;
mod run_errors_cli;
mod shard_cli;
mod shard_sweep_cli;
mod sim_e2e;
mod sim_load;
mod sim_prefix;
mod sim_robust;
mod sim_rx_arrival;
mod sim_server;
mod sim_sessions;
mod sim_sweep_cache;
mod sim_truth;
mod spec_decode;
mod sweep_cli;
mod sweep_twin;
mod tls;
mod trace_replay;
mod vllm_flags;
