//! Compare: `kneecap report` (re-render one saved result) and `kneecap
//! compare` (two results side by side, with significance and `--fail-if`).
//!
//! Everything here is pure; the command layer reads the files, prints and
//! writes the HTML report:
//!
//! - [`input`]: lenient loading of a sweep JSON or a vLLM-style run JSON.
//! - [`render`]: `report`'s text / Markdown / CSV / JSON renderings.
//! - [`sweeps`] and [`runs`]: the two comparisons and their renderings.
//! - [`stats`]: bootstrap and Poisson intervals, knee-bracket overlap.
//! - [`rule`]: `--fail-if` parsing and judging.
//! - [`layout`]: the small text / Markdown / CSV table shared by all of them.

pub mod input;
pub mod layout;
pub mod render;
pub mod rule;
pub mod runs;
pub mod stats;
pub mod sweeps;

pub use render::Format;
