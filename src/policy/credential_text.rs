//! Whether the text of a settings file holds a credential.
//!
//! A toolchain's settings file (`.npmrc`, `.pypirc`, `.yarnrc.yml`, Maven's
//! `settings.xml`, `gradle.properties`…) is readable while it holds only settings and
//! denied once it holds a credential. The judge errs toward denying: it does not parse
//! the file's syntax (INI, YAML in block or flow form, JSON, yarn v1's `key "value"`),
//! it looks for a credential key used as a key anywhere, in any of those syntaxes,
//! and for a URL with a password anywhere. A value on the next line, a flow mapping,
//! a continuation line or a byte-order mark changes nothing: the key is still there.
//! An empty value is judged a credential too; telling it apart would need the parser
//! the judge deliberately does not have.

/// How a settings file is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsKind {
    /// npm, yarn and pip files (INI, YAML, JSON or yarn v1 syntax): a credential key.
    Registry,
    /// Maven's `settings.xml`: a `<password>`, `<privateKey>` or `<passphrase>` element.
    MavenSettings,
    /// `gradle.properties`: a property whose name speaks of a password, token, secret
    /// or key.
    GradleProperties,
}

/// Keys of a registry file that hold a credential (compared without case, after any
/// `//registry/:` scope npm puts before them).
const REGISTRY_KEYS: &[&str] = &[
    "_authtoken",
    "_auth",
    "_password",
    "password",
    "token",
    "npmauthtoken",
    "npmauthident",
    "npmpassword",
    "certfile",
    "keyfile",
];

/// Maven elements that hold a credential.
const MAVEN_ELEMENTS: &[&str] = &["password", "privatekey", "passphrase"];

/// Words that make a Gradle property a credential when its name contains one.
const GRADLE_WORDS: &[&str] = &["password", "passwd", "token", "secret", "key", "credential"];

/// Whether `text`, the content of a settings file of `kind`, holds a credential.
pub fn judge(kind: SettingsKind, text: &str) -> bool {
    let text = normalise(text);
    url_with_password(&text)
        || match kind {
            SettingsKind::Registry => registry_key(&text),
            SettingsKind::MavenSettings => maven_element(&text),
            SettingsKind::GradleProperties => gradle_property(&text),
        }
}

/// Whether registry settings text (`.npmrc`, `.pypirc`, `.yarnrc`, `.yarnrc.yml`,
/// `pip.conf`) holds a credential; see the module docs.
pub fn holds_credential(text: &str) -> bool {
    judge(SettingsKind::Registry, text)
}

/// Lower case, byte-order marks dropped, every line ending a `\n` (a lone CR ends a
/// line for INI readers).
fn normalise(text: &str) -> String {
    text.replace('\u{feff}', "")
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .to_lowercase()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

fn is_comment(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with('#') || l.starts_with(';')
}

/// A registry credential key used as a key: followed (after a closing quote and
/// blanks) by `=` or `:`, or starting its line (after a `//registry/:` scope) and
/// followed by a value, as yarn v1 writes `_authToken "…"`.
fn registry_key(text: &str) -> bool {
    text.lines().filter(|l| !is_comment(l)).any(|line| {
        REGISTRY_KEYS.iter().any(|key| {
            line.match_indices(key).any(|(at, _)| {
                let before = &line[..at];
                let after = &line[at + key.len()..];
                if before.chars().next_back().is_some_and(is_ident)
                    || after.chars().next().is_some_and(is_ident)
                {
                    return false;
                }
                let rest = after.trim_start_matches(['"', '\'']);
                let rest = rest.trim_start_matches([' ', '\t']);
                if rest.starts_with(['=', ':']) {
                    return true;
                }
                let scope = before.trim().trim_matches(['"', '\'']);
                let starts_line =
                    scope.is_empty() || (scope.starts_with("//") && scope.ends_with(':'));
                starts_line && rest.len() < after.len() && !rest.is_empty()
            })
        })
    })
}

/// A Maven credential element, with or without a namespace prefix.
fn maven_element(text: &str) -> bool {
    MAVEN_ELEMENTS.iter().any(|name| {
        text.match_indices(name).any(|(at, _)| {
            let opens = text[..at].ends_with('<') || text[..at].ends_with(':');
            let closes = text[at + name.len()..]
                .chars()
                .next()
                .is_some_and(|c| c == '>' || c == '/' || c.is_whitespace());
            opens && closes
        })
    })
}

/// A Gradle property (Java properties syntax: `#`/`!` comments, `\` continuations,
/// `=`, `:` or blanks after the name, `\uXXXX` escapes) whose name holds a
/// credential word.
fn gradle_property(text: &str) -> bool {
    let logical = text.replace("\\\n", "");
    logical.lines().any(|line| {
        let line = line.trim_start();
        if line.starts_with('#') || line.starts_with('!') || line.is_empty() {
            return false;
        }
        let name = property_name(line);
        GRADLE_WORDS.iter().any(|w| name.contains(w))
    })
}

/// The name of a properties line, its escapes decoded.
fn property_name(line: &str) -> String {
    let mut name = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    if let Some(d) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        name.extend(d.to_lowercase());
                    }
                }
                Some(e) => name.push(e),
                None => {}
            },
            '=' | ':' => break,
            c if c.is_whitespace() => break,
            c => name.push(c),
        }
    }
    name
}

