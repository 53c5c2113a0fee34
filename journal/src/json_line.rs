//! The literal shape of one NDJSON line: its top-level keys, in order, with the exact source
//! text of each value.
//!
//! `serde_json` (without `arbitrary_precision`) turns every non-integer number into an `f64` and
//! lets the last of two equal keys win silently. The codec needs both facts that this loses: a
//! decimal sent as a JSON number must be read from its literal digits (`1234567890123456.78` is
//! not an `f64`), and an object that names a field twice is ambiguous input to refuse. The line is
//! first parsed by `serde_json` (which reports malformed JSON); this scanner then walks the same,
//! known-valid text once, so it needs no error recovery of its own.

use std::borrow::Cow;
use std::ops::Range;

/// A top-level key and the byte range of its value's literal text.
pub type Field<'a> = (Cow<'a, str>, Range<usize>);

/// The top-level keys of a JSON object (already known to be valid JSON) with the byte range of
/// each value's literal text, in order of appearance.
pub fn object_fields(text: &str) -> Result<Vec<Field<'_>>, String> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return Err("not a JSON object".into());
    }
    i += 1;
    let mut out = Vec::new();
    loop {
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b'}') => return Ok(out),
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(b'"') => {}
            _ => return Err(format!("unexpected input at byte {i}")),
        }
        let key_end = string_end(b, i);
        let raw_key = &text[i..key_end];
        let key = if raw_key.contains('\\') {
            Cow::Owned(serde_json::from_str::<String>(raw_key).map_err(|e| e.to_string())?)
        } else {
            Cow::Borrowed(&raw_key[1..raw_key.len() - 1])
        };
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return Err(format!("expected ':' at byte {i}"));
        }
        i = skip_ws(b, i + 1);
        let start = i;
        i = value_end(b, i);
        out.push((key, start..i));
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `b[i]` is an opening quote; the index just past the closing one.
fn string_end(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The index just past the value starting at `b[i]`.
fn value_end(b: &[u8], mut i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => string_end(b, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = string_end(b, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            b.len()
        }
        _ => {
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
            }
            i
        }
    }
}

/// The plain decimal text of a JSON number literal, exponent applied exactly:
/// `1.5e3` → `1500`, `-12E-3` → `-0.012`, `7` → `7`. Digits are never rounded.
pub fn number_literal_as_decimal(lit: &str) -> Result<String, String> {
    let (mantissa, exp) = match lit.find(['e', 'E']) {
        Some(i) => {
            let e: i64 = lit[i + 1..]
                .parse()
                .map_err(|_| format!("{lit} is not a number literal"))?;
            (&lit[..i], e)
        }
        None => return Ok(lit.to_string()),
    };
    if exp.unsigned_abs() > 400 {
        return Err(format!("{lit} is out of range for a decimal"));
    }
    let (neg, m) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let (int, frac) = m.split_once('.').unwrap_or((m, ""));
    let digits = format!("{int}{frac}");
    // The decimal point sits after `point` digits of `digits`.
    let point = int.len() as i64 + exp;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    };
    Ok(if neg { format!("-{body}") } else { body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_order_duplicates_and_literal_text() {
        let line = r#" { "a" : 1234567890123456.78, "b":"x,}\"y", "c":{"d":[1,{"e":"]"}]}, "a":-1e-3 ,"k\u0041":true}"#;
        let fields = object_fields(line).unwrap();
        let shown: Vec<(&str, &str)> = fields.iter().map(|(k, r)| (k.as_ref(), &line[r.clone()])).collect();
        assert_eq!(
            shown,
            vec![
                ("a", "1234567890123456.78"),
                ("b", r#""x,}\"y""#),
                ("c", r#"{"d":[1,{"e":"]"}]}"#),
                ("a", "-1e-3"),
                ("kA", "true"),
            ]
        );
        assert_eq!(object_fields("{}").unwrap(), vec![]);
        assert!(object_fields("[1]").is_err());
    }

    #[test]
    fn exponents_are_applied_without_rounding() {
        for (lit, want) in [
            ("7", "7"),
            ("1.5e3", "1500"),
            ("1.5E+1", "15"),
            ("-12E-3", "-0.012"),
            ("123.456e-1", "12.3456"),
            ("0.1e1", "01"),
            ("1234567890123456.78e0", "1234567890123456.78"),
        ] {
            assert_eq!(number_literal_as_decimal(lit).unwrap(), want, "{lit}");
        }
        assert!(number_literal_as_decimal("1e999999").is_err());
    }
}
