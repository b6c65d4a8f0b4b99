//! Tests of the alarm queue (pure, instants made up) and the alarm thread
//! (real time, asserting order, completeness and never early; no timed bounds).

use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

#[test]
fn every_alarm_already_due_fires_in_one_wake_in_due_order() {
    let t = Instant::now();
    let mut q = AlarmQueue::default();
    for (at, name) in [(9, "i"), (1, "b"), (5, "e"), (1, "c"), (0, "a")] {
        q.push(t + ms(at), name);
    }
    assert_eq!(q.next_at(), Some(t));
    assert_eq!(
        q.pop_due(t + ms(1)),
        ["a", "b", "c"],
        "equal instants keep registration order"
    );
    assert!(
        q.pop_due(t + ms(4)).is_empty(),
        "nothing new is due before 5 ms"
    );
    assert_eq!(q.next_at(), Some(t + ms(5)));
    q.push(t + ms(2), "late registration, already due");
    assert_eq!(
        q.pop_due(t + ms(100)),
        ["late registration, already due", "e", "i"]
    );
    assert!(q.is_empty() && q.next_at().is_none());
}

#[test]
fn an_earlier_alarm_registered_later_comes_first() {
    let t = Instant::now();
    let mut q = AlarmQueue::default();
    q.push(t + ms(1000), 1);
    q.push(t + ms(10), 2);
    assert_eq!(q.next_at(), Some(t + ms(10)));
    assert_eq!(q.len(), 2);
    assert_eq!(q.pop_due(t + ms(10)), [2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_wakes_every_task_never_early_and_in_due_order() {
    let (alarms, thread) = Alarms::spawn().unwrap();
    let base = Instant::now() + ms(20);
    let mut tasks = tokio::task::JoinSet::new();
    // 300 waits over 60 ms, registered out of order, many at the same instant.
    for i in 0..300u64 {
        let at = base + Duration::from_micros((i * 7919) % 60_000 / 500 * 500);
        let a = alarms.clone();
        tasks.spawn(async move {
            let fired = a.wait(at).await;
            (at, fired, Instant::now())
        });
    }
    drop(alarms);
    let mut got = Vec::new();
    while let Some(r) = tasks.join_next().await {
        got.push(r.unwrap());
    }
    assert_eq!(got.len(), 300, "every waiting task woke");
    for (at, fired, woke) in &got {
        let f = fired.expect("the thread fired it (not the fallback timer)");
        assert!(f.at >= *at, "fired before its due time");
        assert!(*woke >= *at, "a task woke before its due time");
    }
    got.sort_by_key(|(_, f, _)| f.map(|f| f.order));
    let orders: Vec<u64> = got
        .iter()
        .filter_map(|(_, f, _)| f.map(|f| f.order))
        .collect();
    let expect: Vec<u64> = (1..=300).collect();
    assert_eq!(orders, expect, "each alarm fired exactly once");
    assert!(
        got.windows(2).all(|w| w[0].0 <= w[1].0),
        "fired in due order"
    );
    // Every handle is gone: the thread ends.
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_alarm_wakes_the_thread_sleeping_on_a_later_one() {
    let (alarms, thread) = Alarms::spawn().unwrap();
    let far = alarms.clone();
    // The thread sleeps towards an alarm an hour away...
    let waiting =
        tokio::spawn(async move { far.wait(Instant::now() + Duration::from_secs(3600)).await });
    tokio::time::sleep(ms(20)).await;
    // ...and must still fire one due in 10 ms (a broken thread hangs here).
    let soon = Instant::now() + ms(10);
    let fired = alarms.wait(soon).await.expect("fired by the thread");
    assert!(fired.at >= soon);
    // The far waiter stops waiting; with no handle left the thread ends even
    // though an alarm is still queued.
    waiting.abort();
    let _ = waiting.await;
    drop(alarms);
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_due_instant_already_past_returns_at_once() {
    let alarms = Alarms::start();
    let past = Instant::now();
    assert!(alarms.wait(past).await.is_none(), "no alarm needed");
    assert!(Instant::now() >= past);
}
