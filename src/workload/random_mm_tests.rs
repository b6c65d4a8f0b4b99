//! random-mm: item counts, bucket draws and limits (seeded), and the flag parsers.

use super::*;
use crate::workload::dataset::dataset_rng;
use crate::workload::random_mm_flags::{
    parse_base_items, parse_buckets, parse_limits, parse_range_ratio, DEFAULT_BUCKETS,
    DEFAULT_LIMITS,
};

fn params(base_items: u32, ratio: f64, limits: &str, buckets: &str) -> MmParams {
    MmParams {
        text: RandomParams {
            input_len: 8,
            output_len: 4,
            range_ratio_input: 0.0,
            range_ratio_output: 0.0,
            prefix_len: 0,
        },
        base_items,
        range_ratio: ratio,
        limits: parse_limits(limits).unwrap(),
        buckets: parse_buckets(buckets).unwrap(),
    }
}

fn images(spec: &RequestSpec) -> &[ImageUrl] {
    match &spec.prompt {
        Prompt::Media(m) => &m.images,
        _ => &[],
    }
}

#[test]
fn item_counts_cover_the_range_uniformly() {
    // n = 4, r = 0.5: [2, 6], each of the 5 values about 1/5 of the time.
    let p = params(4, 0.5, r#"{"image": 10}"#, "{(16, 16, 1): 1.0}");
    let live = p.live_buckets().unwrap();
    assert_eq!(p.item_range(&live).unwrap(), (2, 6));
    let reqs = generate(&p, 500, None, &mut dataset_rng(1)).unwrap();
    let mut seen = [0usize; 8];
    for r in &reqs {
        seen[images(r).len()] += 1;
    }
    assert_eq!(seen[0] + seen[1] + seen[7], 0, "{seen:?}");
    for (k, n) in seen.iter().enumerate().take(7).skip(2) {
        assert!(
            (60..=140).contains(n),
            "{k} items {n} times of 500: {seen:?}"
        );
    }
}

#[test]
fn the_top_of_the_range_is_clamped_to_the_limits() {
    let p = params(4, 1.0, r#"{"image": 3, "video": 9}"#, "{(16, 16, 1): 1.0}");
    let live = p.live_buckets().unwrap();
    // ceil(4·2) = 8, but only images are live: at most 3 (video's 9 not counted).
    assert_eq!(p.item_range(&live).unwrap(), (0, 3));
    let reqs = generate(&p, 200, None, &mut dataset_rng(2)).unwrap();
    assert!(reqs.iter().all(|r| images(r).len() <= 3));
    assert!(reqs.iter().any(|r| images(r).len() == 3));
    assert!(reqs.iter().any(|r| images(r).is_empty()));
    let msg = params(5, 0.0, r#"{"image": 3}"#, "{(16, 16, 1): 1.0}")
        .item_range(&live)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("--random-mm-limit-mm-per-prompt"), "{msg}");
}

#[test]
fn buckets_are_drawn_by_probability_and_zeros_dropped() {
    let p = params(
        1,
        0.0,
        r#"{"image": 5, "video": 1}"#,
        "{(16, 16, 1): 0.25, (32, 16, 1): 0.75, (720, 1280, 16): 0.0}",
    );
    let live = p.live_buckets().unwrap();
    assert_eq!(live.len(), 2, "the zero video bucket is dropped");
    let mut rng = dataset_rng(3);
    let mut small = 0;
    for _ in 0..2000 {
        let picks = draw_buckets(&live, &p.limits, 1, &mut rng);
        small += usize::from(picks == [0]);
    }
    assert!(
        (400..=600).contains(&small),
        "{small} of 2000, expected ~500"
    );
}

#[test]
fn a_full_modality_leaves_the_draw() {
    let limits = parse_limits(r#"{"image": 2}"#).unwrap();
    let live = parse_buckets("{(16, 16, 1): 0.5, (32, 32, 1): 0.5}").unwrap();
    let mut rng = dataset_rng(4);
    for _ in 0..50 {
        assert_eq!(draw_buckets(&live, &limits, 5, &mut rng).len(), 2);
    }
    let none = parse_limits(r#"{"image": 0}"#).unwrap();
    assert!(draw_buckets(&live, &none, 3, &mut rng).is_empty());
}

#[test]
fn images_have_their_bucket_size_and_are_all_different() {
    let p = params(2, 0.0, r#"{"image": 2}"#, "{(40, 24, 1): 1.0}");
    let reqs = generate(&p, 6, None, &mut dataset_rng(5)).unwrap();
    let urls: Vec<String> = reqs
        .iter()
        .flat_map(|r| images(r).iter().map(ToString::to_string))
        .collect();
    assert_eq!(urls.len(), 12);
    let distinct: std::collections::HashSet<&String> = urls.iter().collect();
    assert_eq!(distinct.len(), 12, "an image repeated");
    assert!(urls
        .iter()
        .all(|u| u.starts_with("data:image/jpeg;base64,/9j/")));
    // Same seed, same workload; the text is random's.
    let again = generate(&p, 6, None, &mut dataset_rng(5)).unwrap();
    assert_eq!(reqs, again);
    let Prompt::Media(m) = &reqs[0].prompt else {
        panic!("no images")
    };
    assert_eq!(m.text.split(' ').count(), 8);
}

#[test]
fn video_buckets_and_unlimited_modalities_are_refused() {
    let video = params(1, 0.0, DEFAULT_LIMITS, "{(720, 1280, 16): 1.0}");
    let msg = video.live_buckets().unwrap_err().to_string();
    assert!(
        msg.contains("--random-mm-bucket-config") && msg.contains("video"),
        "{msg}"
    );
    let no_limit = params(1, 0.0, r#"{"video": 1}"#, "{(16, 16, 1): 1.0}");
    let msg = no_limit.live_buckets().unwrap_err().to_string();
    assert!(
        msg.contains("--random-mm-limit-mm-per-prompt") && msg.contains("\"image\""),
        "{msg}"
    );
}

#[test]
fn flag_parsers_take_vllms_syntax() {
    let b = parse_buckets(DEFAULT_BUCKETS).unwrap();
    assert_eq!(b.len(), 3);
    assert_eq!(
        (b[1].height, b[1].width, b[1].frames, b[1].prob),
        (720, 1280, 1, 0.5)
    );
    let b = parse_buckets("{(224,224,1):1, (224, 224, 1): 2.0,}").unwrap();
    assert_eq!(b.len(), 1, "a later duplicate key wins");
    assert_eq!(b[0].prob, 2.0);
    let l = parse_limits(r#"{"image": 3, "video": 0}"#).unwrap();
    assert_eq!((l["image"], l["video"]), (3, 0));
    assert_eq!(parse_base_items(" 2 ").unwrap(), 2);
    assert_eq!(parse_range_ratio("1").unwrap(), 1.0);
}

#[test]
fn flag_parsers_name_the_flag_on_bad_input() {
    let cases: Vec<(anyhow::Error, &str)> = vec![
        (
            parse_buckets("[(1, 1, 1)]").unwrap_err(),
            "--random-mm-bucket-config",
        ),
        (
            parse_buckets("{(1, 1): 1.0}").unwrap_err(),
            "--random-mm-bucket-config",
        ),
        (
            parse_buckets("{(8, 8, 1): -0.5}").unwrap_err(),
            "--random-mm-bucket-config",
        ),
        (
            parse_buckets("{(8, 8, 1): 0.0}").unwrap_err(),
            "--random-mm-bucket-config",
        ),
        (
            parse_buckets("{(0, 8, 1): 1}").unwrap_err(),
            "--random-mm-bucket-config",
        ),
        (
            parse_limits(r#"{"image": -1}"#).unwrap_err(),
            "--random-mm-limit-mm-per-prompt",
        ),
        (
            parse_limits("image=3").unwrap_err(),
            "--random-mm-limit-mm-per-prompt",
        ),
        (
            parse_base_items("1.5").unwrap_err(),
            "--random-mm-base-items-per-request",
        ),
        (
            parse_range_ratio("1.5").unwrap_err(),
            "--random-mm-num-mm-items-range-ratio",
        ),
    ];
    for (err, flag) in cases {
        let msg = err.to_string();
        assert!(msg.starts_with(flag) && !msg.contains('\n'), "{msg}");
    }
}
