//! The egress proxy and its bridge, end to end over loopback and unix sockets.
//! Names like `allowed.test` resolve through the proxy's resolver map to local listeners,
//! so nothing here needs the network.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use io_harness::egress::{
    EgressProxy, EgressReport, HostRule, MAX_REFUSED_HOSTS, bridge, fake_client_hello,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

const LIMIT: Duration = Duration::from_secs(10);

fn rules(list: &[&str]) -> Vec<HostRule> {
    list.iter()
        .map(|r| HostRule::parse(r).expect("rule"))
        .collect()
}

/// A listener that echoes every connection's bytes back.
async fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// An HTTP server answering each request with its own head as the body.
async fn http_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let head = read_head(&mut s).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                    head.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

async fn proxy(allow: &[&str], map: &[(&str, SocketAddr)]) -> EgressProxy {
    let map: HashMap<String, SocketAddr> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    EgressProxy::builder(rules(allow))
        .tcp_loopback()
        .with_resolver(map)
        .start()
        .await
        .expect("proxy starts")
}

async fn dial(p: &EgressProxy) -> TcpStream {
    TcpStream::connect(p.tcp_addr().expect("tcp listener"))
        .await
        .expect("connect proxy")
}

/// Reads up to and including the blank line ending a head, byte by byte (bounded).
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") && out.len() < 16 * 1024 {
        match tokio::time::timeout(LIMIT, s.read(&mut b))
            .await
            .expect("head in time")
        {
            Ok(1) => out.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads until EOF (or reset), bounded in time.
async fn read_all<S: AsyncRead + Unpin>(s: &mut S) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(LIMIT, s.read_to_end(&mut out))
        .await
        .expect("EOF in time");
    out
}

async fn connect_via<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, authority: &str) -> String {
    let req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write CONNECT");
    read_head(s).await
}

async fn echo_round<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, bytes: &[u8]) -> Vec<u8> {
    s.write_all(bytes).await.expect("write through tunnel");
    let mut got = vec![0u8; bytes.len()];
    tokio::time::timeout(LIMIT, s.read_exact(&mut got))
        .await
        .expect("echo in time")
        .expect("echo");
    got
}

#[tokio::test]
async fn connect_to_an_allowed_host_tunnels_both_ways() {
    let echo = echo_server().await;
    let p = proxy(&["allowed.test"], &[("allowed.test", echo)]).await;
    let mut c = dial(&p).await;
    let head = connect_via(&mut c, "Allowed.Test.:7000").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(
        echo_round(&mut c, b"plain bytes, not TLS").await,
        b"plain bytes, not TLS"
    );
    assert_eq!((p.refusals(), p.report().admitted), (0, Some(1)));
}

