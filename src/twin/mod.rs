//! The server's twin: the simulator's engine model, run in virtual time, as a
//! stand-in for a server. It finds the knee a workload would have (`knee`),
//! predicts it with an interval from the parameters' uncertainty
//! (`predict`), over a grid of shapes (`grid`), and says which resource binds
//! it and what moves it (`explain`); a measured sweep's knee is explained from
//! the server's gauges (`measured`). Pure: no clock, no socket, no file;
//! randomness is seeded.

pub mod explain;
pub mod grid;
pub mod html;
pub mod json;
pub mod knee;
pub mod measured;
pub mod predict;
pub mod render;
