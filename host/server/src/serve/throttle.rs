//! The brake on guessing the bearer token: each peer address (an IPv6
//! address by its /64, what one host is usually given) has a bucket of
//! [`FREE_FAILURES`] failed authentications, refilled by one every
//! [`REFILL`]. With the bucket empty, the peer's requests are refused
//! `JIG_AUTH_THROTTLED` without their token being compared, so a guess
//! made then is no guess at all: one address guesses at most 3,600 times
//! an hour. The table holds at most [`MAX_PEERS`] addresses; when it is
//! full, the least suspect one (the fullest bucket) makes room.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed authentications a peer may make at once.
pub const FREE_FAILURES: f64 = 10.0;
/// One more failure is allowed each time this passes.
pub const REFILL: Duration = Duration::from_secs(1);
/// Peers whose failures are remembered at once.
pub const MAX_PEERS: usize = 4096;

struct Bucket {
    /// Failures still allowed, as of `at`.
    left: f64,
    at: Instant,
}

impl Bucket {
    fn left(&self, now: Instant) -> f64 {
        let refilled = now.duration_since(self.at).as_secs_f64() / REFILL.as_secs_f64();
        (self.left + refilled).min(FREE_FAILURES)
    }
}

#[derive(Default)]
pub struct Throttle {
    peers: Mutex<HashMap<IpAddr, Bucket>>,
}

/// The address a peer is counted by: IPv4 as is, IPv6 by its /64.
fn key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

impl Throttle {
    /// How long `peer` must wait before its token is compared again, if
    /// its bucket is empty.
    pub fn wait(&self, peer: IpAddr) -> Option<Duration> {
        let peers = self.peers.lock().unwrap();
        let left = peers.get(&key(peer))?.left(Instant::now());
        (left < 1.0).then(|| REFILL.mul_f64(1.0 - left))
    }

    /// Count a failed authentication against `peer`.
    pub fn failed(&self, peer: IpAddr) {
        let now = Instant::now();
        let mut peers = self.peers.lock().unwrap();
        let key = key(peer);
        if !peers.contains_key(&key) && peers.len() >= MAX_PEERS {
            peers.retain(|_, b| b.left(now) < FREE_FAILURES);
            if peers.len() >= MAX_PEERS {
                let fullest = peers
                    .iter()
                    .max_by(|a, b| a.1.left(now).total_cmp(&b.1.left(now)))
                    .map(|(k, _)| *k);
                if let Some(fullest) = fullest {
                    peers.remove(&fullest);
                }
            }
        }
        let left = peers.get(&key).map_or(FREE_FAILURES, |b| b.left(now));
        peers.insert(
            key,
            Bucket {
                left: (left - 1.0).max(0.0),
                at: now,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_fails_freely_up_to_the_bucket_then_waits() {
        let throttle = Throttle::default();
        let peer: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..FREE_FAILURES as usize {
            assert!(throttle.wait(peer).is_none());
            throttle.failed(peer);
        }
        let wait = throttle.wait(peer).expect("the bucket is empty");
        assert!(wait <= REFILL && wait > REFILL / 2, "{wait:?}");
        // Another peer, and another host's IPv6 /64, are not held back.
        assert!(throttle.wait("192.0.2.2".parse().unwrap()).is_none());
        let v6: IpAddr = "2001:db8:0:1::5".parse().unwrap();
        for _ in 0..FREE_FAILURES as usize {
            throttle.failed(v6);
        }
        assert!(throttle.wait("2001:db8:0:1::9".parse().unwrap()).is_some());
        assert!(throttle.wait("2001:db8:0:2::5".parse().unwrap()).is_none());
    }

    #[test]
    fn the_table_is_bounded_and_keeps_the_most_suspect() {
        let throttle = Throttle::default();
        let guesser: IpAddr = "198.51.100.1".parse().unwrap();
        for _ in 0..FREE_FAILURES as usize {
            throttle.failed(guesser);
        }
        for n in 0..(MAX_PEERS as u32 + 100) {
            throttle.failed(IpAddr::V4((0x0a00_0000 + n).into()));
        }
        assert_eq!(throttle.peers.lock().unwrap().len(), MAX_PEERS);
        assert!(throttle.wait(guesser).is_some(), "the guesser was evicted");
    }
}
