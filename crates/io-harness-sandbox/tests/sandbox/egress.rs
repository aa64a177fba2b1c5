//! Egress through the allowlisting proxy from inside the real native sandbox: the
//! command's only way out is the bridge port in its private network namespace, which
//! the harness pipes to an [`EgressProxy`]. Names like `allowed.test` resolve through
//! the proxy's resolver map to local listeners, so nothing here needs the internet.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use io_harness_egress::{EgressProxy, HostRule, bridge, fake_client_hello};
use io_harness_sandbox::{NetworkPosture, ProxyBridge, RunSpec};

use crate::common::*;

const PORT: u16 = bridge::DEFAULT_BRIDGE_PORT;

/// An HTTP server on the host's loopback that answers every request with a fixed body
/// and counts the requests it read (a connection that sends nothing is not one).
struct Upstream {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
}

const BODY: &str = "hello-from-upstream";

impl Upstream {
    fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let count = requests.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let count = count.clone();
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut b) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&b[..n]),
                        }
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
                        BODY.len()
                    );
                });
            }
        });
        Upstream { addr, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn proxy(rt: &tokio::runtime::Runtime, allow: &[&str], map: &[(&str, SocketAddr)]) -> EgressProxy {
    let rules = allow.iter().map(|r| HostRule::parse(r).unwrap()).collect();
    let map: HashMap<String, SocketAddr> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    rt.block_on(EgressProxy::builder(rules).with_resolver(map).start())
        .unwrap()
}

fn allowlist_spec(f: &Fixture, p: &EgressProxy, argv: Vec<String>) -> RunSpec {
    let mut spec = f.spec(argv);
    spec.network = NetworkPosture::Allowlist;
    spec.proxy = Some(ProxyBridge {
        port: PORT,
        to_unix: p.unix_path().to_path_buf(),
    });
    spec.env = bridge::proxy_env(PORT);
    spec
}

#[test]
fn allowed_host_is_reached_through_the_proxy_and_another_refused() {
    let up = Upstream::start();
    let rt = runtime();
    let p = proxy(&rt, &["allowed.test"], &[("allowed.test", up.addr)]);
    let f = Fixture::new();
    let port = up.addr.port();
    let script = format!(
        "curl -sS --max-time 20 http://allowed.test:{port}/; echo; \
         curl -sS --max-time 20 -o /dev/null -w 'denied=%{{http_code}}' http://denied.test:{port}/"
    );
    let out = run(&native(), &allowlist_spec(&f, &p, sh(&script)));
    let stdout = out.stdout.text();
    assert!(stdout.contains(BODY), "{stdout}\n{}", out.stderr.text());
    assert!(
        stdout.contains("denied=403"),
        "{stdout}\n{}",
        out.stderr.text()
    );
    assert!(out.layers.proxy_bridge);
    assert_eq!(
        up.requests(),
        1,
        "only the allowed request reached the host"
    );
    let report = p.report();
    assert_eq!(report.refusals, Some(1));
    assert_eq!(report.admitted, Some(1));
    assert_eq!(report.refused_hosts, ["denied.test"]);
}

/// Raw proxy requests from inside: an SNI that differs from the CONNECT host, an IP
/// literal, a port the rule does not name, and a Host header that differs from the
/// request target are each refused and counted; none reaches the upstream.
#[test]
fn sni_mismatch_ip_literal_other_port_and_host_mismatch_are_refused() {
    let up = Upstream::start();
    let rt = runtime();
    let port = up.addr.port();
    let rule = format!("allowed.test:{port}");
    let p = proxy(&rt, &[&rule], &[("allowed.test", up.addr)]);
    let f = Fixture::new();
    let hello: String = fake_client_hello(Some("evil.test"))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let other = if port == 65535 { port - 1 } else { port + 1 };
    let code = format!(
        r#"
import socket
def ask(data, more=None):
    s = socket.create_connection(("127.0.0.1", {PORT}), timeout=20)
    s.sendall(data)
    first = s.recv(4096)
    if more is not None and first.startswith(b"HTTP/1.1 200"):
        s.sendall(more)
        rest = s.recv(4096)
        first = b"tunnel-then-" + (b"closed" if rest == b"" else rest)
    s.close()
    return first.split(b"\r\n")[0].decode()
print("sni", ask(b"CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n", bytes.fromhex("{hello}")))
print("ip", ask(b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"))
print("port", ask(b"CONNECT allowed.test:{other} HTTP/1.1\r\n\r\n"))
print("host", ask(b"GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"))
"#
    );
    let out = run(&native(), &allowlist_spec(&f, &p, py(&code)));
    let stdout = out.stdout.text();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "sni tunnel-then-closed",
            "ip HTTP/1.1 403 Forbidden",
            "port HTTP/1.1 403 Forbidden",
            "host HTTP/1.1 403 Forbidden",
        ],
        "{}",
        out.stderr.text()
    );
    assert_eq!(up.requests(), 0, "nothing refused reached the upstream");
    let report = p.report();
    assert_eq!(report.refusals, Some(4));
    assert_eq!(report.admitted, Some(0));
    assert_eq!(
        report.refused_hosts,
        ["evil.test", "127.0.0.1", "allowed.test"]
    );
}

/// Without an allowlist there is no bridge: the proxy port is closed inside and the
/// host's listener cannot be reached either.
#[test]
fn no_bridge_without_allowlist() {
    let up = Upstream::start();
    let f = Fixture::new();
    let code = format!(
        r#"
import socket
for port in ({PORT}, {up}):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5)
        print(port, "connected")
    except OSError as e:
        print(port, "refused", e.errno)
"#,
        up = up.addr.port()
    );
    let out = run(&native(), &f.spec(py(&code)));
    let stdout = out.stdout.text();
    assert!(!stdout.contains("connected"), "{stdout}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}\n{}", out.stderr.text());
    assert!(!out.layers.proxy_bridge);
    assert_eq!(up.requests(), 0);
}

