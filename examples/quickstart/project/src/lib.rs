//! A tiny parser for comma-separated integer lists.

/// Parses a comma-separated list of integers, such as `"1, 2, 3"`.
pub fn parse_list(input: &str) -> Result<Vec<i64>, String> {
    input
        .split(',')
        .map(|part| part.trim().parse::<i64>().map_err(|e| format!("{part:?}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_list() {
        assert_eq!(parse_list("1, 2, 3").unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn trailing_comma() {
        assert_eq!(parse_list("1, 2, 3,").unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn empty_input() {
        assert_eq!(parse_list("").unwrap(), Vec::<i64>::new());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse_list("1, x").is_err());
    }
}
