//! Requests many callers make at the same moment, made together: a caller queues its
//! request and waits for its answer; a few lanes each take whatever is queued (up to a
//! limit) and answer it with one round trip to the database.
//!
//! Nothing waits for a batch to fill: a lone request goes out at once, as it would alone.
//! Batches form only while the lanes are busy — when the database is the bottleneck, which
//! is when one statement for many rows (one plan, one commit, one WAL flush) instead of one
//! each pays.

use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};

use crate::StoreError;

/// Requests that can be made together: those of one group (`group`) in one round trip
/// (`many`), or one on its own (`one`).
#[async_trait::async_trait]
pub(crate) trait Batched: Send + Sync + 'static {
    type Request: Send + Sync + 'static;
    type Answer: Send + 'static;
    type Group: PartialEq;

    fn group(&self, request: &Self::Request) -> Self::Group;

    async fn one(&self, request: &Self::Request) -> Result<Self::Answer, StoreError>;

    /// One answer per request, in order.
    async fn many(&self, requests: &[&Self::Request]) -> Result<Vec<Self::Answer>, StoreError>;
}

struct Job<B: Batched> {
    request: B::Request,
    answer: oneshot::Sender<Result<B::Answer, StoreError>>,
    /// Whether the request is still made when its caller stopped waiting for the answer (a
    /// report is; a claim nobody would receive is not).
    even_unheard: bool,
}

/// A queue of requests answered in batches by a few lanes, started at the first request (on
/// the runtime that makes it) and ended when the batcher is dropped.
pub(crate) struct Batcher<B: Batched> {
    lanes: usize,
    most: usize,
    batched: Arc<B>,
    queue: std::sync::OnceLock<mpsc::UnboundedSender<Job<B>>>,
}

impl<B: Batched> Batcher<B> {
    /// `lanes` batches at a time, each of at most `most` requests.
    pub fn new(lanes: usize, most: usize, batched: B) -> Self {
        Batcher {
            lanes: lanes.max(1),
            most: most.max(1),
            batched: Arc::new(batched),
            queue: std::sync::OnceLock::new(),
        }
    }

    /// Queues `request` and waits for its answer. `even_unheard`: make the request even if
    /// the caller stops waiting before its batch goes out.
    pub async fn ask(&self, request: B::Request, even_unheard: bool) -> Result<B::Answer, StoreError> {
        let (answer, heard) = oneshot::channel();
        if self.queue().send(Job { request, answer, even_unheard }).is_err() {
            return Err(StoreError::Unanswered("the batching lanes have stopped".into()));
        }
        heard.await.map_err(|_| StoreError::Unanswered("its batch ended without an answer".into()))?
    }

    fn queue(&self) -> &mpsc::UnboundedSender<Job<B>> {
        self.queue.get_or_init(|| {
            let (queue, jobs) = mpsc::unbounded_channel();
            let jobs = Arc::new(Mutex::new(jobs));
            for _ in 0..self.lanes {
                tokio::spawn(lane(jobs.clone(), self.most, self.batched.clone()));
            }
            queue
        })
    }
}

