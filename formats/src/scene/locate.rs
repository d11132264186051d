//! Maps a validation error's field path (`particles[1].region.min`) back to a
//! line and column in the TOML text, so semantic errors point at the value.

use toml::de::{DeTable, DeValue};

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Line and column of the deepest part of `field` that exists in `text`
/// (falling back to an ancestor when the field itself is absent, e.g. a
/// default value that is invalid only in combination with another).
pub fn field(text: &str, field: &str) -> Option<(usize, usize)> {
    let root = DeTable::parse(text).ok()?;
    let mut best: Option<std::ops::Range<usize>> = None;
    let mut table: Option<&DeTable<'_>> = Some(root.get_ref());
    let mut current: Option<&DeValue<'_>> = None;
    for segment in segments(field) {
        let next = match segment {
            Segment::Key(key) => {
                let t = match (table, current) {
                    (Some(t), None) => t,
                    (_, Some(DeValue::Table(t))) => t,
                    _ => break,
                };
                t.get(key)
            }
            Segment::Index(i) => match current {
                Some(DeValue::Array(a)) => a.get(i),
                _ => None,
            },
        };
        let Some(value) = next else { break };
        best = Some(value.span());
        current = Some(value.get_ref());
        table = None;
    }
    best.map(|span| line_col(text, span.start))
}

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn segments(field: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in field.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        while let Some(end) = rest.find(']') {
            if let Ok(i) = rest[1..end].parse() {
                out.push(Segment::Index(i));
            }
            rest = &rest[end + 1..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_array_fields() {
        let text = "[domain]\nmin = [0, 0, 0]\n\n[[particles]]\nfile = \"a.csv\"\n\n[[particles]]\nregion = { min = [0, 0, 0], max = [1, 1, 1] }\nspacing = -1\n";
        assert_eq!(field(text, "particles[1].spacing"), Some((9, 11)));
        assert_eq!(field(text, "domain.min"), Some((2, 7)));
        // Absent field: falls back to its table.
        assert_eq!(field(text, "particles[0].velocity").map(|p| p.0), Some(4));
    }

    #[test]
    fn counts_columns_in_characters() {
        assert_eq!(line_col("a\né = 1", 5), (2, 3));
    }
}
