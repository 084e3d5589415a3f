//! How a size in bytes is written in a configuration file: a byte count,
//! optionally followed by a binary unit: `"65536"`, `"65536B"`, `"512KiB"`,
//! `"64MiB"`, `"1GiB"`.
//!
//! This is the grammar alone. Each setting checks its own bounds.

/// The bytes `text` spells, or `None` if it is not a size (or overflows).
pub fn parse(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units_and_bare_counts() {
        assert_eq!(parse("64MiB"), Some(64 << 20));
        assert_eq!(parse("512KiB"), Some(512 << 10));
        assert_eq!(parse("1GiB"), Some(1 << 30));
        assert_eq!(parse("65536B"), Some(65536));
        assert_eq!(parse("65536"), Some(65536));
    }

    #[test]
    fn anything_else_is_not_a_size() {
        for text in ["64MB", "MiB", "", "-1", "1.5GiB", " 1MiB", "1 MiB"] {
            assert_eq!(parse(text), None, "{text:?}");
        }
        assert_eq!(parse("99999999999999GiB"), None);
    }
}