/// The floor has no private network namespace: an allowlist there gets no bridge and
/// is held to no network at all, and the outcome says so.
#[test]
fn floor_allowlist_has_no_route() {
    let up = Upstream::start();
    let rt = runtime();
    let p = proxy(&rt, &["allowed.test"], &[("allowed.test", up.addr)]);
    let f = Fixture::new();
    let script = format!(
        "curl -sS --max-time 10 http://allowed.test:{}/ || echo failed",
        up.addr.port()
    );
    let out = run(&floor(), &allowlist_spec(&f, &p, sh(&script)));
    assert!(
        out.stdout.text().contains("failed"),
        "{}",
        out.stdout.text()
    );
    assert!(!out.layers.proxy_bridge);
    assert_eq!(up.requests(), 0);
    assert_eq!(p.report().refusals, Some(0));
}

/// Sandboxes one after another (a root harness reuses their network namespaces, so the
/// bridge port is bound again where the last one was) and several at once each reach
/// the allowed host through their own bridge.
#[test]
fn bridges_work_in_reused_namespaces_and_in_parallel() {
    let up = Upstream::start();
    let rt = runtime();
    let p = proxy(&rt, &["allowed.test"], &[("allowed.test", up.addr)]);
    let f = Fixture::new();
    let script = format!(
        "curl -sS --max-time 20 http://allowed.test:{}/",
        up.addr.port()
    );
    let spec = allowlist_spec(&f, &p, sh(&script));
    for i in 0..4 {
        let out = run(&native(), &spec);
        assert_eq!(out.stdout.text(), BODY, "run {i}: {}", out.stderr.text());
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| run(&native(), &spec))).collect();
        for h in handles {
            let out = h.join().unwrap();
            assert_eq!(out.stdout.text(), BODY, "{}", out.stderr.text());
            assert!(out.layers.proxy_bridge);
        }
    });
    assert_eq!(up.requests(), 8);
    assert_eq!(p.report().admitted, Some(8));
    assert_eq!(p.report().refusals, Some(0));
}
