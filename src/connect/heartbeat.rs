//! A heartbeat on the control channel while this side is busy in a round and the peer is idle.

use super::control::{ControlChannel, Message};
use anyhow::Result;
use std::io::Write;
use std::net::TcpStream;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

/// The longest time between two beats, whatever the timeout.
pub const MAX_PERIOD: Duration = Duration::from_secs(1);

/// How long a side waiting on a beating peer allows it to stay silent: its own timeout, but
/// never under three beats at the longest period. The beat's period follows the beating side's
/// timeout, not the waiting side's (which it does not know): a server with `--timeout 1s` would
/// otherwise give up on a client that beats every second whenever one beat came late.
pub fn patience(own_timeout: Duration) -> Duration {
    own_timeout.max(3 * MAX_PERIOD)
}

/// The waiting side: [`ControlChannel::recv_patient`] from a peer that beats meanwhile (a
/// client in a one-sided round), allowing [`patience`] of the channel's timeout, which holds
/// again afterwards.
pub fn recv_beating(ch: &mut ControlChannel, what: &str) -> Result<Message> {
    let own = ch.timeout();
    ch.set_timeout(patience(own));
    let m = ch.recv_patient(what);
    ch.set_timeout(own);
    m
}

/// Keep the server's control channel alive while this side is busy in a bandwidth round (its
/// engine reads the clock too rarely to beat from its loop, as the latency loops do through
/// [`Beats`] and `perf::Pulse`). The thread sleeps in one blocking wait per beat (a quarter of
/// the timeout, 100 ms to [`MAX_PERIOD`], which the waiting side allows for: [`recv_beating`]):
/// it wakes only to write a beat, or at once when dropped, never on the timed loop's CPU between.
pub struct Heartbeat {
    stop: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The time between beats for a channel: a quarter of its timeout, 100 ms to [`MAX_PERIOD`].
fn period(ch: &ControlChannel) -> Duration {
    (ch.timeout() / 4).clamp(Duration::from_millis(100), MAX_PERIOD)
}

impl Heartbeat {
    pub fn start(ch: &ControlChannel) -> Result<Heartbeat> {
        let mut beats = Beats::new(ch)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let period = beats.period;
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                if !beats.send() {
                    return;
                }
            }
        });
        Ok(Heartbeat {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// The beats themselves, for a loop that gives them on its own time (a latency loop through
/// `perf::Pulse`, the session joining the two: no thread) or for [`Heartbeat`]'s thread.
pub struct Beats {
    stream: TcpStream,
    frame: Vec<u8>,
    /// How often to beat (see [`recv_beating`] for what the waiting side allows).
    pub period: Duration,
    broken: bool,
}

impl Beats {
    pub fn new(ch: &ControlChannel) -> Result<Beats> {
        Ok(Beats {
            stream: ch.heartbeat_handle()?,
            frame: super::control::encode(&Message::Progress)?,
            period: period(ch),
            broken: false,
        })
    }

    /// Write one beat; false once the channel has failed (the round's end will say how).
    pub fn send(&mut self) -> bool {
        self.broken = self.broken || self.stream.write_all(&self.frame).is_err();
        !self.broken
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread's wait (disconnected): it ends at once.
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The waiting side allows at least three of the slowest beats, and its own timeout when
    /// that is longer.
    #[test]
    fn a_waiting_peer_allows_three_slow_beats() {
        assert_eq!(patience(Duration::from_secs(1)), 3 * MAX_PERIOD);
        assert_eq!(patience(Duration::from_millis(100)), 3 * MAX_PERIOD);
        assert_eq!(patience(Duration::ZERO), 3 * MAX_PERIOD);
        assert_eq!(patience(Duration::from_secs(30)), Duration::from_secs(30));
    }
}
