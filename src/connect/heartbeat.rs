//! A heartbeat on the control channel while this side is busy in a round and the peer is idle.

use super::control::{ControlChannel, HEARTBEAT_MAX_PERIOD, Message};
use anyhow::Result;
use std::io::Write;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

/// Keep the server's control channel alive while this side is busy in a one-sided round. The
/// thread sleeps in one blocking wait per beat (a quarter of the timeout, 100 ms to
/// [`HEARTBEAT_MAX_PERIOD`], which the waiting side allows for: [`ControlChannel::recv_beating`]):
/// it wakes only to write a beat, or at once when dropped, never on the timed loop's CPU
/// between.
pub struct Heartbeat {
    stop: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(ch: &ControlChannel) -> Result<Heartbeat> {
        let mut stream = ch.heartbeat_handle()?;
        let frame = super::control::encode(&Message::Progress)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let period = (ch.timeout() / 4).clamp(Duration::from_millis(100), HEARTBEAT_MAX_PERIOD);
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                if stream.write_all(&frame).is_err() {
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

impl Drop for Heartbeat {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread's wait (disconnected): it ends at once.
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
