//! A heartbeat on the control channel while this side is busy in a round and the peer is idle.

use super::control::{ControlChannel, Message};
use anyhow::Result;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Keep the server's control channel alive while this side is busy in a one-sided round.
pub struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(ch: &ControlChannel) -> Result<Heartbeat> {
        let mut stream = ch.heartbeat_handle()?;
        let frame = super::control::encode(&Message::Progress)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let period = (ch.timeout() / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let thread = std::thread::spawn(move || {
            let mut waited = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                waited += Duration::from_millis(20);
                if waited >= period {
                    waited = Duration::ZERO;
                    if stream.write_all(&frame).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Heartbeat {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
