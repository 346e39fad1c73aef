//! perftest's out-of-band conversation over a live TCP connection: each step one
//! `ctx_xchg_data` round in lock step (the client writes then reads, the server reads then
//! writes), each message one `write()`, each wait bounded by the control channel's timeout
//! (perftest's own peers have none).

use super::{BwReport, PerftestKey, SysData, Version, decode_mtu, encode_mtu};
use crate::connect::control::ControlChannel;
use crate::ib::Mtu;
use anyhow::{Result, bail};

/// The version this side claims: the one whose wire it speaks and has been run against (Debian
/// 12's perftest, 6.06). A 6.29 peer gates its negotiation on the other side's version, so it
/// does not negotiate with us; 6.28 as released always does, and is refused by name.
pub const CLAIMED: Version = Version::new(6, 6);

/// perftest's last message before it closes: "done" and its NUL (`ctx_close_connection`). Both
/// sides send it; neither reads it.
pub const DONE: &[u8; 5] = b"done\0";

/// Which end of the lock step this side plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    /// Writes each message, then reads the peer's.
    Client,
    /// Reads the peer's message, then writes its own.
    Server,
}

/// A perftest conversation in progress: the channel, which end this is, and the version both
/// speak once [`PerftestPeer::start`] has exchanged them.
pub struct PerftestPeer {
    ch: ControlChannel,
    lead: Lead,
    /// The peer's own version.
    pub theirs: Version,
    /// What both speak: the older of the two (see [`Version::common`]).
    pub common: Version,
    /// What the peer is called in messages ("the perftest server").
    who: &'static str,
}

impl PerftestPeer {
    /// Exchange versions, refuse what cannot be spoken, and return the conversation.
    pub fn start(mut ch: ControlChannel, lead: Lead) -> Result<PerftestPeer> {
        let who = match lead {
            Lead::Client => "the perftest server",
            Lead::Server => "the perftest client",
        };
        let mut theirs = [0u8; super::VERSION_LEN];
        xchg(
            &mut ch,
            lead,
            &CLAIMED.encode(),
            &mut theirs,
            who,
            "version",
        )?;
        let theirs = Version::decode(&theirs)?;
        theirs.check_accepted()?;
        if theirs >= Version::NEGOTIATION_SINCE && theirs < Version::new(6, 29) {
            bail!(
                "{who} runs perftest {theirs}, which always negotiates its parameters in a \
                 binary exchange rdmadiag does not speak yet; perftest 6.29 or newer, or 6.27 \
                 or older, talk to rdmadiag"
            );
        }
        Ok(PerftestPeer {
            ch,
            lead,
            theirs,
            common: Version::common(CLAIMED, theirs),
            who,
        })
    }

    /// The peer's address, as messages name it.
    pub fn peer(&self) -> &str {
        self.ch.peer()
    }

    /// What the peer is called in messages.
    pub fn who(&self) -> &'static str {
        self.who
    }

    /// Bound each later wait by `timeout` (a server waits out the client's whole run in one
    /// handshake).
    pub fn set_timeout(&mut self, timeout: std::time::Duration) {
        self.ch.set_timeout(timeout);
    }

    fn xchg(&mut self, mine: &[u8], theirs: &mut [u8], what: &str) -> Result<()> {
        xchg(&mut self.ch, self.lead, mine, theirs, self.who, what)
    }

    /// The system data, if both speak it: each side keeps the larger of each value.
    pub fn sys_data(&mut self, ours: SysData) -> Result<SysData> {
        if !self.common.exchanges_sys_data() {
            return Ok(ours);
        }
        let [cycle, line] = ours.messages();
        let mut theirs = [0u8; super::SYS_DATA_LEN];
        let (a, b) = theirs.split_at_mut(4);
        self.xchg(&cycle, a, "cycle buffer size")?;
        self.xchg(&line, b, "cache line size")?;
        Ok(ours.merge(SysData::decode(&theirs)?))
    }

    /// The MTU, if both speak it: both use the smaller.
    pub fn mtu(&mut self, ours: Mtu) -> Result<Mtu> {
        let Some(len) = self.common.mtu_message_len() else {
            return Ok(ours);
        };
        let mine = encode_mtu(ours, len)?;
        let mut theirs = vec![0u8; len];
        self.xchg(&mine, &mut theirs, "MTU")?;
        let theirs = decode_mtu(&theirs)?;
        Ok(if theirs.bytes() < ours.bytes() {
            theirs
        } else {
            ours
        })
    }

    /// One handshake (`ctx_hand_shake`): our key for the peer's, in the form ours has; the
    /// peer's message must be of the same form, or the stream would be out of step.
    pub fn hand_shake(&mut self, mine: &PerftestKey) -> Result<PerftestKey> {
        let msg = mine.encode();
        let mut theirs = vec![0u8; msg.len()];
        self.xchg(&msg, &mut theirs, "QP key")?;
        PerftestKey::decode(&theirs).map_err(|e| {
            anyhow::anyhow!(
                "{e:#} ({} reads and writes its key {} a GID: on InfiniBand, perftest sends \
                 the GID only with -x)",
                self.who,
                if mine.gid.is_some() {
                    "with"
                } else {
                    "without"
                }
            )
        })
    }

    /// The bw reports (`xchg_bw_reports`): ours for the peer's, five rounds.
    pub fn bw_reports(&mut self, mine: &BwReport) -> Result<BwReport> {
        let msgs = mine.messages(self.common)?;
        let mut theirs = vec![0u8; BwReport::wire_len(self.common)];
        let mut at = 0;
        for (msg, what) in
            msgs.iter()
                .zip(["size", "iterations", "peak", "average", "message rate"])
        {
            let end = at + msg.len();
            self.xchg(msg, &mut theirs[at..end], &format!("bw report ({what})"))?;
            at = end;
        }
        BwReport::decode(&theirs, self.common)
    }

    /// The close (`ctx_close_connection`): one last handshake, then "done".
    pub fn close(mut self, mine: &PerftestKey) -> Result<()> {
        self.hand_shake(mine)?;
        self.ch.write_all_by(DONE, "\"done\"")
    }
}

