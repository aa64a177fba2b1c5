//! Network containment: no TCP, UDP or DNS reaches the host; host unix sockets
//! (pathname and abstract) are unreachable; exotic socket families and io_uring are
//! refused. Host listeners count what arrived.

use std::io::Write;
use std::path::PathBuf;

use io_harness_sandbox::Sandbox;

use crate::common::*;

/// Python that tries `family` stream `connect(addr)` and prints the outcome.
fn connect_code(family: &str, addr: &str) -> String {
    format!(
        "import socket\n\
         try:\n  s=socket.socket({family}, socket.SOCK_STREAM); s.settimeout(5); s.connect({addr}); print('CONNECTED')\n\
         except OSError as e: print('ERR', e.errno, e)"
    )
}

fn tcp_to_host_loopback(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let l = TcpCounter::bind("127.0.0.1:0");
    let code = connect_code("socket.AF_INET", &format!("('127.0.0.1', {})", l.port));
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.starts_with("ERR"), "{out}");
    assert_eq!(l.hits(), 0);
}
backends!(tcp_to_host_loopback, [native, floor]);

fn tcp_to_host_ipv6_loopback(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let Ok(l) = std::panic::catch_unwind(|| TcpCounter::bind("[::1]:0")) else {
        return; // no IPv6 on this host
    };
    let code = connect_code("socket.AF_INET6", &format!("('::1', {})", l.port));
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.starts_with("ERR"), "{out}");
    assert_eq!(l.hits(), 0);
}
backends!(tcp_to_host_ipv6_loopback, [native, floor]);

/// The host's own non-loopback address, if it has one.
fn host_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?; // no packet is sent
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

fn tcp_to_host_address(sb: &dyn Sandbox) {
    let Some(ip) = host_address() else { return };
    let f = Fixture::new();
    let l = TcpCounter::bind("0.0.0.0:0");
    let code = connect_code("socket.AF_INET", &format!("('{ip}', {})", l.port));
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.starts_with("ERR"), "{out}");
    assert_eq!(l.hits(), 0);
}
backends!(tcp_to_host_address, [native, floor]);

fn udp_to_host(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let l = UdpCounter::bind("127.0.0.1:0");
    let code = format!(
        "import socket\n\
         try:\n  s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n  \
         for _ in range(5): s.sendto(b'x', ('127.0.0.1', {}))\n  print('SENT')\n\
         except OSError as e: print('ERR', e.errno)",
        l.port
    );
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.starts_with("SENT") || out.starts_with("ERR"), "{out}");
    assert_eq!(l.hits(), 0, "datagrams reached the host");
}
backends!(udp_to_host, [native, floor]);

fn dns_lookup(sb: &dyn Sandbox) {
    let f = Fixture::new();
    // A DNS query to a host "resolver" on loopback, and a real lookup.
    let resolver = UdpCounter::bind("127.0.0.1:0");
    let code = format!(
        "import socket\n\
         q=bytes.fromhex('abcd01000001000000000000076578616d706c6503636f6d0000010001')\n\
         try:\n  socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(q, ('127.0.0.1', {}))\n\
         except OSError as e: pass\n\
         try:\n  print('RESOLVED', socket.getaddrinfo('example.com', 80)[0][4])\n\
         except OSError as e: print('ERR', e)",
        resolver.port
    );
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.starts_with("ERR"), "{out}");
    assert_eq!(resolver.hits(), 0);
}
backends!(dns_lookup, [native, floor]);

fn unix_socket_in(dir: PathBuf, sb: &dyn Sandbox) {
    let f = Fixture::new();
    let path = dir.join(format!("{}.sock", unique("sock")));
    let l = UnixCounter::path(&path);
    let code = connect_code("socket.AF_UNIX", &format!("'{}'", path.display()));
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.starts_with("ERR"), "{}: {out}", path.display());
    assert_eq!(l.hits(), 0, "{} was reached", path.display());
}

fn unix_socket_tmp(sb: &dyn Sandbox) {
    unix_socket_in(PathBuf::from("/tmp"), sb);
}
backends!(unix_socket_tmp, [native]);

fn unix_socket_var_tmp(sb: &dyn Sandbox) {
    unix_socket_in(PathBuf::from("/var/tmp"), sb);
}
backends!(unix_socket_var_tmp, [native]);