#[tokio::test]
async fn connect_443_with_matching_sni_tunnels() {
    let echo = echo_server().await;
    let p = proxy(&["*.pypi.org:443"], &[("files.pypi.org", echo)]).await;
    let mut c = dial(&p).await;
    assert!(
        connect_via(&mut c, "files.pypi.org:443")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let hello = fake_client_hello(Some("FILES.pypi.org"));
    assert_eq!(echo_round(&mut c, &hello).await, hello);
    assert_eq!(p.refusals(), 0);
}

#[tokio::test]
async fn refused_host_gets_403_and_is_counted() {
    let echo = echo_server().await;
    let p = proxy(
        &["allowed.test"],
        &[("allowed.test", echo), ("evil.test", echo)],
    )
    .await;
    let mut c = dial(&p).await;
    let head = connect_via(&mut c, "evil.test:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let body = read_all(&mut c).await;
    assert!(String::from_utf8_lossy(&body).contains("not allowed"));
    assert!(
        head.contains(&format!("Content-Length: {}\r\n", body.len())),
        "{head}"
    );
    assert_eq!(p.refusals(), 1);
    assert_eq!(p.refused_hosts(), vec!["evil.test".to_string()]);
    assert_eq!(p.report().admitted, Some(0));
}

#[tokio::test]
async fn ip_literals_are_refused_unless_a_rule_names_the_ip() {
    let echo = echo_server().await;
    let p = proxy(&["allowed.test"], &[("allowed.test", echo)]).await;
    for target in [
        echo.to_string(),
        format!("127.1:{}", echo.port()),
        format!("[::1]:{}", echo.port()),
    ] {
        let mut c = dial(&p).await;
        let head = connect_via(&mut c, &target).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{target}: {head}");
    }
    assert_eq!(p.refusals(), 3);
    assert_eq!(p.refused_hosts(), vec!["127.0.0.1", "127.1", "::1"]);

    let named = proxy(&[&format!("127.0.0.1:{}", echo.port())], &[]).await;
    let mut c = dial(&named).await;
    assert!(
        connect_via(&mut c, &echo.to_string())
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert_eq!(echo_round(&mut c, b"by ip").await, b"by ip");
}

#[tokio::test]
async fn a_port_the_rule_does_not_name_is_refused() {
    let echo = echo_server().await;
    let p = proxy(&["allowed.test:443"], &[("allowed.test", echo)]).await;
    let mut c = dial(&p).await;
    assert!(
        connect_via(&mut c, "allowed.test:8443")
            .await
            .starts_with("HTTP/1.1 403")
    );
    assert_eq!(p.refusals(), 1);
}

/// Opens a tunnel to `authority`, sends `first`, and returns what came back before close.
async fn tunnel_then_send(p: &EgressProxy, authority: &str, first: &[u8]) -> Vec<u8> {
    let mut c = dial(p).await;
    assert!(
        connect_via(&mut c, authority)
            .await
            .starts_with("HTTP/1.1 200")
    );
    c.write_all(first).await.expect("write first bytes");
    read_all(&mut c).await
}

#[tokio::test]
async fn sni_mismatch_absence_or_non_tls_on_443_close_the_tunnel() {
    let echo = echo_server().await;
    let p = proxy(&["allowed.test"], &[("allowed.test", echo)]).await;
    let got = tunnel_then_send(
        &p,
        "allowed.test:443",
        &fake_client_hello(Some("other.test")),
    )
    .await;
    assert!(
        got.is_empty(),
        "nothing may be echoed after an SNI mismatch"
    );
    assert_eq!(p.refused_hosts(), vec!["other.test"]);
    // The check applies to a ClientHello on any port.
    let got = tunnel_then_send(
        &p,
        "allowed.test:8443",
        &fake_client_hello(Some("third.test")),
    )
    .await;
    assert!(got.is_empty());
    assert!(
        tunnel_then_send(&p, "allowed.test:443", &fake_client_hello(None))
            .await
            .is_empty()
    );
    assert!(
        tunnel_then_send(&p, "allowed.test:443", b"GET / HTTP/1.1\r\n\r\n")
            .await
            .is_empty()
    );
    assert_eq!(p.refusals(), 4);
    assert_eq!(
        p.refused_hosts(),
        vec!["other.test", "third.test", "allowed.test"]
    );
    assert_eq!(p.report().admitted, Some(0));
}

#[tokio::test]
async fn plain_http_with_a_mismatched_host_header_is_refused() {
    let web = http_server().await;
    let p = proxy(
        &["allowed.test"],
        &[("allowed.test", web), ("evil.test", web)],
    )
    .await;
    let mut c = dial(&p).await;
    c.write_all(b"GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n")
        .await
        .expect("write");
    let head = read_head(&mut c).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(
        (p.refusals(), p.refused_hosts()),
        (1, vec!["evil.test".to_string()])
    );
}

#[tokio::test]
async fn plain_http_to_an_allowed_host_is_forwarded_in_origin_form() {
    let web = http_server().await;
    let p = proxy(&["allowed.test:8080"], &[("allowed.test", web)]).await;
    let mut c = dial(&p).await;
    let req = b"GET http://allowed.test:8080/simple/x?y=1 HTTP/1.1\r\nHost: allowed.test:8080\r\nProxy-Connection: keep-alive\r\n\r\n";
    c.write_all(req).await.expect("write");
    let reply = String::from_utf8(read_all(&mut c).await).expect("utf8");
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    assert!(
        reply.contains("\r\n\r\nGET /simple/x?y=1 HTTP/1.1\r\nHost: allowed.test:8080\r\n"),
        "{reply}"
    );
    assert!(!reply.to_ascii_lowercase().contains("proxy-connection"));
    assert_eq!((p.refusals(), p.report().admitted), (0, Some(1)));
}

#[tokio::test]
async fn the_unix_socket_listener_serves_the_same_proxy() {
    let echo = echo_server().await;
    let map = HashMap::from([("allowed.test".to_string(), echo)]);
    let p = EgressProxy::builder(rules(&["allowed.test"]))
        .with_resolver(map)
        .start()
        .await
        .expect("proxy");
    assert!(p.tcp_addr().is_none());
    let mut c = UnixStream::connect(p.unix_path())
        .await
        .expect("connect unix");
    assert!(
        connect_via(&mut c, "allowed.test:9")
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert_eq!(echo_round(&mut c, b"over unix").await, b"over unix");
    let mut c = UnixStream::connect(p.unix_path())
        .await
        .expect("connect unix");
    assert!(
        connect_via(&mut c, "evil.test:9")
            .await
            .starts_with("HTTP/1.1 403")
    );
    assert_eq!(p.refusals(), 1);
    let path = p.unix_path().to_path_buf();
    drop(p);
    assert!(!path.exists(), "the socket goes away with the proxy");
}

#[tokio::test]
async fn the_bridge_forwards_tcp_connections_to_the_proxy_socket() {
    let echo = echo_server().await;
    let map = HashMap::from([("allowed.test".to_string(), echo)]);
    let p = EgressProxy::builder(rules(&["allowed.test"]))
        .with_resolver(map)
        .start()
        .await
        .expect("proxy");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind bridge");
    let port = listener.local_addr().expect("addr").port();
    let bridge_task = tokio::spawn(bridge::forward(listener, p.unix_path().to_path_buf()));
    for _ in 0..3 {
        let mut c = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect bridge");
        assert!(
            connect_via(&mut c, "allowed.test:443")
                .await
                .starts_with("HTTP/1.1 200")
        );
        let hello = fake_client_hello(Some("allowed.test"));
        assert_eq!(echo_round(&mut c, &hello).await, hello);
    }
    let mut c = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect bridge");
    assert!(
        connect_via(&mut c, "evil.test:443")
            .await
            .starts_with("HTTP/1.1 403")
    );
    assert_eq!((p.report().admitted, p.refusals()), (Some(3), 1));
    bridge_task.abort();
}

#[test]
fn proxy_env_points_every_client_at_the_bridge() {
    let env = bridge::proxy_env(3128);
    for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        assert!(
            env.contains(&(key.to_string(), "http://127.0.0.1:3128".to_string())),
            "{key}"
        );
    }
    assert!(env.contains(&("NO_PROXY".to_string(), String::new())));
}

#[tokio::test]
async fn refused_hosts_are_distinct_and_bounded_while_every_refusal_counts() {
    let p = proxy(&["allowed.test"], &[]).await;
    let names: Vec<String> = (0..40).map(|i| format!("h{i}.test")).collect();
    for name in names.iter().chain(names.iter().take(5)) {
        let mut c = dial(&p).await;
        assert!(
            connect_via(&mut c, &format!("{name}:443"))
                .await
                .starts_with("HTTP/1.1 403")
        );
    }
    assert_eq!(p.refusals(), 45);
    assert_eq!(p.refused_hosts(), names[..MAX_REFUSED_HOSTS].to_vec());
}

#[tokio::test]
async fn not_observed_is_distinct_from_observed_zero() {
    let none = EgressReport::not_observed();
    assert_eq!((none.refusals, none.admitted), (None, None));
    let p = proxy(&["allowed.test"], &[]).await;
    let zero = p.report();
    assert_eq!((zero.refusals, zero.admitted), (Some(0), Some(0)));
    assert_ne!(none, zero);
}

#[tokio::test]
async fn an_allowed_name_missing_from_the_resolver_answers_502_not_403() {
    let p = proxy(&["allowed.test"], &[]).await;
    let mut c = dial(&p).await;
    assert!(
        connect_via(&mut c, "allowed.test:443")
            .await
            .starts_with("HTTP/1.1 502")
    );
    assert_eq!(p.refusals(), 0);
}

#[tokio::test]
async fn a_server_that_speaks_first_is_heard_before_the_client_sends() {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        if let Ok((mut s, _)) = l.accept().await {
            let _ = s.write_all(b"220 ready\r\n").await;
            let (mut r, mut w) = s.split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
        }
    });
    let p = proxy(&["mail.test:25"], &[("mail.test", addr)]).await;
    let mut c = dial(&p).await;
    assert!(
        connect_via(&mut c, "mail.test:25")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let mut greeting = [0u8; 11];
    tokio::time::timeout(LIMIT, c.read_exact(&mut greeting))
        .await
        .expect("greeting in time")
        .expect("greeting");
    assert_eq!(&greeting, b"220 ready\r\n");
    assert_eq!(echo_round(&mut c, b"EHLO x\r\n").await, b"EHLO x\r\n");
}

#[tokio::test]
async fn a_client_hello_sent_in_pieces_is_reassembled_before_the_check() {
    let echo = echo_server().await;
    let p = proxy(&["allowed.test"], &[("allowed.test", echo)]).await;
    let mut c = dial(&p).await;
    assert!(
        connect_via(&mut c, "allowed.test:443")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let hello = fake_client_hello(Some("allowed.test"));
    for piece in hello.chunks(7) {
        c.write_all(piece).await.expect("write piece");
        c.flush().await.expect("flush");
    }
    let mut got = vec![0u8; hello.len()];
    tokio::time::timeout(LIMIT, c.read_exact(&mut got))
        .await
        .expect("echo in time")
        .expect("echo");
    assert_eq!(got, hello);
    assert_eq!(p.refusals(), 0);
}

#[test]
fn public_egress_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<EgressProxy>();
    check::<EgressReport>();
    check::<HostRule>();
    check::<io_harness::egress::EgressConfig>();
}

// ---- Runs: the agent's commands through the real native sandbox and its bridge ----

mod runs {
    use std::net::IpAddr;

    use io_harness::audit::AuditLog;
    use io_harness::contract::NetworkSetting;
    use io_harness::provider::{ScriptTurn, Scripted};
    use io_harness::run::RunOptions;
    use io_harness::{Store, TaskContract, Verification, run_with};
    use serde_json::json;

    use super::http_server;

    fn cmd(argv: &[&str]) -> ScriptTurn {
        ScriptTurn::tool("run_command", json!({ "argv": argv }))
    }

    struct Fx {
        _dir: tempfile::TempDir,
        ws: std::path::PathBuf,
        audit: AuditLog,
    }

    fn fixture() -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let audit = AuditLog::new(dir.path().join("audit"));
        Fx {
            ws,
            audit,
            _dir: dir,
        }
    }

    fn contract(fx: &Fx) -> TaskContract {
        TaskContract::workspace("fetch", &fx.ws, Verification::command(["true"]))
            .max_verify_attempts(1)
    }

    /// `allowlist`: `web.test` (pinned to the host's loopback by `[sandbox] resolve`)
    /// is reached through the proxy, `other.test` and an IP literal are refused, and
    /// every session records the posture, the resolved allowlist and the reported counts
    /// in the store and the audit log.
    #[tokio::test]
    async fn a_run_reaches_an_allowed_host_and_records_refusals() {
        let up = http_server().await;
        let fx = fixture();
        let store = Store::memory().unwrap();
        let mut c = contract(&fx);
        c.sandbox.network = NetworkSetting::Allowlist;
        c.sandbox.allow_hosts = vec!["web.test".into()];
        c.sandbox
            .resolve
            .insert("web.test".into(), IpAddr::from([127, 0, 0, 1]));
        let port = up.port().to_string();
        let ok_url = format!("http://web.test:{port}/");
        let other_url = format!("http://other.test:{port}/");
        let ip_url = format!("http://127.0.0.1:{port}/");
        let code = [
            "-sS",
            "--max-time",
            "20",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ];
        let refused = |url: &str| {
            let mut a = vec!["curl"];
            a.extend(code);
            a.push(url);
            a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        };
        let (r_other, r_ip) = (refused(&other_url), refused(&ip_url));
        let provider = Scripted::new(vec![
            cmd(&["curl", "-sS", "--max-time", "20", &ok_url]),
            cmd(&r_other.iter().map(String::as_str).collect::<Vec<_>>()),
            cmd(&r_ip.iter().map(String::as_str).collect::<Vec<_>>()),
            ScriptTurn::text("done"),
        ]);
        let opts = RunOptions {
            audit: Some(fx.audit.clone()),
            ..RunOptions::default()
        };
        let r = run_with(&c, &provider, &store, opts).await.unwrap();
        let steps = store.steps(r.run_id).unwrap();
        let out = |i: usize| steps[i].tool_calls[0].output.clone();
        assert!(out(0).contains("GET / HTTP/1.1"), "{}", out(0));
        assert!(out(1).contains("403"), "{}", out(1));
        assert!(out(2).contains("403"), "{}", out(2));

        let sessions = store.sandbox_sessions(r.run_id).unwrap();
        let tools: Vec<_> = sessions.iter().filter(|s| s.purpose == "tool").collect();
        assert_eq!(tools.len(), 3);
        for s in &sessions {
            assert_eq!(s.backend, "linux-namespaces");
            assert_eq!(s.network, "allowlist");
            assert_eq!(s.allow_hosts_json, r#"["web.test"]"#);
        }
        assert_eq!(tools[0].egress_refusals_reported, Some(0));
        assert_eq!(tools[0].egress_admitted_reported, Some(1));
        assert_eq!(tools[0].egress_refused_hosts_json, "[]");
        assert_eq!(tools[1].egress_refusals_reported, Some(1));
        assert_eq!(tools[1].egress_refused_hosts_json, r#"["other.test"]"#);
        assert_eq!(tools[2].egress_refusals_reported, Some(1));
        assert_eq!(tools[2].egress_refused_hosts_json, r#"["127.0.0.1"]"#);
        let layers: serde_json::Value = serde_json::from_str(&tools[0].layers_json).unwrap();
        assert_eq!(layers["proxy_bridge"], json!(true));

        let lines = fx.audit.read_all().unwrap();
        let tool_lines: Vec<_> = lines.iter().filter(|l| l.argv[0] == "curl").collect();
        assert_eq!(tool_lines.len(), 3);
        assert!(tool_lines.iter().all(|l| l.network == "allowlist"));
        assert!(tool_lines.iter().all(|l| l.allow_hosts == ["web.test"]));
        assert_eq!(tool_lines[0].egress_denied_reported, Some(0));
        assert_eq!(tool_lines[1].egress_denied_reported, Some(1));
        assert_eq!(tool_lines[1].egress_denied_hosts_reported, ["other.test"]);
    }

    /// An allowlist on the portable floor (no private network namespace, so no bridge)
    /// is held to no network at all, and recorded as what was in force: posture `none`,
    /// no allowlist, refusals not observed.
    #[tokio::test]
    async fn an_allowlist_the_floor_cannot_bridge_is_recorded_as_none() {
        let up = http_server().await;
        let fx = fixture();
        let store = Store::memory().unwrap();
        let url = format!("http://web.test:{}/", up.port());
        let mut c = TaskContract::workspace(
            "fetch",
            &fx.ws,
            Verification::command([
                "sh",
                "-c",
                &format!("curl -sS --max-time 10 {url} && exit 1 || exit 0"),
            ]),
        )
        .max_verify_attempts(1);
        c.sandbox.network = NetworkSetting::Allowlist;
        c.sandbox.allow_hosts = vec!["web.test".into()];
        c.sandbox
            .resolve
            .insert("web.test".into(), IpAddr::from([127, 0, 0, 1]));
        let provider = Scripted::new(vec![ScriptTurn::text("done")]);
        let opts = RunOptions {
            audit: Some(fx.audit.clone()),
            sandbox: Some(std::sync::Arc::new(io_harness::sandbox::FloorSandbox::new())),
            ..RunOptions::default()
        };
        let r = run_with(&c, &provider, &store, opts).await.unwrap();
        assert!(
            matches!(r.outcome, io_harness::RunOutcome::Success),
            "{:?}",
            r.outcome
        );
        let sessions = store.sandbox_sessions(r.run_id).unwrap();
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].backend, "portable-floor");
        assert_eq!(sessions[0].network, "none");
        assert_eq!(sessions[0].allow_hosts_json, "[]");
        assert_eq!(sessions[0].egress_refusals_reported, None);
        let lines = fx.audit.read_all().unwrap();
        assert_eq!(lines[0].network, "none");
        assert_eq!(lines[0].egress_denied_reported, None);
    }

    /// `none`: no proxy, no route — the host's listener is not reached — and the record
    /// says posture `none` with refusals *not observed* (NULL / absent), not zero.
    #[tokio::test]
    async fn network_none_has_no_route_and_refusals_are_not_observed() {
        let up = http_server().await;
        let fx = fixture();
        let store = Store::memory().unwrap();
        let c = contract(&fx);
        let url = format!("http://127.0.0.1:{}/", up.port());
        let provider = Scripted::new(vec![
            cmd(&[
                "sh",
                "-c",
                &format!("curl -sS --max-time 10 {url} || echo no-route"),
            ]),
            ScriptTurn::text("done"),
        ]);
        let opts = RunOptions {
            audit: Some(fx.audit.clone()),
            ..RunOptions::default()
        };
        let r = run_with(&c, &provider, &store, opts).await.unwrap();
        let steps = store.steps(r.run_id).unwrap();
        let out = steps[0].tool_calls[0].output.clone();
        assert!(out.contains("no-route"), "{out}");
        assert!(!out.contains("GET / HTTP/1.1"), "{out}");
        let sessions = store.sandbox_sessions(r.run_id).unwrap();
        assert!(!sessions.is_empty());
        for s in &sessions {
            assert_eq!(s.network, "none");
            assert_eq!(s.allow_hosts_json, "[]");
            assert_eq!(s.egress_refusals_reported, None);
            assert_eq!(s.egress_admitted_reported, None);
        }
        let lines = fx.audit.read_all().unwrap();
        assert!(!lines.is_empty());
        for l in &lines {
            assert_eq!(l.network, "none");
            assert_eq!(l.egress_denied_reported, None);
            assert!(l.allow_hosts.is_empty());
        }
        let raw = std::fs::read_to_string(fx.audit.path()).unwrap();
        assert!(!raw.contains("egress_denied_reported"), "{raw}");
    }
}

// ---- The harness's own connections: a provider redirect is a refused `net` action ----

mod redirects {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use io_harness::provider::{HttpConfig, OpenAi, ProviderErrorKind};
    use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::read_head;

    /// Answers every request with `reply` and counts the requests.
    async fn server(reply: String) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let count = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let reply = reply.clone();
                tokio::spawn(async move {
                    let _ = read_head(&mut s).await;
                    let _ = s.write_all(reply.as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        (addr, hits)
    }

    /// A provider endpoint answering 307 to another host: the client does not follow
    /// it, the run ends escalated with a request error, and the redirect's destination
    /// is recorded as a denied `net` decision in `policy_events`.
    #[tokio::test]
    async fn a_redirect_to_another_host_is_refused_and_recorded() {
        let (elsewhere, elsewhere_hits) = server("HTTP/1.1 200 OK\r\n\r\n".into()).await;
        let location = format!("http://{elsewhere}/v1/chat/completions");
        let (api, api_hits) = server(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let provider = OpenAi::new(HttpConfig::new(
            format!("http://{api}/v1"),
            "gpt-4o-mini",
            Some("sk-redirect-test".into()),
        ))
        .unwrap();
        let store = Store::memory().unwrap();
        let c = TaskContract::workspace("g", dir.path(), Verification::command(["true"]));
        let r = run(&c, &provider, &store).await.unwrap();
        assert!(
            matches!(
                r.outcome,
                RunOutcome::Escalated {
                    kind: ProviderErrorKind::Request,
                    retryable: false
                }
            ),
            "{:?}",
            r.outcome
        );
        assert_eq!(api_hits.load(Ordering::SeqCst), 1);
        assert_eq!(
            elsewhere_hits.load(Ordering::SeqCst),
            0,
            "the redirect was followed"
        );
        let events = store.policy_events(r.run_id).unwrap();
        let net: Vec<_> = events.iter().filter(|e| e.act == "net").collect();
        // The configured endpoint, allowed before the first call; then the redirect, denied.
        assert!(
            net.iter()
                .any(|e| e.target == api.to_string() && e.decision == "allow"),
            "{net:?}"
        );
        let refused: Vec<_> = net.iter().filter(|e| e.decision == "deny").collect();
        assert_eq!(refused.len(), 1, "{net:?}");
        assert_eq!(refused[0].target, elsewhere.to_string());
        assert_eq!(refused[0].layer, "provider");
    }
}

// ---- `io-harness sandbox --network allowlist` ----

mod cli {
    use std::process::Command;

    use io_harness::audit::AuditLog;

    use super::http_server;

    /// The operator's one-command form: an allowed (pinned) name is reached, another is
    /// refused, the summary names the refusal, and the audit line records the posture,
    /// the allowlist and the reported count.
    #[tokio::test]
    async fn sandbox_command_with_an_allowlist() {
        let up = http_server().await;
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let config = dir.path().join("config");
        let port = up.port();
        let script = format!(
            "curl -sS --max-time 20 -o /dev/null -w 'ok=%{{http_code}} ' http://web.test:{port}/; \
             curl -sS --max-time 20 -o /dev/null -w 'other=%{{http_code}}' http://other.test:{port}/"
        );
        let out = tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_io-harness"))
                .args(["sandbox", "--workdir"])
                .arg(&ws)
                .args([
                    "--network",
                    "allowlist",
                    "--allow-host",
                    "web.test",
                    "--resolve",
                    "web.test=127.0.0.1",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ])
                .env("XDG_CONFIG_HOME", &config)
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        assert_eq!(stdout, "ok=200 other=403", "{stderr}");
        assert!(
            stderr.contains("egress allowlist [web.test]: 1 refused (other.test)"),
            "{stderr}"
        );
        let log = AuditLog::new(dir.path().join("config/io-harness/audit"));
        let lines = log.read_all().unwrap();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].network, "allowlist");
        assert_eq!(lines[0].allow_hosts, ["web.test"]);
        assert_eq!(lines[0].egress_denied_reported, Some(1));
        assert_eq!(lines[0].egress_admitted_reported, Some(1));

        // Hosts without the posture are a usage error (exit 2), not silently ignored.
        let bad = Command::new(env!("CARGO_BIN_EXE_io-harness"))
            .args(["sandbox", "--allow-host", "web.test", "--", "true"])
            .env("XDG_CONFIG_HOME", dir.path().join("config2"))
            .output()
            .unwrap();
        assert_eq!(bad.status.code(), Some(2));
    }
}
