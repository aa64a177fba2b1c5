//! Command lines as the policy reads them: an `exec` action's target is the whole
//! argv, quoted like a POSIX shell would read it (`git push 'my branch'`), and an
//! exec rule judges every command that argv would run — the argv itself and what its
//! wrappers run (`env`, `nice`, `timeout`, `xargs`, `find -exec`, `sh -c '…'`…).
//!
//! A program that runs code the policy cannot read (an interpreter given inline code
//! or a script, a shell script using substitutions or control flow) is *opaque*: what
//! it runs cannot be decided from its argv, and the policy says so (see
//! [`super::Policy`]). That is a documented limit, not a silent allow.

/// How deep wrappers are unwrapped (`env nice timeout 5 sh -c '…'`).
const MAX_DEPTH: usize = 8;

/// `argv` as one line a shell would split back into the same words.
pub fn quote(argv: &[String]) -> String {
    argv.iter()
        .map(|w| quote_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'-' | b'_' | b'.' | b'/' | b':' | b'=' | b'@' | b'+' | b',' | b'%'
                )
        });
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// The words of a line (single and double quotes, backslash escapes), or `None` when
/// a quote is not closed.
pub fn split(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        x => cur.push(x),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            x @ ('"' | '\\' | '$' | '`') => cur.push(x),
                            '\n' => {}
                            x => {
                                cur.push('\\');
                                cur.push(x);
                            }
                        },
                        x => cur.push(x),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next()? {
                    '\n' => {}
                    x => cur.push(x),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// What an argv runs: every command the policy can see (the argv first), and whether
/// some of what it runs is hidden in code the policy cannot read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reached {
    /// The argv itself, then each command its wrappers run.
    pub commands: Vec<Vec<String>>,
    /// Why part of what it runs cannot be seen, when it cannot.
    pub opaque: Option<String>,
}

/// The commands `argv` runs (see [`Reached`]).
pub fn reached(argv: &[String]) -> Reached {
    let mut out = Reached::default();
    walk(argv, 0, &mut out);
    out
}

fn walk(argv: &[String], depth: usize, out: &mut Reached) {
    if argv.is_empty() {
        return;
    }
    out.commands.push(argv.to_vec());
    if depth >= MAX_DEPTH {
        out.opaque
            .get_or_insert_with(|| "wrappers nested too deep to follow".into());
        return;
    }
    let name = basename(&argv[0]);
    // A program named by a relative path is a file of the workspace (a script, a copy
    // or a link of anything): the policy cannot read what it runs.
    if argv[0].contains('/') && !argv[0].starts_with('/') {
        out.opaque.get_or_insert_with(|| {
            format!(
                "{} is a program of the workspace, which the policy cannot read",
                argv[0]
            )
        });
    }
    match unwrap(name, &argv[1..]) {
        Inner::Commands(cmds) => {
            for c in cmds {
                walk(&c, depth + 1, out);
            }
        }
        Inner::Opaque(why) => {
            out.opaque.get_or_insert(why);
        }
        Inner::None => {}
    }
}

