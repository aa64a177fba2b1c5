//! The built-in layer: the floor every policy stands on.
//!
//! Secrets are unreadable and unwritable, and the agent cannot rewrite what steers it
//! or records it: repository internals, the harness's own directory and the
//! operator's instructions file. Only an explicit operator override lifts one of
//! these, and that is recorded.

use std::path::{Component, Path, PathBuf};

use super::glob::literal_pattern;
use super::{Act, Action, Decision, PolicyDecision, PolicyError, PolicyGate, Rule};

/// Files that hold credentials: denied for reading and writing, at any depth.
///
/// The credential files of the common toolchains, clouds and key stores, and the file
/// names secret scanners flag. Grouped by what they hold; each entry has a test with
/// a path it must catch and a near miss it must not
/// (`every_secret_pattern_catches_its_example`). The settings files a toolchain
/// needs to read (`.npmrc`, `.pypirc`, `.yarnrc`, `.yarnrc.yml`, `pip.conf`,
/// `.m2/settings.xml`, `gradle.properties`…) are missing on purpose: they are judged
/// by their content (see [`super::CredentialContent`]).
pub const SECRET_PATTERNS: &[&str] = &[
    // environment files
    ".env",
    ".env.*",
    ".envrc",
    // private keys and key stores
    "*.pem",
    "*.key",
    "*.p12",
    "*.pkcs12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.kdbx",
    "*.keytab",
    "*.ovpn",
    "*.rdp",
    "*.psafe3",
    "*.agilekeychain",
    "*.keychain",
    "*.keychain-db",
    "*.bek",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "ssh_host_*_key",
    "*_rsa",
    "*_dsa",
    "*_ecdsa",
    "*_ed25519",
    "secring.*",
    "**/.gnupg/**",
    "**/.ssh/**",
    // package registries and version control
    ".netrc",
    "_netrc",
    ".git-credentials",
    "**/.config/git/credentials",
    "**/.config/hub",
    "**/.cargo/credentials",
    "**/.cargo/credentials.toml",
    "**/.gem/credentials",
    "**/.composer/auth.json",
    "**/.config/composer/auth.json",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".htpasswd",
    // cloud and cluster credentials
    "**/.aws/credentials",
    "**/.docker/config.json",
    "**/.config/containers/auth.json",
    ".dockercfg",
    "**/.kube/config",
    "**/.azure/accessTokens.json",
    "**/.azure/msal_token_cache.*",
    "application_default_credentials.json",
    "**/.config/gcloud/credentials.db",
    "**/.config/gcloud/access_tokens.db",
    "**/.config/gh/hosts.yml",
    "**/.config/rclone/rclone.conf",
    ".databrickscfg",
    "**/.pulumi/credentials.json",
    ".s3cfg",
    ".boto",
    ".terraformrc",
    "terraform.rc",
    "**/.terraform.d/credentials.tfrc.json",
    "*.tfstate",
    "*.tfstate.backup",
    "wallet.dat",
    // repository internals that carry credentials or run code
    "**/.git/config",
    "**/.git/hooks/**",
];

/// What the agent may never write: repository internals (nested repositories too)
/// and the harness's directory at the root.
pub const WRITE_PROTECTED_PATTERNS: &[&str] =
    &[".git", "**/.git/**", "/.io-harness", ".io-harness/**"];

/// The built-in rules, the instructions file (relative to the root) protected from
/// writes when there is one. An instructions path that is not relative and inside
/// is refused rather than left unprotected.
pub fn builtin_rules(instructions: Option<&Path>) -> Result<Vec<Rule>, PolicyError> {
    let mut rules = Vec::new();
    for p in SECRET_PATTERNS {
        rules.push(Rule::deny(Act::Read, *p));
        rules.push(Rule::deny(Act::Write, *p));
    }
    for p in WRITE_PROTECTED_PATTERNS {
        rules.push(Rule::deny(Act::Write, *p));
    }
    if let Some(path) = instructions {
        let rel = relative_slash_path(path).ok_or_else(|| PolicyError::Target {
            act: Act::Write,
            target: path.display().to_string(),
            reason: "the instructions file must be a relative path inside the workspace",
        })?;
        rules.push(Rule::deny(Act::Write, literal_pattern(Act::Write, &rel)));
    }
    Ok(rules)
}

