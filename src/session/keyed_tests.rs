//! A server with a key: only a client holding it is served, whoever connects first.

use super::*;
use std::io::Write as _;

fn key() -> TestKey {
    TestKey::new(b"the-test-port-key-0123")
}

fn opts(key: Option<TestKey>) -> SessionOptions {
    SessionOptions {
        key,
        wait: Duration::from_secs(20),
        ..SessionOptions::in_process(PortChoice::default(), 0, Duration::from_secs(5))
    }
}

fn request() -> Message {
    Message::Finished { summary: None }
}

/// A client that greets with `key` and, once let in, sends one message.
fn client(port: u16, key: Option<TestKey>) -> Result<()> {
    let s = TcpStream::connect(("127.0.0.1", port))?;
    let mut ch = ControlChannel::new(s, Duration::from_secs(5))?;
    ch.greet_as_client(key.as_ref())?;
    ch.send(&request())
}

/// Issue 31, attack 3: intruders that connect first (one sending garbage, one that stalls, one
/// without a key, one with another key) are refused and the server goes on waiting; the client
/// with the key is served, and each refusal is logged.
#[test]
fn a_keyed_server_serves_only_the_client_with_its_key() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = log.clone();
    let refused = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(IpAddr, String)>::new()));
    let counted = refused.clone();
    let o = SessionOptions {
        client_log: StatusSink::new(move |m| seen.lock().unwrap().push(m.to_string())),
        refusals: RefusalSink::new(move |a, why| counted.lock().unwrap().push((a, why.into()))),
        ..opts(Some(key()))
    };
    let intruders = std::thread::spawn(move || {
        let mut garbage = TcpStream::connect(("127.0.0.1", port)).unwrap();
        garbage.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let _staller = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let open = client(port, None).unwrap_err().to_string();
        assert!(
            open.contains("serves only clients that hold its key"),
            "{open}"
        );
        let other = client(port, Some(TestKey::new(b"another-key-0123456789")));
        assert!(other.unwrap_err().to_string().contains("wrong key"));
        client(port, Some(key())).unwrap();
    });
    let started = Instant::now();
    let served = serve_first(&l, &o, |s, o| handshake(s, o).map(|(_, m)| m)).unwrap();
    intruders.join().unwrap();
    assert_eq!(served, request());
    let log = log.lock().unwrap().join("\n");
    assert_eq!(log.matches("refused a client").count(), 4, "{log}");
    assert!(
        log.contains("holds no key") && log.contains("wrong key"),
        "{log}"
    );
    // Each refusal reported with the client's address, its reason without it.
    let refused = refused.lock().unwrap();
    let reasons: Vec<&str> = refused.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(refused.len(), 4, "{reasons:?}");
    assert!(refused.iter().all(|(a, _)| a.is_loopback()), "{refused:?}");
    assert!(
        reasons.contains(&"holds no key") && reasons.contains(&"wrong key"),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().all(|w| !w.contains("127.0.0.1")),
        "{reasons:?}"
    );
    // The staller held the port for the keyed greeting's timeout, not the whole timeout.
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// A client with a key may use an open server; a server without a key is everyone's.
#[test]
fn keys_on_one_side_only() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let c = std::thread::spawn(move || client(port, Some(key())));
    let served = serve_first(&l, &opts(None), |s, o| handshake(s, o).map(|(_, m)| m)).unwrap();
    c.join().unwrap().unwrap();
    assert_eq!(served, request());
}

/// A keyed server with no client that holds the key says so when its wait ends.
#[test]
fn a_keyed_wait_ends_naming_the_key() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let o = SessionOptions {
        wait: Duration::from_secs(2),
        ..opts(Some(key()))
    };
    let c = std::thread::spawn(move || client(port, None));
    let e = serve_first(&l, &o, |s, o| handshake(s, o).map(|(_, m)| m)).unwrap_err();
    assert!(c.join().unwrap().is_err());
    assert!(
        format!("{e:#}").contains("no client with this server's key"),
        "{e:#}"
    );
}
