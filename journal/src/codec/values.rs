//! The exact text forms of event values: RFC 3339 timestamps to and from microseconds, decimal
//! text to and from its unscaled integer (never through floating point).

use chrono::{DateTime, SecondsFormat, Utc};

/// RFC 3339 to microseconds since the epoch (UTC), exactly: the column holds microseconds, so a
/// value with non-zero digits below a microsecond is refused (as a decimal with more fractional
/// digits than its scale is), and so are a leap second (`23:59:60`, which would silently become
/// the next second) and a year outside 0001–9999 (which other Iceberg readers, PyIceberg among
/// them, cannot read).
pub fn parse_timestamp_micros(s: &str) -> std::result::Result<i64, String> {
    let t = DateTime::parse_from_rfc3339(s).map_err(|e| format!("{s:?} is not an RFC 3339 timestamp: {e}"))?;
    let nanos = t.timestamp_subsec_nanos();
    if nanos >= 1_000_000_000 {
        return Err(format!(
            "{s:?} is a leap second, which an Iceberg timestamp cannot hold"
        ));
    }
    if nanos % 1_000 != 0 {
        return Err(format!(
            "{s:?} has digits below a microsecond, which the timestamp column (microseconds) cannot hold"
        ));
    }
    let utc = t.with_timezone(&Utc);
    let year = chrono::Datelike::year(&utc);
    if !(1..=9999).contains(&year) {
        return Err(format!(
            "{s:?} is in year {year}: timestamps must lie in years 0001 to 9999 (UTC)"
        ));
    }
    Ok(utc.timestamp_micros())
}

pub fn format_timestamp_micros(micros: i64) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true))
        .unwrap_or_else(|| micros.to_string())
}

/// Exact decimal text (`-12.5`, `3`, `0.07`) to its unscaled i128 at `scale`. Refuses more
/// fractional digits than the scale and more digits than the precision.
pub fn parse_decimal(text: &str, precision: u8, scale: i8) -> std::result::Result<i128, String> {
    let t = text.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty()) || !ok(int_part) || !ok(frac_part) {
        return Err(format!("{text:?} is not a decimal number"));
    }
    let scale = scale as usize;
    let frac_trimmed = frac_part.trim_end_matches('0');
    if frac_trimmed.len() > scale {
        return Err(format!("{text:?} has more than {scale} fractional digits"));
    }
    let int_trimmed = int_part.trim_start_matches('0');
    if int_trimmed.len() + scale > precision as usize {
        return Err(format!("{text:?} does not fit decimal({precision},{scale})"));
    }
    let mut unscaled: i128 = 0;
    for b in int_trimmed.bytes().chain(frac_trimmed.bytes()) {
        unscaled = unscaled * 10 + i128::from(b - b'0');
    }
    for _ in frac_trimmed.len()..scale {
        unscaled *= 10;
    }
    Ok(if neg { -unscaled } else { unscaled })
}

/// Decimal text of an unscaled value, e.g. (1250, 2) → "12.50".
pub fn format_decimal(unscaled: i128, scale: i8) -> String {
    let neg = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale.max(0) as usize;
    let body = if scale == 0 {
        digits
    } else if digits.len() > scale {
        format!(
            "{}.{}",
            &digits[..digits.len() - scale],
            &digits[digits.len() - scale..]
        )
    } else {
        format!("0.{}{}", "0".repeat(scale - digits.len()), digits)
    };
    if neg { format!("-{body}") } else { body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_exact() {
        assert_eq!(parse_decimal("12.5", 18, 2), Ok(1250));
        assert_eq!(parse_decimal("-0.07", 18, 2), Ok(-7));
        assert_eq!(parse_decimal("3", 18, 2), Ok(300));
        assert_eq!(parse_decimal("1.230", 18, 2), Ok(123));
        assert!(parse_decimal("1.234", 18, 2).unwrap_err().contains("more than 2"));
        assert!(parse_decimal("1e3", 18, 2).is_err());
        assert!(
            parse_decimal("12345678901234567", 18, 2)
                .unwrap_err()
                .contains("does not fit")
        );
        assert_eq!(format_decimal(1250, 2), "12.50");
        assert_eq!(format_decimal(-7, 2), "-0.07");
        assert_eq!(format_decimal(5, 0), "5");
    }

    #[test]
    fn timestamps_are_exact_or_refused() {
        assert_eq!(parse_timestamp_micros("1970-01-01T00:00:00.000001Z"), Ok(1));
        // Zeros below a microsecond change nothing; any other digit there is refused.
        assert_eq!(parse_timestamp_micros("1970-01-01T00:00:00.000001000Z"), Ok(1));
        assert!(
            parse_timestamp_micros("2026-11-29T08:00:00.0000011Z")
                .unwrap_err()
                .contains("below a microsecond")
        );
        assert!(
            parse_timestamp_micros("2016-12-31T23:59:60Z")
                .unwrap_err()
                .contains("leap second")
        );
        assert!(
            parse_timestamp_micros("0000-01-01T00:00:00Z")
                .unwrap_err()
                .contains("year 0")
        );
        // Year 0001 in UTC is the first one readers take; an offset that moves it to year 0 is not.
        assert!(parse_timestamp_micros("0001-01-01T00:00:00Z").is_ok());
        assert!(parse_timestamp_micros("0001-01-01T00:00:00+01:00").is_err());
        assert!(parse_timestamp_micros("9999-12-31T23:59:59.999999Z").is_ok());
    }
}