fn unix_socket_run(sb: &dyn Sandbox) {
    unix_socket_in(PathBuf::from("/run"), sb);
}
backends!(unix_socket_run, [native]);

fn unix_socket_home(sb: &dyn Sandbox) {
    unix_socket_in(PathBuf::from(std::env::var("HOME").unwrap()), sb);
}
backends!(unix_socket_home, [native]);

/// A listener in a directory the sandbox can see: found in /proc/net/unix and masked.
fn unix_socket_visible_dir(sb: &dyn Sandbox) {
    let dir = tempfile::Builder::new()
        .prefix("socks-")
        .tempdir_in(visible_root())
        .unwrap();
    unix_socket_in(dir.path().to_owned(), sb);
}
backends!(unix_socket_visible_dir, [native]);

fn unix_socket_abstract(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let name = unique("abstract");
    let l = UnixCounter::abstract_name(&name);
    let code = connect_code("socket.AF_UNIX", &format!("'\\0{name}'"));
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.starts_with("ERR"), "{out}");
    assert_eq!(l.hits(), 0);
}
backends!(unix_socket_abstract, [native, floor]);

fn vsock_refused(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import socket\n\
                try:\n  socket.socket(40, socket.SOCK_STREAM); print('OPENED')\n\
                except OSError as e: print('ERR', e.errno)";
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    assert_eq!(
        out.trim(),
        "ERR 1",
        "AF_VSOCK must be refused by the filter"
    );
}
backends!(vsock_refused, [native, floor]);

fn packet_socket_refused(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import socket\n\
                try:\n  socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('OPENED')\n\
                except OSError as e: print('ERR', e.errno)\n\
                try:\n  socket.socket(socket.AF_INET, socket.SOCK_RAW, 1); print('RAW')\n\
                except OSError as e: print('ERR', e.errno)";
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    assert!(!out.contains("OPENED") && !out.contains("RAW"), "{out}");
}
backends!(packet_socket_refused, [native, floor]);

fn io_uring_refused(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import ctypes\n\
                libc=ctypes.CDLL(None,use_errno=True)\n\
                p=ctypes.create_string_buffer(120)\n\
                r=libc.syscall(425,8,p); print(r, ctypes.get_errno())";
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    assert_eq!(out.trim(), "-1 1", "io_uring_setup must fail with EPERM");
}
backends!(io_uring_refused, [native, floor]);

fn loopback_works_inside(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import socket\n\
                s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\n\
                c=socket.create_connection(s.getsockname()); a,_=s.accept()\n\
                c.sendall(b'ping'); print(a.recv(4).decode())";
    let (code, out, err) = run_text(sb, &f.spec(py(code)));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "ping");
}
backends!(loopback_works_inside, [native]);

/// A server the sandbox starts is not reachable from the host.
fn sandbox_listener_unreachable(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import socket,sys\n\
                s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\n\
                print(s.getsockname()[1], flush=True); sys.stdin.read(1)";
    let mut child = sb.spawn(&f.spec(py(code))).unwrap();
    let port: u16 = read_line(child.stdout.as_mut().unwrap())
        .trim()
        .parse()
        .unwrap();
    let reached = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    child.stdin.as_mut().unwrap().write_all(b"q").unwrap();
    let out = child.wait().unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(!reached, "the host reached a listener inside the sandbox");
}
backends!(sandbox_listener_unreachable, [native]);

/// A host listener inside a workspace that lies in the hidden /tmp: the workspace is
/// brought back, so the socket must be masked explicitly.
fn unix_socket_in_workspace_under_tmp(sb: &dyn Sandbox) {
    let work = tempfile::Builder::new()
        .prefix("iohx-sockwork-")
        .tempdir_in("/tmp")
        .unwrap();
    let path = work.path().join("host.sock");
    let l = UnixCounter::path(&path);
    let code = connect_code("socket.AF_UNIX", "'host.sock'");
    let mut spec = io_harness_sandbox::RunSpec::new(py(&code), work.path());
    spec.limits = test_limits();
    let (_, out, _) = run_text(sb, &spec);
    assert!(out.starts_with("ERR"), "{out}");
    assert_eq!(l.hits(), 0);
}
backends!(unix_socket_in_workspace_under_tmp, [native]);
