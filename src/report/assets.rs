//! The page's one inline style and one inline script. Their exact bytes are hashed
//! into the Content-Security-Policy when the page is written, so editing them here is
//! all a change needs.

/// The style sheet (system fonts only: nothing to fetch).
pub(crate) const STYLE: &str = r#"
:root{--fg:#1d1d1f;--muted:#6b6b70;--line:#dcdce0;--bg:#fff;--soft:#f5f5f7}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:1100px;padding:16px 24px}
header{display:flex;justify-content:space-between;align-items:center;border-bottom:2px solid var(--line)}
h1{font-size:20px;margin:8px 0}h2{font-size:18px;margin:24px 0 8px}h3{font-size:15px;margin:20px 0 6px;border-bottom:1px solid var(--line)}
section.run{margin-bottom:40px}
dl.head{display:grid;grid-template-columns:110px 1fr;gap:4px 12px;margin:0}
dl.head dt{color:var(--muted)}dl.head dd{margin:0}
.goal{font-weight:600}
.outcome{font-weight:700;padding:1px 6px;border-radius:4px;background:#eee}
.o-success{background:#d8f5d8;color:#0a5a0a}
.o-verification_failed,.o-step_cap_reached,.o-escalated,.o-stalled{background:#fde0e0;color:#8a1010}
.o-awaiting_approval,.o-cancelled,.o-running,.o-interrupted{background:#fff1cc;color:#6b4a00}
.reason,.muted,.legend{color:var(--muted)}
table{border-collapse:collapse;margin:4px 0;font-size:13px}
th,td{border:1px solid var(--line);padding:2px 6px;text-align:left;vertical-align:top}
th{background:var(--soft)}
ol.timeline{list-style:none;padding:0;margin:0}
li.step{border-left:3px solid #4a7fc1;margin:6px 0;padding:2px 10px}
li.step.uncommitted{border-left-color:#c08000}
summary{cursor:pointer}
.untrusted{border:1px dashed #c9a227;background:#fffbea;margin:4px 0;border-radius:4px}
.ut{border-bottom:1px dashed #c9a227;background:#fffbea}
.ut::before{content:"untrusted: ";color:#8a6d00;font-size:85%}
.harness{border:1px solid var(--line);background:var(--soft);margin:4px 0;border-radius:4px}
.src{font-size:11px;color:#8a6d00;padding:1px 6px;text-transform:uppercase;letter-spacing:.04em}
.harness .src{color:var(--muted)}
pre{margin:0;padding:4px 8px;white-space:pre-wrap;word-break:break-word;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
details.tool{margin:4px 0 4px 8px}
details.tool.error>summary .mark,details.tool.refused>summary .mark{color:#a00000;font-weight:700}
details.tool.ok>summary .mark{color:#0a6a0a}
.kv{font-size:11px;color:var(--muted);margin-top:4px}
.policy.deny,tr.d-deny td{color:#8a1010}
.policy.ask,tr.d-ask td{color:#6b4a00}
.attempt{color:#6b4a00;margin:4px 0}.said{color:var(--muted)}
.cut{color:#8a1010;font-style:italic}
pre.diff .da{color:#0a6a0a;background:#eaffea;display:inline-block;width:100%}
pre.diff .dd{color:#9a1010;background:#ffecec;display:inline-block;width:100%}
pre.diff .dk{color:#3050a0}
pre.diff .dh{font-weight:700}
svg.chart{max-width:100%;height:auto;background:var(--soft);border-radius:4px}
.k-in{color:#4a7fc1}.k-out{color:#e0a030}.k-est{color:#aaa}.k-cost{color:#b06000}
ul.tree{margin:2px 0}
button{font:inherit;padding:2px 8px}
"#;

/// Expand / collapse every section, and a mark that the script ran (a test reads it
/// from the rendered DOM: the policy's hash admits exactly this script).
pub(crate) const SCRIPT: &str = r#"
(function(){
  document.documentElement.setAttribute("data-script","ran");
  function all(open){document.querySelectorAll("details").forEach(function(d){d.open=open;});}
  var e=document.getElementById("expand-all"),c=document.getElementById("collapse-all");
  if(e){e.addEventListener("click",function(){all(true);});}
  if(c){c.addEventListener("click",function(){all(false);});}
})();
"#;