/// One lane: takes what is queued (at least one request, at most `most`), answers it, again.
async fn lane<B: Batched>(jobs: Arc<Mutex<mpsc::UnboundedReceiver<Job<B>>>>, most: usize, batched: Arc<B>) {
    loop {
        let batch = {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else { return };
            let mut batch = vec![first];
            while batch.len() < most {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch
        };
        let (requests, answers): (Vec<B::Request>, Vec<_>) = batch
            .into_iter()
            .filter(|job| job.even_unheard || !job.answer.is_closed())
            .map(|job| (job.request, job.answer))
            .unzip();
        for (answer, out) in answers.into_iter().zip(answer_by_group(&*batched, &requests).await) {
            let _ = answer.send(out);
        }
    }
}

/// Answers `requests` group by group: a lone request with `one`, a group of several with
/// `many`; when `many` fails, each member of the group is made on its own with `one`, failing
/// (or not) on its own. One answer per request, in order.
pub(crate) async fn answer_by_group<B: Batched>(
    batched: &B,
    requests: &[B::Request],
) -> Vec<Result<B::Answer, StoreError>> {
    let mut answers: Vec<Option<Result<B::Answer, StoreError>>> = requests.iter().map(|_| None).collect();
    for group in groups(requests, |r| batched.group(r)) {
        let members: Vec<&B::Request> = group.iter().map(|&i| &requests[i]).collect();
        let together = match members.len() {
            1 => None,
            _ => batched.many(&members).await.ok().filter(|outs| outs.len() == members.len()),
        };
        match together {
            Some(outs) => {
                for (&i, out) in group.iter().zip(outs) {
                    answers[i] = Some(Ok(out));
                }
            }
            None => {
                for &i in &group {
                    answers[i] = Some(batched.one(&requests[i]).await);
                }
            }
        }
    }
    answers.into_iter().map(|a| a.unwrap_or_else(|| Err(StoreError::Unanswered("it was in no group".into())))).collect()
}

/// Indices of `items` grouped by `key`, each group in the items' order, groups in the order
/// their first item comes.
fn groups<T, K: PartialEq>(items: &[T], key: impl Fn(&T) -> K) -> Vec<Vec<usize>> {
    let mut groups: Vec<(K, Vec<usize>)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let k = key(item);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(i),
            None => groups.push((k, vec![i])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Multiplies by ten, slowly (20 ms a round trip), counting its round trips; a group of several fails when it
    /// holds a 13 (its members are then answered one by one).
    #[derive(Default)]
    struct Slow {
        round_trips: AtomicUsize,
        largest: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Batched for Slow {
        type Request = (char, u32);
        type Answer = u32;
        type Group = char;

        fn group(&self, request: &(char, u32)) -> char {
            request.0
        }

        async fn one(&self, request: &(char, u32)) -> Result<u32, StoreError> {
            self.round_trips.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            match request.1 {
                13 => Err(StoreError::Unanswered("13".into())),
                n => Ok(n * 10),
            }
        }

        async fn many(&self, requests: &[&(char, u32)]) -> Result<Vec<u32>, StoreError> {
            self.round_trips.fetch_add(1, Ordering::SeqCst);
            self.largest.fetch_max(requests.len(), Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            if requests.iter().any(|r| r.1 == 13) {
                return Err(StoreError::Unanswered("a 13 among them".into()));
            }
            Ok(requests.iter().map(|r| r.1 * 10).collect())
        }
    }

    #[test]
    fn groups_keep_the_order_of_first_appearance() {
        let items = ["a", "b", "a", "c", "b"];
        assert_eq!(groups(&items, |s| *s), vec![vec![0, 2], vec![1, 4], vec![3]]);
        assert!(groups(&[] as &[&str], |s| *s).is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_request_gets_its_own_answer_and_busy_lanes_batch() {
        let batcher = Arc::new(Batcher::new(1, 64, Slow::default()));
        let asks: Vec<_> = (100..140u32)
            .map(|i| {
                let b = batcher.clone();
                tokio::spawn(async move { (i, b.ask((if i % 2 == 0 { 'a' } else { 'b' }, i), true).await) })
            })
            .collect();
        for ask in asks {
            let (i, out) = ask.await.unwrap();
            assert_eq!(out.unwrap(), i * 10);
        }
        let made = batcher.batched.round_trips.load(Ordering::SeqCst);
        assert!(made < 40, "40 requests made while the lane was busy took {made} round trips");
        assert!(batcher.batched.largest.load(Ordering::SeqCst) > 1);
    }

    #[tokio::test]
    async fn a_group_that_fails_together_is_answered_one_by_one() {
        let slow = Slow::default();
        let requests = [('a', 1), ('a', 13), ('b', 2), ('a', 3)];
        let answers = answer_by_group(&slow, &requests).await;
        let answers: Vec<Result<u32, String>> = answers.into_iter().map(|a| a.map_err(|e| e.to_string())).collect();
        assert_eq!(answers[0], Ok(10));
        assert!(answers[1].as_ref().unwrap_err().contains("13"), "{:?}", answers[1]);
        assert_eq!(answers[2], Ok(20));
        assert_eq!(answers[3], Ok(30));
        // 'a' together (failed), then its three one by one; 'b' alone.
        assert_eq!(slow.round_trips.load(Ordering::SeqCst), 5);
    }
}
