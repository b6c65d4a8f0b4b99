//! Tests of `result::gpu`: the counter's delta, the trapezoid rule, the
//! sums over GPUs and hosts, and the per-token division.

use super::*;
use crate::client::scrape_gpu::GpuGauges;

fn gpu(power: f64, energy_mj: Option<f64>) -> GpuGauges {
    GpuGauges {
        power_w: Some(power),
        util_pct: Some(power / 10.0),
        fb_used_mib: Some(1000.0 + power),
        energy_mj,
    }
}

fn host(gpus: &[GpuGauges]) -> Option<HostGpus> {
    Some(
        gpus.iter()
            .enumerate()
            .map(|(i, g)| (i.to_string(), *g))
            .collect(),
    )
}

fn sample(t_s: f64, hosts: Vec<Option<HostGpus>>) -> GpuSample {
    GpuSample { t_s, hosts }
}

#[test]
fn the_trapezoid_rule_is_exact_on_a_ramp() {
    // p(t) = 100 + 50 t over [0, 4]: ∫ = 400 + 25·16 = 800 J.
    let pts: Vec<(f64, f64)> = (0..=8)
        .map(|i| i as f64 * 0.5)
        .map(|t| (t, 100.0 + 50.0 * t))
        .collect();
    assert!((trapezoid(&pts) - 800.0).abs() < 1e-9);
    assert_eq!(trapezoid(&pts[..1]), 0.0);
}

#[test]
fn the_counter_delta_wins_when_every_gpu_has_it() {
    // Two hosts, three GPUs; the counters rise by 3000, 1000 and 500 J in
    // 10 s while the power samples say something else entirely.
    let s = [
        sample(
            0.0,
            vec![
                host(&[gpu(100.0, Some(5e6)), gpu(50.0, Some(1e6))]),
                host(&[gpu(10.0, Some(0.0))]),
            ],
        ),
        sample(
            10.0,
            vec![
                host(&[gpu(300.0, Some(8e6)), gpu(50.0, Some(2e6))]),
                host(&[gpu(30.0, Some(5e5))]),
            ],
        ),
    ];
    let g = GpuStats::from_samples(&s).unwrap();
    assert_eq!(g.source, EnergySource::Counter);
    assert_eq!((g.gpus, g.samples), (3, 2));
    assert!((g.energy_j - 4500.0).abs() < 1e-9);
    assert!((g.mean_power_w - 450.0).abs() < 1e-9);
    assert_eq!(g.peak_power_w, 380.0);
    assert_eq!(g.peak_memory_mib, Some(3380.0));
    let util = (10.0 + 5.0 + 1.0 + 30.0 + 5.0 + 3.0) / 6.0;
    assert!((g.mean_util_pct.unwrap() - util).abs() < 1e-9);
}

#[test]
fn one_gpu_without_the_counter_or_a_reset_falls_back_to_the_power_samples() {
    // GPU 0 ramps 100 → 200 W over 10 s; GPU 1 draws nothing; GPU 0
    // exports the counter or not, GPU 1 never does.
    let ramp = |with: bool| -> Vec<GpuSample> {
        (0..=10)
            .map(|i| {
                let t = i as f64;
                let e = with.then_some(1e6 * t);
                sample(t, vec![host(&[gpu(100.0 + 10.0 * t, e), gpu(0.0, None)])])
            })
            .collect()
    };
    for s in [ramp(false), ramp(true)] {
        let g = GpuStats::from_samples(&s).unwrap();
        // ∫ (100 + 10 t) over [0, 10] = 1000 + 500 = 1500 J.
        assert_eq!(g.source, EnergySource::PowerSamples);
        assert!((g.energy_j - 1500.0).abs() < 1e-9, "{}", g.energy_j);
        assert!((g.mean_power_w - 150.0).abs() < 1e-9);
    }
    let mut reset = ramp(true);
    reset.truncate(3);
    for (s, e) in reset.iter_mut().zip([Some(5.0), Some(6.0), Some(0.5)]) {
        s.hosts[0].as_mut().unwrap().get_mut("1").unwrap().energy_mj = e;
    }
    let g = GpuStats::from_samples(&reset).unwrap();
    assert_eq!(g.source, EnergySource::PowerSamples, "a counter went back");
}

#[test]
fn a_failed_host_scrape_leaves_the_sample_out() {
    let s = [
        sample(
            0.0,
            vec![host(&[gpu(100.0, None)]), host(&[gpu(100.0, None)])],
        ),
        sample(1.0, vec![host(&[gpu(900.0, None)]), None]),
        sample(
            2.0,
            vec![host(&[gpu(100.0, None)]), host(&[gpu(100.0, None)])],
        ),
    ];
    let g = GpuStats::from_samples(&s).unwrap();
    assert_eq!((g.samples, g.failed_samples), (2, 1));
    assert!((g.mean_power_w - 200.0).abs() < 1e-9);
    assert_eq!(g.peak_power_w, 200.0);
}

#[test]
fn too_few_samples_give_nothing_and_work_divides_the_energy() {
    assert_eq!(GpuStats::from_samples(&[]), None);
    let one = [sample(0.0, vec![host(&[gpu(1.0, None)])])];
    assert_eq!(GpuStats::from_samples(&one), None);
    let none = [sample(0.0, vec![None]), sample(1.0, vec![None])];
    assert_eq!(GpuStats::from_samples(&none), None);
    let two = [
        sample(0.0, vec![host(&[gpu(200.0, None)])]),
        sample(2.0, vec![host(&[gpu(200.0, None)])]),
    ];
    let g = GpuStats::from_samples(&two).unwrap().with_work(160, 4);
    assert_eq!(g.joules_per_output_token, Some(2.5));
    assert_eq!(g.joules_per_request, Some(100.0));
    let idle = GpuStats::from_samples(&two).unwrap().with_work(0, 0);
    assert_eq!(
        (idle.joules_per_output_token, idle.joules_per_request),
        (None, None)
    );
}