/// One lock-step round.
fn xchg(
    ch: &mut ControlChannel,
    lead: Lead,
    mine: &[u8],
    theirs: &mut [u8],
    who: &str,
    what: &str,
) -> Result<()> {
    let ours = format!("our {what}");
    let peers = format!("{who}'s {what}");
    match lead {
        Lead::Client => {
            ch.write_all_by(mine, &ours)?;
            ch.read_exact_by(theirs, &peers)
        }
        Lead::Server => {
            ch.read_exact_by(theirs, &peers)?;
            ch.write_all_by(mine, &ours)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::Gid;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    /// A perftest server's side of the conversation, in raw bytes as perftest writes them:
    /// each round reads the client's message whole, then writes its own.
    fn fake_server(
        version: &'static [u8],
        rounds: Vec<(usize, Vec<u8>)>,
    ) -> (u16, std::thread::JoinHandle<Vec<Vec<u8>>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut got = Vec::new();
            let mut v = [0u8; 16];
            s.read_exact(&mut v).unwrap();
            got.push(v.to_vec());
            let mut mine = [0u8; 16];
            mine[..version.len()].copy_from_slice(version);
            s.write_all(&mine).unwrap();
            for (len, reply) in rounds {
                let mut m = vec![0u8; len];
                if s.read_exact(&mut m).is_err() {
                    break;
                }
                got.push(m);
                s.write_all(&reply).unwrap();
            }
            got
        });
        (port, t)
    }

    fn channel(port: u16) -> ControlChannel {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        ControlChannel::new(s, Duration::from_secs(5)).unwrap()
    }

    fn key(qpn: u32, gid: Option<Gid>) -> PerftestKey {
        PerftestKey {
            lid: 0,
            out_reads: 16,
            qpn,
            psn: 0x123456,
            rkey: 0xabcd,
            vaddr: 0x7f00_0000_1000,
            gid,
            srqn: 0,
        }
    }

    #[test]
    fn a_client_conversation_goes_in_perftests_order_and_sizes() {
        let gid: Gid = "::ffff:10.77.0.1".parse().unwrap();
        let theirs = key(0x11, Some(gid));
        let report = BwReport {
            size: 65536,
            iters: 5000,
            bw_peak: 0.0,
            bw_avg: 0.0,
            msg_rate: 0.0,
        };
        let rounds = vec![
            (4, 8192u32.to_be_bytes().to_vec()),
            (4, 128u32.to_be_bytes().to_vec()),
            (2, b"3\0".to_vec()),
            (108, theirs.encode()),
            (8, report.encode(Version::new(6, 6)).unwrap()[..8].to_vec()),
            (
                8,
                report.encode(Version::new(6, 6)).unwrap()[8..16].to_vec(),
            ),
            (8, vec![0; 8]),
            (8, vec![0; 8]),
            (8, vec![0; 8]),
            (108, theirs.encode()),
            (5, b"done\0".to_vec()),
        ];
        let (port, server) = fake_server(b"6.06", rounds);
        let ch = channel(port);
        let mut pt = PerftestPeer::start(ch, Lead::Client).unwrap();
        assert_eq!(pt.theirs, Version::new(6, 6));
        let sys = pt
            .sys_data(SysData {
                cycle_buffer: 4096,
                cache_line_size: 64,
            })
            .unwrap();
        assert_eq!((sys.cycle_buffer, sys.cache_line_size), (8192, 128));
        // The smaller MTU wins: theirs is 1024 (3), ours 4096.
        assert_eq!(pt.mtu(Mtu(4096)).unwrap(), Mtu(1024));
        let mine = key(0x22, Some(gid));
        assert_eq!(pt.hand_shake(&mine).unwrap(), theirs);
        let back = pt.bw_reports(&report).unwrap();
        assert_eq!((back.size, back.iters), (65536, 5000));
        pt.close(&mine).unwrap();
        let got = server.join().unwrap();
        assert_eq!(&got[0][..5], b"6.06\0", "we claim 6.06");
        assert_eq!(got[1], 4096u32.to_be_bytes());
        assert_eq!(got[3], b"5\0");
        assert_eq!(got[4], mine.encode());
        assert_eq!(got[5], 65536u64.to_be_bytes());
        assert_eq!(got[10], mine.encode(), "the close is one more handshake");
        assert_eq!(got[11], b"done\0");
    }

    #[test]
    fn unspeakable_versions_are_refused_by_name_not_waited_on() {
        for (version, words) in [
            (&b"6.28"[..], "6.28"),
            (b"5.60", "5.70 or newer"),
            (b"hello", "not a perftest version"),
        ] {
            let (port, server) = fake_server(version, Vec::new());
            let ch = channel(port);
            let e = PerftestPeer::start(ch, Lead::Client).err().unwrap();
            let e = format!("{e:#}");
            assert!(e.contains(words), "{e}");
            server.join().unwrap();
        }
    }

    #[test]
    fn a_key_of_the_other_form_is_named() {
        let rounds = vec![(59, vec![b'x'; 59])];
        let (port, server) = fake_server(b"6.06", rounds);
        let ch = channel(port);
        let mut pt = PerftestPeer::start(ch, Lead::Client).unwrap();
        let e = pt.hand_shake(&key(1, None)).unwrap_err();
        assert!(format!("{e:#}").contains("with -x"), "{e:#}");
        drop(pt);
        server.join().unwrap();
    }
}