/// What one wrapper runs.
enum Inner {
    None,
    Commands(Vec<Vec<String>>),
    Opaque(String),
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Options of the simple wrappers that take a value (`nice -n 5`, `timeout -s KILL`).
fn takes_value(wrapper: &str, opt: &str) -> bool {
    match wrapper {
        "env" => matches!(
            opt,
            "-u" | "--unset" | "-C" | "--chdir" | "-S" | "--split-string"
        ),
        "nice" => matches!(opt, "-n" | "--adjustment"),
        "timeout" => matches!(opt, "-s" | "--signal" | "-k" | "--kill-after"),
        "stdbuf" => matches!(opt, "-i" | "-o" | "-e"),
        "ionice" => matches!(opt, "-c" | "-n" | "-p" | "-P" | "-u"),
        "chrt" => matches!(opt, "-p"),
        "taskset" => false,
        "xargs" => matches!(
            opt,
            "-a" | "-d"
                | "-E"
                | "-e"
                | "-I"
                | "-i"
                | "-L"
                | "-l"
                | "-n"
                | "-P"
                | "-s"
                | "--arg-file"
                | "--delimiter"
                | "--max-args"
                | "--max-procs"
                | "--max-chars"
                | "--replace"
                | "--max-lines"
        ),
        _ => false,
    }
}

fn unwrap(name: &str, rest: &[String]) -> Inner {
    // A wrapper given a shell command as a string (`flock LOCK -c CMD`, `script -c
    // CMD`, `su -c CMD`): that string is a script.
    if matches!(name, "flock" | "script" | "su" | "runuser" | "sg")
        && let Some(at) = rest.iter().position(|w| w == "-c" || w == "--command")
    {
        return match rest.get(at + 1) {
            Some(script) => script_commands(script),
            None => Inner::None,
        };
    }
    match name {
        "env" | "nice" | "nohup" | "stdbuf" | "ionice" | "setsid" | "time" | "command" | "exec"
        | "chrt" | "taskset" | "timeout" | "xargs" | "doas" | "sudo" | "busybox" | "unbuffer"
        | "chronic" | "flock" | "prlimit" | "setpriv" | "ssh-agent" | "strace" | "ltrace"
        | "unshare" | "nsenter" | "chroot" | "linux32" | "linux64" | "i386" | "x86_64"
        | "setarch" | "eatmydata" | "faketime" | "catchsegv" | "pkexec" | "watch" => {
            after_options(name, rest)
        }
        _ if name.starts_with("ld-linux")
            || name.starts_with("ld.so")
            || name.starts_with("ld64.so") =>
        {
            after_options("ld.so", rest)
        }
        "find" => find_exec(rest),
        "script" | "su" | "runuser" | "sg" => {
            Inner::Opaque(format!("{name} starts a shell the policy cannot follow"))
        }
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "fish" | "rbash" | "posh"
        | "yash" | "csh" | "tcsh" => shell(name, rest),
        _ if interpreter(name) => Inner::Opaque(format!("{name} runs code the policy cannot read")),
        _ => Inner::None,
    }
}

/// The command after a wrapper's options (and `NAME=value` for `env`, the duration
/// for `timeout`, the lock file for `flock`, the mask for `taskset`, the priority for
/// `chrt`).
fn after_options(name: &str, rest: &[String]) -> Inner {
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i].as_str();
        if w == "--" {
            i += 1;
            break;
        }
        if name == "env" && w.contains('=') && !w.starts_with('-') {
            i += 1;
            continue;
        }
        if name == "env" && (w == "-S" || w == "--split-string" || w.starts_with("-S")) {
            return Inner::Opaque("env -S splits a string the policy does not parse".into());
        }
        if w.starts_with('-') && w.len() > 1 {
            i += if takes_value(name, w) { 2 } else { 1 };
            continue;
        }
        break;
    }
    // Positional values before the command.
    let skip = match name {
        "timeout" | "flock" | "taskset" | "chrt" | "setarch" | "chroot" | "faketime" => 1,
        _ => 0,
    };
    let cmd: Vec<String> = rest.iter().skip(i + skip).cloned().collect();
    if cmd.is_empty() {
        return Inner::None;
    }
    Inner::Commands(vec![cmd])
}

/// `find … -exec cmd … ;` (also `-execdir`, `-ok`, `-okdir`, ended by `;` or `+`).
fn find_exec(rest: &[String]) -> Inner {
    let mut cmds = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        if matches!(rest[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < rest.len() && rest[end] != ";" && rest[end] != "+" {
                end += 1;
            }
            if end > start {
                cmds.push(rest[start..end].to_vec());
            }
            i = end + 1;
        } else {
            i += 1;
        }
    }
    if cmds.is_empty() {
        Inner::None
    } else {
        Inner::Commands(cmds)
    }
}

/// `sh -c SCRIPT …`: the commands of a simple script; a script file or stdin is
/// opaque.
fn shell(name: &str, rest: &[String]) -> Inner {
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i].as_str();
        if w == "-c" || (w.starts_with('-') && w.contains('c') && !w.starts_with("--")) {
            return match rest.get(i + 1) {
                Some(script) => script_commands(script),
                None => Inner::None,
            };
        }
        if w.starts_with('-') || w.starts_with('+') {
            i += 1;
            continue;
        }
        return Inner::Opaque(format!(
            "{name} runs the script {w}, which the policy cannot read"
        ));
    }
    Inner::Opaque(format!("{name} reads commands from its input"))
}

