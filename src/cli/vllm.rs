//! The rest of `vllm bench serve`'s command line (vLLM 0.33): flags kneecap
//! accepts so that no vLLM command line is rejected. A few change the load
//! (`--profile`, `--lora-modules`, `--lora-assignment`, the four
//! `--random-mm-*` flags of `--dataset-name random-mm`, the four `--hf-*`
//! flags of `--dataset-name hf`); the others have no
//! meaning for kneecap, and the command layer prints one line for each one
//! given (`cmd::args::run`, through [`VllmArgs::without_meaning`]). Syntax
//! only. The committed list of every vLLM flag is
//! `tests/data/vllm-0.33-bench-serve-flags.txt`.

use clap::Args;

/// vLLM flags beyond those `RunArgs` defines itself; all hidden from `--help`
/// except the ones that work (profile, LoRA, random-mm, hf).
#[derive(Debug, Clone, Default, Args)]
pub struct VllmArgs {
    /// POST /start_profile before the run and /stop_profile after it (the
    /// server must have a profiler configured).
    #[arg(long, help_heading = "Load")]
    pub profile: bool,
    /// LoRA adapter names: each request's `model` becomes one of them.
    #[arg(long, num_args = 1.., value_name = "NAME", help_heading = "Model")]
    pub lora_modules: Vec<String>,
    /// How a request's LoRA adapter is chosen: random (seeded) or round-robin.
    #[arg(long, value_parser = ["random", "round-robin"], help_heading = "Model")]
    pub lora_assignment: Option<String>,

    // ---- accepted, no meaning for kneecap (one line each when given) ----
    #[arg(long, hide = true)]
    pub probe_request_rate: Option<f64>,
    #[arg(long, hide = true)]
    pub chat_template_kwargs: Option<String>,
    #[arg(long, hide = true)]
    pub plot_timeline: bool,
    #[arg(long, hide = true)]
    pub timeline_itl_thresholds: Option<String>,
    #[arg(long, hide = true)]
    pub plot_dataset_stats: bool,
    #[arg(long, hide = true)]
    pub enable_multimodal_chat: bool,
    #[arg(long, hide = true)]
    pub custom_ensure_client_side_data: bool,
    #[arg(long, hide = true)]
    pub spec_bench_output_len: Option<String>,
    #[arg(long, hide = true)]
    pub spec_bench_category: Option<String>,
    /// Blazedit (`--hf-name vdaita/edit_5k_char` or `edit_10k_char`): keep
    /// the rows whose `norm_distance` is at least D [default: 0].
    #[arg(long, value_name = "D", help_heading = "Dataset")]
    pub blazedit_min_distance: Option<f64>,
    /// Blazedit: keep the rows whose `norm_distance` is at most D
    /// [default: 1].
    #[arg(long, value_name = "D", help_heading = "Dataset")]
    pub blazedit_max_distance: Option<f64>,
    #[arg(long, hide = true)]
    pub asr_max_audio_len_sec: Option<String>,
    #[arg(long, hide = true)]
    pub asr_min_audio_len_sec: Option<String>,
    #[arg(long, hide = true)]
    pub bfcl_categories: Option<String>,
    #[arg(long, hide = true)]
    pub speed_bench_dataset_subset: Option<String>,
    #[arg(long, hide = true)]
    pub speed_bench_output_len: Option<String>,
    #[arg(long, hide = true)]
    pub speed_bench_category: Option<String>,

    // ---- hf (used; see cmd::args::dataset) ----
    /// hf: the Hugging Face id whose rules read --dataset-path (e.g.
    /// philschmid/mt-bench) [default: --dataset-path].
    #[arg(long, value_name = "ID", help_heading = "Dataset")]
    pub hf_name: Option<String>,
    /// hf: a subfolder of --dataset-path.
    #[arg(long, value_name = "NAME", help_heading = "Dataset")]
    pub hf_subset: Option<String>,
    /// hf: the split read from a folder (files named for it) [default: train].
    #[arg(long, value_name = "SPLIT", help_heading = "Dataset")]
    pub hf_split: Option<String>,
    /// hf: output tokens per request [default: the set's (200 InstructCoder,
    /// 256 MT-Bench, else the reference answer's)].
    #[arg(long, value_name = "N", help_heading = "Dataset")]
    pub hf_output_len: Option<u32>,

