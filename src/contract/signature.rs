//! Signatures a Rust gate pins: `"path: fn-pointer type"` entries
//! (`"add: fn(i32, i32) -> i32"`, `"parse::parse_line: fn(&str) -> Option<u32>"`).
//!
//! A criterion's `assert_eq!(add(2, 3), 5)` trusts `add`'s return type: one whose
//! `PartialEq` always answers true passes it. A pinned signature is checked by code the
//! harness writes (`const _: fn(i32, i32) -> i32 = ::subject::add;`), which compiles
//! only when the item coerces to exactly that function-pointer type. Only free
//! functions can be pinned this way: a generic function has no one pointer type, and
//! a method's path names a type, so both are refused when the contract loads, as is
//! anything that is not a `path: fn(…) [-> …]` entry.

/// One parsed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The function's path from the crate root (`parse::parse_line`).
    pub path: String,
    /// The function-pointer type (`fn(&str) -> Option<u32>`).
    pub ty: String,
}

/// Why an entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// Not `path: type`.
    #[error("signature {0:?} is not `path: fn(…) -> …`")]
    Malformed(String),
    /// The path is not a plain module path to a function.
    #[error("signature {entry:?}: {why} (only free, non-generic functions can be pinned)")]
    Path {
        /// The entry.
        entry: String,
        /// What is wrong with its path.
        why: &'static str,
    },
    /// The type is not a concrete function-pointer type.
    #[error("signature {entry:?}: {why}")]
    Type {
        /// The entry.
        entry: String,
        /// What is wrong with its type.
        why: &'static str,
    },
}

impl Signature {
    /// Parses `entry`, refusing generic functions, methods and malformed entries.
    ///
    /// ```
    /// use io_harness::contract::Signature;
    /// let s = Signature::parse("add: fn(i32, i32) -> i32").unwrap();
    /// assert_eq!((s.path.as_str(), s.ty.as_str()), ("add", "fn(i32, i32) -> i32"));
    /// assert!(Signature::parse("Point::new: fn(i32) -> Point").is_err());
    /// assert!(Signature::parse("id: fn(impl Copy) -> u8").is_err());
    /// ```
    pub fn parse(entry: &str) -> Result<Self, SignatureError> {
        let malformed = || SignatureError::Malformed(entry.to_string());
        let (path, ty) = split_at_colon(entry).ok_or_else(malformed)?;
        let (path, ty) = (path.trim(), ty.trim());
        let path_err = |why| SignatureError::Path {
            entry: entry.to_string(),
            why,
        };
        let type_err = |why| SignatureError::Type {
            entry: entry.to_string(),
            why,
        };
        if path.is_empty() || ty.is_empty() {
            return Err(malformed());
        }
        if path.contains('<') {
            return Err(path_err("a generic function has no single pointer type"));
        }
        let path = path.strip_prefix("crate::").unwrap_or(path);
        for seg in path.split("::") {
            let ident = seg.strip_prefix("r#").unwrap_or(seg);
            let valid = ident
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && ident.chars().all(|c| c.is_alphanumeric() || c == '_');
            if !valid {
                return Err(path_err("a path segment is not an identifier"));
            }
            if seg == "Self" || seg == "self" || seg == "super" {
                return Err(path_err("the path must start at the crate root"));
            }
            if ident.starts_with(|c: char| c.is_uppercase()) {
                return Err(path_err(
                    "a segment names a type (`Type::method`): methods cannot be pinned",
                ));
            }
        }
        let fn_start = ty
            .strip_prefix("unsafe ")
            .map_or(ty, str::trim_start)
            .trim_start();
        let fn_start = if let Some(r) = fn_start.strip_prefix("extern") {
            r.trim_start()
                .strip_prefix('"')
                .and_then(|r| r.split_once('"'))
                .map_or(r, |(_, r)| r)
                .trim_start()
        } else {
            fn_start
        };
        if !fn_start.starts_with("fn(") && !fn_start.starts_with("fn (") {
            return Err(type_err(
                "the type must be a function-pointer type `fn(…) -> …`",
            ));
        }
        if has_word(ty, "impl") {
            return Err(type_err("`impl Trait` makes the function generic"));
        }
        if has_word(ty, "Self") {
            return Err(type_err("`Self` belongs to a method"));
        }
        if !balanced(ty) {
            return Err(type_err("its brackets do not balance"));
        }
        Ok(Self {
            path: path.to_string(),
            ty: ty.to_string(),
        })
    }
}

/// Splits at the first `:` that is not half of `::`.
fn split_at_colon(entry: &str) -> Option<(&str, &str)> {
    let b = entry.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b':' {
            if b.get(i + 1) == Some(&b':') {
                i += 2;
                continue;
            }
            return Some((&entry[..i], &entry[i + 1..]));
        }
        i += 1;
    }
    None
}

fn has_word(hay: &str, word: &str) -> bool {
    hay.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

fn balanced(ty: &str) -> bool {
    let mut stack = Vec::new();
    let mut prev = ' ';
    for c in ty.chars() {
        match c {
            '(' | '[' | '<' => stack.push(c),
            ')' if stack.pop() != Some('(') => return false,
            ']' if stack.pop() != Some('[') => return false,
            // `->` is no closing bracket.
            '>' if prev != '-' && stack.pop() != Some('<') => return false,
            '{' | '}' | ';' => return false,
            _ => {}
        }
        prev = c;
    }
    stack.is_empty()
}

#[cfg(test)]
mod tests {
    use super::{Signature, SignatureError};

    #[test]
    fn free_functions_parse_and_the_rest_is_refused() {
        for ok in [
            "add: fn(i32, i32) -> i32",
            "parse::parse_line: fn(&str) -> Option<u32>",
            "crate::v::get: fn(&[u8]) -> Result<Vec<u8>, String>",
            "cb: unsafe extern \"C\" fn(u8)",
        ] {
            assert!(Signature::parse(ok).is_ok(), "{ok}");
        }
        let refused = |e: &str| Signature::parse(e).unwrap_err();
        assert!(matches!(refused("add"), SignatureError::Malformed(_)));
        assert!(matches!(refused("add:"), SignatureError::Malformed(_)));
        for path in [
            "id<T>: fn(T) -> T",
            "Point::new: fn(i32) -> Point",
            "Self::f: fn()",
            "a b: fn()",
        ] {
            assert!(
                matches!(refused(path), SignatureError::Path { .. }),
                "{path}"
            );
        }
        for ty in [
            "f: fn(impl Copy)",
            "f: fn(&Self)",
            "f: i32",
            "f: fn(i32 -> i32",
            "f: fn() -> Vec<u8",
            "f: fn() { }",
        ] {
            assert!(matches!(refused(ty), SignatureError::Type { .. }), "{ty}");
        }
    }
}