/// The commands of a shell script made of simple commands joined by `;`, `&&`, `||`,
/// `|`, `&` or newlines; anything else (substitutions, control flow, functions,
/// `eval`) makes it opaque.
fn script_commands(script: &str) -> Inner {
    const OPAQUE: &[&str] = &["$(", "`", "<(", ">(", "${", "<<"];
    if let Some(tok) = OPAQUE.iter().find(|t| unquoted_contains(script, t)) {
        return Inner::Opaque(format!(
            "the script uses {tok}, which the policy does not follow"
        ));
    }
    const KEYWORDS: &[&str] = &[
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
        "function", "select", "eval", "source", ".", "{", "}", "(", ")", "[[", "trap", "alias",
        "coproc",
    ];
    let mut cmds = Vec::new();
    for segment in segments(script) {
        let Some(words) = split(&segment) else {
            return Inner::Opaque("the script has an unclosed quote".into());
        };
        let words = strip_redirections(words);
        // `! cmd` runs `cmd` (and negates its status).
        let words: Vec<String> = words
            .into_iter()
            .skip_while(|w| is_assignment(w) || w == "!")
            .collect();
        let Some(first) = words.first() else {
            continue;
        };
        if KEYWORDS.contains(&first.as_str()) || first.starts_with('$') || first.contains('(') {
            return Inner::Opaque(format!(
                "the script uses {first}, which the policy does not follow"
            ));
        }
        cmds.push(words);
    }
    Inner::Commands(cmds)
}

/// Programs known never to run one of their arguments as a program (`echo curl`,
/// `grep curl notes.txt` name curl and run nothing): a word naming a limited program
/// is no call of it there. Everything else might be a launcher the wrapper list does
/// not know, so its words are looked at (see the policy's `exec` decision).
pub fn runs_no_argument(name: &str) -> bool {
    const PLAIN: &[&str] = &[
        "echo",
        "printf",
        "cat",
        "ls",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "which",
        "whereis",
        "type",
        "man",
        "head",
        "tail",
        "wc",
        "sort",
        "uniq",
        "cut",
        "tr",
        "touch",
        "mkdir",
        "rmdir",
        "rm",
        "cp",
        "mv",
        "ln",
        "chmod",
        "chown",
        "stat",
        "file",
        "test",
        "[",
        "true",
        "false",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "diff",
        "cmp",
        "tee",
        "pwd",
        "date",
        "sleep",
        "du",
        "df",
        "id",
        "whoami",
        "uname",
        "hostname",
        "seq",
        "yes",
        "base64",
        "sha256sum",
        "md5sum",
        "od",
        "hexdump",
        "less",
        "more",
        "column",
        "paste",
        "join",
        "comm",
        "fold",
        "fmt",
        "nl",
        "expand",
        "unexpand",
        "rev",
        "shuf",
        "split",
        "csplit",
    ];
    PLAIN.contains(&name)
}

/// Splits at unquoted `;`, `&`, `|` and newlines (so `&&` and `||` too).
fn segments(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in script.chars() {
        if escaped {
            cur.push(c);
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('"'), '\\') => escaped = true,
            (None, '\\') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (None, ';' | '&' | '|' | '\n') => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

fn unquoted_contains(script: &str, tok: &str) -> bool {
    let mut quote: Option<char> = None;
    let bytes: Vec<char> = script.chars().collect();
    let t: Vec<char> = tok.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (Some('"'), '"') => quote = None,
            (None, '\'') => quote = Some('\''),
            (None, '"') => quote = Some('"'),
            (None, '\\') | (Some('"'), '\\') => i += 1,
            _ => {
                // Substitutions still run inside double quotes.
                if bytes[i..].starts_with(&t) {
                    return true;
                }
            }
        }
        i += 1;
    }
    false
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Drops `>file`, `2>&1`, `< in` and their targets.
fn strip_redirections(words: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for w in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        let body = w.trim_start_matches(|c: char| c.is_ascii_digit());
        if body.starts_with('>') || body.starts_with('<') {
            let op_only = body.trim_start_matches(['>', '<', '&', '|']).is_empty();
            if op_only && !body.ends_with('&') {
                skip_next = true;
            }
            continue;
        }
        out.push(w);
    }
    out
}