/// Whether `text` holds `scheme://user:password@` anywhere.
fn url_with_password(text: &str) -> bool {
    text.match_indices("://").any(|(at, _)| {
        let rest = &text[at + 3..];
        let authority = rest
            .split(|c: char| c == '/' || c.is_whitespace() || "\"'<>,{}[]()`".contains(c))
            .next()
            .unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(user, _)| user.split_once(':').is_some_and(|(_, pw)| !pw.is_empty()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_lines_are_found_and_plain_settings_are_not() {
        for (text, held) in [
            ("//registry.npmjs.org/:_authToken=npm_abcdef\n", true),
            ("_auth = dXNlcjpwYXNz\n", true),
            ("//r.example/:_password=\"cGFzcw==\"\n", true),
            ("[pypi]\nusername = __token__\npassword = pypi-AgEI\n", true),
            ("npmAuthToken: \"npm_x\"\n", true),
            (
                "registry=https://registry.npmjs.org/\nsave-exact=true\n",
                false,
            ),
            (
                "[distutils]\nindex-servers = pypi\n[pypi]\nusername = me\n",
                false,
            ),
            ("# _authToken=commented\nregistry=x\n", false),
            // Conservative: an empty value still names a credential key.
            ("password =\n", true),
            ("nodeLinker: node-modules\n", false),
            (
                "[global]\nindex-url = https://me:s3cret@pypi.example/simple\n",
                true,
            ),
            ("[global]\nindex-url = https://pypi.example/simple\n", false),
            ("registry=https://user@r.example/\n", false),
        ] {
            assert_eq!(holds_credential(text), held, "{text:?}");
        }
    }

    /// Issue 16, NP1: valid token forms the line-by-line judge missed.
    #[test]
    fn np1_registry_file_content_judge_gaps() {
        for text in [
            "npmAuthToken:\n  CANARY\n",
            "{\"npmAuthToken\": \"CANARY\"}\n",
            "{npmRegistries: {\"//npm.example\": {npmAuthToken: CANARY}}}\n",
            "npmRegistries:\n  \"//npm.example\":\n    npmAuthIdent: \"u:p\"\n",
            "[pypi]\nusername=__token__\npassword=\n    CANARY\n",
            "\u{feff}_authToken=CANARY\n",
            "\u{feff}//r.example/:_AUTHTOKEN=CANARY\r\n",
            "registry=x\r_authToken=CANARY",
            "//registry.npmjs.org/:_authToken \"CANARY\"\n",
            "\"//registry.npmjs.org/:_authToken\" CANARY\n",
            "_authToken CANARY\n",
            "{\"registries\": [{\"url\": \"https://u:CANARY@r.example\"}]}",
            "NPMPASSWORD : CANARY\n",
            "- token: CANARY\n",
        ] {
            assert!(holds_credential(text), "{text:?}");
        }
        for text in [
            "\u{feff}registry=https://registry.npmjs.org/\r\n",
            "nodeLinker: node-modules\nnpmRegistryServer: \"https://r.example\"\n",
            "{\"nodeLinker\": \"pnp\", \"enableTelemetry\": false}\n",
            "[pypi]\nusername = __token__\nrepository = https://upload.pypi.org/legacy/\n",
            "tokenizer=fast\nmy_token_dir=/tmp\n",
            "yarn-path \".yarn/releases/yarn-1.22.js\"\n",
            "[global]\ntimeout = 60\nindex-url = https://pypi.example/simple\n",
        ] {
            assert!(!holds_credential(text), "{text:?}");
        }
    }

    #[test]
    fn maven_settings_are_judged_by_their_credential_elements() {
        let m = |t: &str| judge(SettingsKind::MavenSettings, t);
        assert!(m(
            "<settings><servers><server><password>x</password></server></servers></settings>"
        ));
        assert!(m(
            "<server>\n <privateKey>${user.home}/.ssh/id</privateKey>\n</server>"
        ));
        assert!(m("<server><Passphrase >x</Passphrase></server>"));
        assert!(m("\u{feff}<s:password>x</s:password>"));
        assert!(m("<mirror><url>https://u:pw@repo.example/</url></mirror>"));
        assert!(!m(
            "<settings><mirrors><mirror><id>m</id><url>https://repo.example/</url></mirror></mirrors></settings>"
        ));
        assert!(!m(
            "<settings><!-- set the password in CI --><offline>false</offline></settings>"
        ));
    }

    #[test]
    fn gradle_properties_are_judged_by_their_names() {
        let g = |t: &str| judge(SettingsKind::GradleProperties, t);
        assert!(g("mavenPassword=x\n"));
        assert!(g("signing.keyId=ABCD\n"));
        assert!(g("ossrhToken : x\n"));
        assert!(g("systemProp.https.proxyPassword x\n"));
        assert!(g("my\\u0050assword=x\n"));
        assert!(g("org.gradle.jvmargs=-Xmx2g \\\n  -Dx=1\nnexus_secret=y\n"));
        assert!(!g(
            "org.gradle.jvmargs=-Xmx2g\nandroid.useAndroidX=true\n# password=x\n! token=y\n"
        ));
    }
}
