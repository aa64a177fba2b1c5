//! The checks a contract cannot make alone: the workspace root exists, a Rust gate's
//! criterion is a readable file outside the workspace, a script exists, and the
//! policy's globs compile. They run after [`TaskContract::check`], for task files
//! (with file and line) and for contracts built in code alike.

use crate::contract::{ContractError, ProviderKind, TaskContract, TokenCounting, Verification};

fn field(key: &str, message: String) -> ContractError {
    ContractError::Field {
        key: key.to_string(),
        message,
    }
}

impl TaskContract {
    /// Refuses impossible values, naming the field: [`TaskContract::check`], then the
    /// checks that read the filesystem or compile the policy's globs. Task files get
    /// the same checks with file and line (see [`ContractError`]).
    ///
    /// The run validates again what a task file's loader validated: a contract built
    /// in code gets no other check, and the disk may have changed since loading.
    pub fn validate(&self) -> Result<(), ContractError> {
        self.check()?;
        preflight(self)
    }
}

/// What this build lacks that the contract needs: the crate feature by key.
fn missing_feature(c: &TaskContract) -> Option<(&'static str, &'static str)> {
    if !c.mcp.is_empty() && !cfg!(feature = "mcp") {
        return Some(("mcp[0]", "mcp"));
    }
    if c.context.tokens == TokenCounting::Exact && !cfg!(feature = "exact-tokens") {
        return Some(("context.tokens", "exact-tokens"));
    }
    None
}

fn preflight(c: &TaskContract) -> Result<(), ContractError> {
    if let Some((key, feature)) = missing_feature(c) {
        return Err(field(
            key,
            format!(
                "this build of io-harness lacks the `{feature}` feature it needs (build it with `--features {feature}`)"
            ),
        ));
    }
    match std::fs::metadata(&c.root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(field(
                "root",
                format!("{} is not a directory", c.root.display()),
            ));
        }
        Err(e) => return Err(field("root", format!("{}: {e}", c.root.display()))),
    }
    for v in &c.verify.criteria {
        if let Verification::Rust { criterion, .. } = v {
            if !criterion.is_file() {
                return Err(field(
                    "verify.rust",
                    format!("criterion {} is not a readable file", criterion.display()),
                ));
            }
            // Inside the workspace the agent could edit the test it is judged by.
            if let (Ok(crit), Ok(root)) = (criterion.canonicalize(), c.root.canonicalize())
                && crit.starts_with(&root)
            {
                return Err(field(
                    "verify.rust",
                    format!(
                        "criterion {} lies inside the workspace, where the agent could edit it",
                        criterion.display()
                    ),
                ));
            }
        }
    }
    c.policy
        .check()
        .map_err(|(key, message)| field(&key, message))?;
    for p in &c.providers {
        if p.kind == ProviderKind::Scripted
            && let Some(s) = &p.script
            && !s.is_file()
        {
            return Err(field(
                "provider.script",
                format!("{} does not exist", s.display()),
            ));
        }
    }
    Ok(())
}
