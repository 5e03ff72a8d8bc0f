//! Spreading a pass over many nodes across a period, so a refresh of thousands of nodes does not
//! call the cloud all at once.

use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// `items`, item `i` of `n` released at `i × over / n` from now, none after `stop`; with a zero
/// `over` all at once.
pub(super) fn paced<T>(
    items: Vec<T>,
    over: Duration,
    stop: &CancellationToken,
) -> impl Stream<Item = T> + use<T> {
    let start = Instant::now();
    let step = match u32::try_from(items.len()) {
        Ok(n) if n > 0 => over / n,
        _ => Duration::ZERO,
    };
    futures::stream::iter(items.into_iter().enumerate())
        .then(move |(i, item)| async move {
            let offset = step.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
            tokio::time::sleep_until(start + offset).await;
            item
        })
        .take_until(stop.clone().cancelled_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_pass_spreads_its_items_evenly_over_the_period() {
        let start = Instant::now();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        paced(
            vec!["a", "b", "c", "d"],
            Duration::from_secs(60),
            &CancellationToken::new(),
        )
        .for_each_concurrent(2, |item| {
            let s = s.clone();
            async move { s.lock().push((item, start.elapsed().as_secs())) }
        })
        .await;
        assert_eq!(*seen.lock(), [("a", 0), ("b", 15), ("c", 30), ("d", 45)]);
        let all: Vec<_> = paced(vec![1, 2, 3], Duration::ZERO, &CancellationToken::new())
            .collect()
            .await;
        assert_eq!(all, [1, 2, 3]);
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(45),
            "zero spread waits for nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_releases_no_further_item() {
        let stop = CancellationToken::new();
        let start = Instant::now();
        let canceller = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            canceller.cancel();
        });
        let got: Vec<_> = paced(vec![1, 2, 3, 4], Duration::from_secs(60), &stop)
            .collect()
            .await;
        assert_eq!(got, [1, 2], "items at 0 s and 15 s; not 30 s, 45 s");
        assert_eq!(start.elapsed(), Duration::from_secs(20));
    }
}
