//! Leading-edge coalescing of change events: the first event of a burst is served at once, and
//! the events that arrive while it is being served are gathered (one per key, the latest kept)
//! into at most one more round, run as soon as the first ends. A burst shorter than one round
//! therefore costs two rounds at most, and no event that arrives mid-round is lost.

use std::future::Future;
use tokio::sync::mpsc;

/// Events waiting for the next round: one per key, in the order their keys first arrived.
struct Pending<E> {
    events: Vec<E>,
}

impl<E> Pending<E> {
    /// Add an event, replacing a waiting one with the same key. The list never holds two events
    /// with one key, so it is bounded by the number of distinct keys.
    fn add<K: PartialEq>(&mut self, event: E, key: &impl Fn(&E) -> K) {
        let k = key(&event);
        match self.events.iter_mut().find(|e| key(e) == k) {
            Some(waiting) => *waiting = event,
            None => self.events.push(event),
        }
    }
}

/// Serve `events` until the channel closes: `round` runs on each batch of distinct events (never
/// two rounds at once), while events arriving meanwhile are gathered for the next batch.
pub async fn serve<E, K, R, F>(events: &mut mpsc::Receiver<E>, key: impl Fn(&E) -> K, mut round: R)
where
    K: PartialEq,
    R: FnMut(Vec<E>) -> F,
    F: Future<Output = ()>,
{
    let mut pending = Pending { events: Vec::new() };
    let mut open = true;
    loop {
        if pending.events.is_empty() {
            match events.recv().await {
                Some(event) => pending.add(event, &key),
                None => return,
            }
        }
        // Whatever is queued already joins this round.
        while let Ok(event) = events.try_recv() {
            pending.add(event, &key);
        }
        let work = round(std::mem::take(&mut pending.events));
        tokio::pin!(work);
        loop {
            tokio::select! {
                () = &mut work => break,
                event = events.recv(), if open => match event {
                    Some(event) => pending.add(event, &key),
                    None => open = false,
                },
            }
        }
        if !open && pending.events.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::Semaphore;

    type Event = (char, u32);
    type Round = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

    /// What the test sees of the rounds: each batch as its round starts, and the gate that lets
    /// one round finish per permit.
    struct Rounds {
        batches: mpsc::UnboundedReceiver<Vec<Event>>,
        gate: Arc<Semaphore>,
    }

    /// A `round` that reports its batch and then waits for a permit.
    fn gated() -> (impl FnMut(Vec<Event>) -> Round, Rounds) {
        let (started, batches) = mpsc::unbounded_channel();
        let gate = Arc::new(Semaphore::new(0));
        let round_gate = gate.clone();
        let round = move |batch: Vec<Event>| {
            let started = started.clone();
            let gate = round_gate.clone();
            Box::pin(async move {
                let _ = started.send(batch);
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
            }) as Round
        };
        (round, Rounds { batches, gate })
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_event_is_served_at_once_and_a_burst_costs_one_more_round() {
        let (tx, mut rx) = mpsc::channel(64);
        let (round, Rounds { mut batches, gate }) = gated();
        let served = tokio::spawn(async move { serve(&mut rx, |e: &Event| e.0, round).await });
        let t0 = tokio::time::Instant::now();
        tx.send(('t', 1)).await.unwrap();
        assert_eq!(batches.recv().await.unwrap(), vec![('t', 1)]);
        // No delay before the first round (the clock is paused: any sleep would have moved it).
        assert_eq!(tokio::time::Instant::now(), t0);
        // A burst while the first round runs: deduplicated by key, the latest event kept.
        for event in [('t', 2), ('p', 3), ('t', 4), ('t', 5), ('p', 6)] {
            tx.send(event).await.unwrap();
        }
        gate.add_permits(1);
        assert_eq!(batches.recv().await.unwrap(), vec![('t', 5), ('p', 6)]);
        gate.add_permits(1);
        drop(tx);
        served.await.unwrap();
        assert!(batches.recv().await.is_none(), "a third round ran");
    }

    #[tokio::test]
    async fn an_event_during_the_last_round_is_not_lost() {
        let (tx, mut rx) = mpsc::channel(64);
        let (round, Rounds { mut batches, gate }) = gated();
        let served = tokio::spawn(async move { serve(&mut rx, |e: &Event| e.0, round).await });
        tx.send(('t', 1)).await.unwrap();
        assert_eq!(batches.recv().await.unwrap(), vec![('t', 1)]);
        gate.add_permits(1);
        // Quiet again; then one change lands while its own round runs, and the channel closes.
        tx.send(('t', 2)).await.unwrap();
        assert_eq!(batches.recv().await.unwrap(), vec![('t', 2)]);
        tx.send(('t', 3)).await.unwrap();
        drop(tx);
        gate.add_permits(1);
        assert_eq!(batches.recv().await.unwrap(), vec![('t', 3)]);
        gate.add_permits(1);
        served.await.unwrap();
    }
}
