//! A real headless Chromium (Debian's `chromium`) that loads a page with the network
//! off and reports what it rendered and what the page asked the network for.
//!
//! Chromium refuses to run as root without `--no-sandbox`, so as root it runs as
//! `nobody` (uid 65534) in a fresh network namespace (`unshare -n`, no route out);
//! otherwise as the current user in its own user and network namespaces. Host names
//! resolve to nothing (`--host-resolver-rules`). Every URL request it makes is in its
//! NetLog; the ones a document started (an initiator other than "not an origin", which
//! marks the browser's own background fetches) are the page's requests, and the tests
//! want none.
//!
//! CI installs Chromium (scripts/setup-test-env.sh), so a missing one fails the test;
//! `IO_HARNESS_SKIP_CHROMIUM=1` skips it with a loud message instead.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What Chromium made of a page.
pub struct Rendered {
    /// The DOM after scripts ran (`--dump-dom`).
    pub dom: String,
    /// URLs the page itself requested.
    pub page_requests: Vec<String>,
}

/// Whether Chromium tests are skipped (loudly) on this machine.
pub fn skipped(test: &str) -> bool {
    if std::env::var_os("IO_HARNESS_SKIP_CHROMIUM").is_some_and(|v| v == "1") {
        eprintln!(
            "\n*** {test}: SKIPPED the Chromium part (IO_HARNESS_SKIP_CHROMIUM=1); CI runs it ***\n"
        );
        return true;
    }
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "{test}: /usr/bin/chromium is missing: install Debian's `chromium` (scripts/setup-test-env.sh does as root), or set IO_HARNESS_SKIP_CHROMIUM=1 to skip"
    );
    false
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A directory Chromium's user can read (and, for `out`, write).
fn shared_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    if is_root() {
        std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
    }
    (dir, out)
}

fn command(out: &Path) -> Command {
    let mut c = if is_root() {
        let mut c = Command::new("unshare");
        c.args([
            "-n",
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]);
        c
    } else {
        let mut c = Command::new("unshare");
        c.args(["--user", "--map-current-user", "--net"]);
        c
    };
    c.arg("chromium")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", out)
        .env("XDG_CONFIG_HOME", out)
        .env("XDG_CACHE_HOME", out)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",
        ])
        .arg(format!("--user-data-dir={}", out.join("profile").display()));
    c
}

/// Loads `page` (an HTML file) with the network off: the DOM, and the page's requests.
/// With `screenshot`, also writes a PNG there (`width` × `height` pixels).
pub fn render(page: &Path, screenshot: Option<(&Path, u32, u32)>) -> Rendered {
    let (dir, out) = shared_dir();
    let local = dir.path().join("page.html");
    std::fs::copy(page, &local).unwrap();
    std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o644)).unwrap();
    let url = format!("file://{}", local.display());
    let netlog = out.join("net.json");
    let dump = command(&out)
        .arg(format!("--log-net-log={}", netlog.display()))
        .args(["--dump-dom", &url])
        .output()
        .expect("run chromium");
    assert!(
        dump.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let page_requests = page_requests(&std::fs::read_to_string(&netlog).unwrap());
    if let Some((png, w, h)) = screenshot {
        let shot = out.join("shot.png");
        let o = command(&out)
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("--window-size={w},{h}"))
            .arg(&url)
            .output()
            .expect("run chromium");
        assert!(
            o.status.success() && shot.exists(),
            "chromium screenshot failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::create_dir_all(png.parent().unwrap()).unwrap();
        std::fs::copy(&shot, png).unwrap();
    }
    Rendered {
        dom: String::from_utf8_lossy(&dump.stdout).into_owned(),
        page_requests,
    }
}

/// The URLs of the URL requests a document initiated, from a NetLog file (possibly
/// cut short: Chromium may exit before closing its JSON).
fn page_requests(netlog: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(netlog)
        .or_else(|_| {
            serde_json::from_str(&format!("{}]}}", netlog.trim_end().trim_end_matches(',')))
        })
        .expect("a NetLog");
    let start = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .expect("the NetLog names URL_REQUEST_START_JOB");
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start))
        .filter_map(|e| {
            let p = &e["params"];
            let url = p["url"].as_str()?;
            (p["initiator"].as_str() != Some("not an origin")).then(|| url.to_string())
        })
        .collect()
}

/// A page that fetches things is seen fetching them (the check above can fail).
#[test]
fn a_page_that_requests_something_is_caught() {
    if skipped("a_page_that_requests_something_is_caught") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<html><body><img src=\"http://example.invalid/x.png\"><p id=\"p\">hi</p></body></html>",
    )
    .unwrap();
    let r = render(&page, None);
    assert!(r.dom.contains("<p id=\"p\">hi</p>"), "{}", r.dom);
    assert_eq!(r.page_requests, ["http://example.invalid/x.png"]);
}
