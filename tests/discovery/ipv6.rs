//! The perf-score source reaches a server on an IPv6 literal URL.

use std::io::{Read, Write};
use std::net::TcpListener;

use selection_coordinator::discovery::perf_scores::PerfScoreSource;
use selection_coordinator::CandidateId;

#[test]
fn perf_scores_fetch_from_an_ipv6_literal_url() {
    let listener = match TcpListener::bind("[::1]:0") {
        Ok(l) => l,
        Err(e) => {
            println!("note: IPv6 loopback unavailable ({e}); connection not checked");
            return;
        }
    };
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        let body = br#"{"a":{"FRA":{"score":0.75}}}"#;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    let url = format!("http://[::1]:{port}/scores");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let scores = rt
        .block_on(PerfScoreSource::new(&url, "FRA").unwrap().fetch())
        .expect("fetch over IPv6");
    assert_eq!(scores[&CandidateId::new("a")], 0.75);
    let request = server.join().unwrap();
    assert!(
        request
            .to_ascii_lowercase()
            .contains(&format!("host: [::1]:{port}")),
        "{request}"
    );
}