/// Write denies for the operator's gate files that lie inside the workspace: the
/// criterion files of a workspace-form Rust gate (`cargo_test`) and the files a command
/// gate names (its script). An agent that could rewrite the test it is judged by
/// would be judged by nothing; its attempts are denied and recorded like any other
/// decision. (The gates also keep their own copy or hash, so a write that bypasses the
/// tools — a sandboxed command — changes nothing either.)
pub fn gate_file_rules(files: &[PathBuf]) -> Vec<Rule> {
    let mut rules: Vec<Rule> = Vec::new();
    for rel in files {
        if let Some(rel) = relative_slash_path(rel) {
            let rule = Rule::deny(Act::Write, literal_pattern(Act::Write, &rel));
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    rules
}

/// `a/b/c` for a relative path made of normal components, else `None`.
fn relative_slash_path(p: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The built-in layer: no agent writes to repository internals (`.git/`, nested ones
/// included) or to the harness's own directory (`.io-harness/`), everything else
/// allowed. It is the floor the full policy layers on top of.
///
/// ```
/// use io_harness::policy::{Act, Action, BuiltinProtection, Decision, PolicyGate};
/// let gate = BuiltinProtection;
/// assert_eq!(gate.decide(&Action::new(Act::Write, ".git/hooks/pre-commit")).decision, Decision::Deny);
/// assert_eq!(gate.decide(&Action::new(Act::Write, "src/lib.rs")).decision, Decision::Allow);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinProtection;

impl BuiltinProtection {
    fn protected_write(target: &str) -> Option<&'static str> {
        let t = target.trim_start_matches("./");
        if t.split('/').any(|c| c == ".git") {
            return Some("**/.git/**");
        }
        (t.split('/').next() == Some(".io-harness")).then_some(".io-harness/**")
    }
}

impl PolicyGate for BuiltinProtection {
    fn decide(&self, action: &Action) -> PolicyDecision {
        let (decision, rule) = match action.act {
            Act::Write => match Self::protected_write(&action.target) {
                Some(rule) => (Decision::Deny, rule.to_string()),
                None => (Decision::Allow, "default".to_string()),
            },
            Act::Net => (Decision::Deny, "default".to_string()),
            Act::Read | Act::Exec => (Decision::Allow, "default".to_string()),
        };
        PolicyDecision {
            action: action.clone(),
            decision,
            rule,
            layer: "builtin".to_string(),
        }
    }

    fn limits_programs(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    /// Each secret pattern, a path it must deny and a near miss it must allow.
    #[rustfmt::skip]
    const SECRET_EXAMPLES: &[(&str, &str, &str)] = &[
        (".env",                                 "deploy/.env",                         "deploy/env"),
        (".env.*",                               ".env.production",                     "x.env"),
        (".envrc",                               "svc/.envrc",                          "svc/envrc.md"),
        ("*.pem",                                "certs/server.pem",                    "certs/pem.txt"),
        ("*.key",                                "tls/site.key",                        "tls/key.rs"),
        ("*.p12",                                "signing/dev.p12",                     "signing/p12.md"),
        ("*.pkcs12",                             "signing/dev.pkcs12",                  "signing/pkcs12.md"),
        ("*.pfx",                                "win/cert.pfx",                        "win/pfx.rs"),
        ("*.jks",                                "android/release.jks",                 "android/jks.gradle"),
        ("*.keystore",                           "android/debug.keystore",              "android/keystore.md"),
        ("*.ppk",                                "putty/me.ppk",                        "putty/ppk.txt"),
        ("*.kdbx",                               "vault/team.kdbx",                     "vault/kdbx.md"),
        ("*.keytab",                             "krb/http.keytab",                     "krb/keytab.md"),
        ("*.ovpn",                               "vpn/office.ovpn",                     "vpn/ovpn.md"),
        ("*.rdp",                                "remote/desk.rdp",                     "remote/rdp.md"),
        ("*.psafe3",                             "vault/pw.psafe3",                     "vault/psafe.md"),
        ("*.agilekeychain",                      "vault/1p.agilekeychain",              "vault/agile.md"),
        ("*.keychain",                           "mac/login.keychain",                  "mac/keychain.md"),
        ("*.keychain-db",                        "mac/login.keychain-db",               "mac/keychain-db.md"),
        ("*.bek",                                "bitlocker/disk.bek",                  "bitlocker/bek.md"),
        ("id_rsa*",                              "keys/id_rsa",                         "keys/rsa_id"),
        ("id_dsa*",                              "keys/id_dsa.pub",                     "keys/dsa"),
        ("id_ecdsa*",                            "keys/id_ecdsa_sk",                    "keys/ecdsa"),
        ("id_ed25519*",                          "keys/id_ed25519_sk",                  "keys/ed25519"),
        ("ssh_host_*_key",                       "etc/ssh/ssh_host_rsa_key",            "etc/ssh/ssh_host_rsa_key.pub"),
        ("*_rsa",                                "deploy/deploy_rsa",                   "deploy/deploy_rsa.pub"),
        ("*_dsa",                                "deploy/old_dsa",                      "deploy/old_dsa.pub"),
        ("*_ecdsa",                              "deploy/ci_ecdsa",                     "deploy/ci_ecdsa.pub"),
        ("*_ed25519",                            "deploy/bot_ed25519",                  "deploy/bot_ed25519.pub"),
        ("secring.*",                            "gpg/secring.gpg",                     "gpg/pubring.gpg"),
        ("**/.gnupg/**",                         "home/.gnupg/trustdb.gpg"           , "home/gnupg/x"),
        ("**/.ssh/**",                           "home/.ssh/config",                    "home/ssh/config"),
        (".netrc",                               ".netrc",                              "netrc.md"),
        ("_netrc",                               "win/_netrc",                          "win/netrc"),
        (".git-credentials",                     "home/.git-credentials",               "home/git-credentials.md"),
        ("**/.config/git/credentials",           "home/.config/git/credentials",        "home/.config/git/config"),
        ("**/.config/hub",                       "home/.config/hub",                    "home/.config/hub.md"),
        ("**/.cargo/credentials",                ".cargo/credentials",                  ".cargo/config"),
        ("**/.cargo/credentials.toml",           "ci/.cargo/credentials.toml",          "ci/.cargo/config.toml"),
        ("**/.gem/credentials",                  "home/.gem/credentials",               "home/.gem/specs"),
        ("**/.composer/auth.json",               "home/.composer/auth.json",            "app/auth.json"),
        ("**/.config/composer/auth.json",        ".config/composer/auth.json",          ".config/composer/config.json"),
        (".pgpass",                              "db/.pgpass",                          "db/pgpass.md"),
        (".my.cnf",                              "db/.my.cnf",                          "db/my.cnf"),
        (".vault-token",                         "home/.vault-token",                   "home/vault-token.md"),
        (".htpasswd",                            "www/.htpasswd",                       "www/htpasswd.md"),
        ("**/.aws/credentials",                  "home/.aws/credentials",               "home/.aws/config"),
        ("**/.docker/config.json",               "home/.docker/config.json",            "app/config.json"),
        ("**/.config/containers/auth.json",      "home/.config/containers/auth.json",   "home/.config/containers/registries.conf"),
        (".dockercfg",                           "home/.dockercfg",                     "home/dockercfg.md"),
        ("**/.kube/config",                      "home/.kube/config",                   "home/kube/config"),
        ("**/.azure/accessTokens.json",          "home/.azure/accessTokens.json",       "home/.azure/az.json"),
        ("**/.azure/msal_token_cache.*",         "home/.azure/msal_token_cache.json",   "home/.azure/clouds.config"),
        ("application_default_credentials.json", "gcloud/application_default_credentials.json", "gcloud/credentials.md"),
        ("**/.config/gcloud/credentials.db",     "home/.config/gcloud/credentials.db",  "home/.config/gcloud/configurations"),
        ("**/.config/gcloud/access_tokens.db",   "home/.config/gcloud/access_tokens.db", "home/.config/gcloud/active_config"),
        ("**/.config/gh/hosts.yml",              "home/.config/gh/hosts.yml",           "home/.config/gh/config.yml"),
        ("**/.config/rclone/rclone.conf",        "home/.config/rclone/rclone.conf",     "home/.config/rclone/filter.txt"),
        (".databrickscfg",                       "home/.databrickscfg",                 "home/databrickscfg.md"),
        ("**/.pulumi/credentials.json",          "home/.pulumi/credentials.json",       "home/.pulumi/workspaces.json"),
        (".s3cfg",                               "home/.s3cfg",                         "home/s3cfg.md"),
        (".boto",                                "home/.boto",                          "home/boto.cfg"),
        (".terraformrc",                         "home/.terraformrc",                   "infra/main.tf"),
        ("terraform.rc",                         "win/terraform.rc",                    "win/terraform.md"),
        ("**/.terraform.d/credentials.tfrc.json", "home/.terraform.d/credentials.tfrc.json", "home/.terraform.d/checkpoint_cache"),
        ("*.tfstate",                            "infra/terraform.tfstate",             "infra/tfstate.md"),
        ("*.tfstate.backup",                     "infra/terraform.tfstate.backup",      "infra/backup.md"),
        ("wallet.dat",                           "btc/wallet.dat",                      "btc/wallet.md"),
        ("**/.git/config",                       "vendor/dep/.git/config",              "vendor/dep/.git/HEAD"),
        ("**/.git/hooks/**",                     ".git/hooks/pre-commit",               ".githooks/pre-commit"),
    ];

    #[test]
    fn every_secret_pattern_catches_its_example() {
        let listed: Vec<&str> = SECRET_EXAMPLES.iter().map(|e| e.0).collect();
        assert_eq!(listed, SECRET_PATTERNS, "one example per pattern, in order");
        let p = Policy::builtin();
        for (pattern, hit, miss) in SECRET_EXAMPLES {
            for act in [Act::Read, Act::Write] {
                let d = p.decide(&Action::new(act, *hit));
                assert_eq!(
                    (d.decision, d.rule.as_str()),
                    (Decision::Deny, *pattern),
                    "{act:?} {hit}"
                );
            }
            let d = p.decide(&Action::new(Act::Read, *miss));
            assert_eq!(d.decision, Decision::Allow, "{miss} ({})", d.rule);
            // Whatever the case (the sandbox adversary read `server.PEM`).
            let upper = hit.to_ascii_uppercase();
            let d = p.decide(&Action::new(Act::Read, upper.as_str()));
            assert_eq!(d.decision, Decision::Deny, "{upper}");
        }
    }
    use crate::contract::{OperatorFile, TaskContract, Verification};

    #[test]
    fn gate_files_inside_the_workspace_are_write_protected() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("criteria")).unwrap();
        std::fs::write(root.join("criteria/t.rs"), "#[test] fn t() {}\n").unwrap();
        std::fs::write(root.join("check.sh"), "exit 1\n").unwrap();
        // Named by the command but the agent's to edit: not protected.
        std::fs::write(root.join("Cargo.toml"), "[package]\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("o.rs"), "").unwrap();
        let c = TaskContract::workspace(
            "g",
            root,
            Verification::CargoTest {
                manifest: "Cargo.toml".into(),
                criteria: vec![
                    OperatorFile::read(root.join("criteria/t.rs")).unwrap(),
                    OperatorFile::read(outside.path().join("o.rs")).unwrap(),
                ],
                baseline_manifests: None,
                signatures: Vec::new(),
            },
        )
        .and_verify(Verification::command(["sh", "./check.sh", "Cargo.toml"]));
        let rules = gate_file_rules(&c.gate_files());
        let targets: Vec<&str> = rules.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(rules.len(), 2, "{targets:?}");
        assert!(
            rules
                .iter()
                .all(|r| r.act == Act::Write && r.decision == Decision::Deny)
        );
        assert!(targets[0].contains("criteria/t.rs"), "{targets:?}");
        assert!(targets[1].contains("check.sh"), "{targets:?}");
    }

    #[test]
    fn builtin_protects_git_and_harness_dirs_only() {
        let g = BuiltinProtection;
        for t in [
            ".git/config",
            ".git/hooks/x",
            ".io-harness/policy.toml",
            "./.git/HEAD",
            ".git",
            "vendor/dep/.git/config",
        ] {
            assert_eq!(
                g.decide(&Action::new(Act::Write, t)).decision,
                Decision::Deny,
                "{t}"
            );
        }
        for t in [
            "src/.git-like",
            "a/io-harness/.io-harness",
            ".gitignore",
            "io-harness/x",
        ] {
            assert_eq!(
                g.decide(&Action::new(Act::Write, t)).decision,
                Decision::Allow,
                "{t}"
            );
        }
        assert_eq!(
            g.decide(&Action::new(Act::Read, ".git/config")).decision,
            Decision::Allow
        );
    }
}