    // ---- random-mm (used; see cmd::args::dataset) ----
    /// random-mm: mean images per request [default: 1].
    #[arg(long, value_name = "N", help_heading = "Dataset")]
    pub random_mm_base_items_per_request: Option<String>,
    /// random-mm: images per request drawn uniformly in [floor(N(1-R)),
    /// ceil(N(1+R))], R in [0, 1] [default: 0.0].
    #[arg(long, value_name = "R", help_heading = "Dataset")]
    pub random_mm_num_mm_items_range_ratio: Option<String>,
    /// random-mm: most items per request by modality, a JSON object
    /// [default: {"image": 255, "video": 1}].
    #[arg(long, value_name = "JSON", help_heading = "Dataset")]
    pub random_mm_limit_mm_per_prompt: Option<String>,
    /// random-mm: image sizes and their probabilities, a Python dict
    /// {(height, width, num_frames): p, ...}; num_frames must be 1 (images)
    /// where p > 0 [default: {(256, 256, 1): 0.5, (720, 1280, 1): 0.5,
    /// (720, 1280, 16): 0.0}].
    #[arg(long, value_name = "DICT", help_heading = "Dataset")]
    pub random_mm_bucket_config: Option<String>,
}

impl VllmArgs {
    /// The flags given that have no meaning for kneecap, each with why.
    pub fn without_meaning(&self) -> Vec<(&'static str, &'static str)> {
        let mut given = self.values_given();
        given.extend(self.switches_given());
        given
    }

    /// The value flags given (in vLLM's order), each with why it is ignored.
    fn values_given(&self) -> Vec<(&'static str, &'static str)> {
        let own: [(&'static str, &Option<String>, &'static str); 2] = [
            (
                "--chat-template-kwargs",
                &self.chat_template_kwargs,
                "kneecap never applies a chat template",
            ),
            (
                "--timeline-itl-thresholds",
                &self.timeline_itl_thresholds,
                CHART,
            ),
        ];
        let datasets = self.dataset_options().map(|(flag, v)| (flag, v, DATASET));
        own.into_iter()
            .chain(datasets)
            .filter(|(_, v, _)| v.is_some())
            .map(|(flag, _, why)| (flag, why))
            .collect()
    }

    /// The options of vLLM datasets kneecap does not generate.
    fn dataset_options(&self) -> [(&'static str, &Option<String>); 8] {
        [
            ("--spec-bench-output-len", &self.spec_bench_output_len),
            ("--spec-bench-category", &self.spec_bench_category),
            ("--asr-max-audio-len-sec", &self.asr_max_audio_len_sec),
            ("--asr-min-audio-len-sec", &self.asr_min_audio_len_sec),
            ("--bfcl-categories", &self.bfcl_categories),
            (
                "--speed-bench-dataset-subset",
                &self.speed_bench_dataset_subset,
            ),
            ("--speed-bench-output-len", &self.speed_bench_output_len),
            ("--speed-bench-category", &self.speed_bench_category),
        ]
    }

    /// The switches (and the side-probe rate) given, each with why.
    fn switches_given(&self) -> Vec<(&'static str, &'static str)> {
        let switches: [(&'static str, bool, &'static str); 5] = [
            (
                "--probe-request-rate",
                self.probe_request_rate.is_some_and(|r| r > 0.0),
                "kneecap sends no side probes (its own self-check runs every step)",
            ),
            ("--plot-timeline", self.plot_timeline, CHART),
            ("--plot-dataset-stats", self.plot_dataset_stats, CHART),
            (
                "--enable-multimodal-chat",
                self.enable_multimodal_chat,
                "kneecap puts images into chat messages whenever the dataset has them (random-mm, custom rows with images)",
            ),
            (
                "--custom-ensure-client-side-data",
                self.custom_ensure_client_side_data,
                DATASET,
            ),
        ];
        switches
            .into_iter()
            .filter(|(_, on, _)| *on)
            .map(|(flag, _, why)| (flag, why))
            .collect()
    }
}

/// Why a chart flag is ignored.
const CHART: &str = "kneecap draws its own charts (kneecap sweep --html, kneecap report)";
/// Why a vLLM dataset's option is ignored.
const DATASET: &str = "an option of a vLLM dataset kneecap does not generate";