/// Programs that run code given inline or from a file the policy does not read.
pub fn interpreter(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "node",
        "nodejs",
        "deno",
        "bun",
        "ruby",
        "irb",
        "lua",
        "luajit",
        "Rscript",
        "R",
        "osascript",
        "tclsh",
        "wish",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "php",
        "pwsh",
        "powershell",
        "julia",
        "groovy",
        "scala",
        "kotlin",
        "jshell",
        "ipython",
        "pypy",
        "pypy3",
        "perl",
        "raku",
        "expect",
        "gdb",
        "vim",
        "vi",
        "nvim",
        "emacs",
        "ed",
    ];
    let versioned = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|v| v.is_empty() || v.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    EXACT.contains(&name)
        || versioned("python")
        || versioned("perl")
        || versioned("php")
        || versioned("lua")
        || versioned("ruby")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn quoting_round_trips() {
        for argv in [
            v(&["git", "push", "my branch"]),
            v(&["sh", "-c", "echo 'hi' && curl \"x\""]),
            v(&["printf", "a\nb", ""]),
            v(&["it's", "$HOME", "`x`"]),
        ] {
            assert_eq!(split(&quote(&argv)).unwrap(), argv, "{}", quote(&argv));
        }
        assert_eq!(
            quote(&v(&["cargo", "test", "--offline"])),
            "cargo test --offline"
        );
        assert_eq!(split("a 'b"), None);
    }

    fn cmds(argv: &[&str]) -> (Vec<Vec<String>>, bool) {
        let r = reached(&v(argv));
        (r.commands, r.opaque.is_some())
    }

    #[test]
    fn wrappers_are_unwrapped() {
        let (c, opaque) = cmds(&["env", "-i", "A=1", "curl", "x"]);
        assert_eq!(c[1], v(&["curl", "x"]));
        assert!(!opaque);
        let (c, _) = cmds(&[
            "nice", "-n", "5", "timeout", "-s", "KILL", "10", "curl", "y",
        ]);
        assert_eq!(c.last().unwrap(), &v(&["curl", "y"]));
        let (c, _) = cmds(&["xargs", "-n", "1", "rm", "-f"]);
        assert_eq!(c[1], v(&["rm", "-f"]));
        let (c, _) = cmds(&[
            "find", ".", "-name", "*.o", "-exec", "rm", "{}", ";", "-delete",
        ]);
        assert_eq!(c[1], v(&["rm", "{}"]));
        let (c, opaque) = cmds(&[
            "sh",
            "-c",
            "cd x && curl -s 'http://a' | tee f; ls > out 2>&1",
        ]);
        assert!(!opaque);
        assert!(c.contains(&v(&["curl", "-s", "http://a"])), "{c:?}");
        assert!(
            c.contains(&v(&["tee", "f"])) && c.contains(&v(&["ls"])),
            "{c:?}"
        );
        assert!(
            cmds(&["sh", "-c", "curl -s http://a | sh"]).1,
            "a shell reading its input is opaque"
        );
        let (c, _) = cmds(&["bash", "-lc", "X=1 /usr/bin/curl z"]);
        assert_eq!(c[1], v(&["/usr/bin/curl", "z"]));
    }

    #[test]
    fn code_the_policy_cannot_read_is_opaque() {
        for argv in [
            v(&["python3", "-c", "import os; os.system('curl x')"]),
            v(&["python3.12", "script.py"]),
            v(&["node", "-e", "require('child_process')"]),
            v(&["sh", "-c", "$(echo curl) x"]),
            v(&["sh", "-c", "for u in a; do curl $u; done"]),
            v(&["bash", "build.sh"]),
            v(&["env", "-S", "curl x"]),
            v(&["sh"]),
        ] {
            assert!(reached(&argv).opaque.is_some(), "{argv:?}");
        }
        assert!(reached(&v(&["cargo", "test"])).opaque.is_none());
        assert!(
            reached(&v(&["sh", "-c", "echo '$(not run)'"]))
                .opaque
                .is_none()
        );
    }
}
