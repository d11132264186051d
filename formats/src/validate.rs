//! Small semantic checks shared by the asset and scene validators. Each names
//! the offending field (with an index for arrays) in its error.

use crate::error::ValidationError;

/// `value` is finite.
pub fn finite(field: &str, value: f64) -> Result<(), ValidationError> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format_args!("is {value}, must be finite"),
        ))
    }
}

/// `value` is finite and strictly positive.
pub fn positive(field: &str, value: f64) -> Result<(), ValidationError> {
    finite(field, value)?;
    if value > 0.0 {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format_args!("is {value}, must be greater than zero"),
        ))
    }
}

/// `value` is finite and not negative.
pub fn non_negative(field: &str, value: f64) -> Result<(), ValidationError> {
    finite(field, value)?;
    if value >= 0.0 {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format_args!("is {value}, must not be negative"),
        ))
    }
}

/// `value` lies in `[lo, hi]`.
pub fn in_range(field: &str, value: f64, lo: f64, hi: f64) -> Result<(), ValidationError> {
    finite(field, value)?;
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format_args!("is {value}, must be between {lo} and {hi}"),
        ))
    }
}

/// Every component of every element is finite; names the first bad element.
pub fn all_finite<const N: usize>(field: &str, values: &[[f32; N]]) -> Result<(), ValidationError> {
    match values.iter().position(|v| v.iter().any(|x| !x.is_finite())) {
        None => Ok(()),
        Some(i) => Err(ValidationError::new(
            format!("{field}[{i}]"),
            format_args!("is {:?}, must be finite", values[i]),
        )),
    }
}

/// Every component of every element is finite and at most `limit` in
/// magnitude (`unit` names the unit in the message); names the first bad element.
pub fn all_bounded<const N: usize>(
    field: &str,
    values: &[[f32; N]],
    limit: f32,
    unit: &str,
) -> Result<(), ValidationError> {
    all_finite(field, values)?;
    match values
        .iter()
        .position(|v| v.iter().any(|x| x.abs() > limit))
    {
        None => Ok(()),
        Some(i) => Err(ValidationError::new(
            format!("{field}[{i}]"),
            format_args!(
                "is {:?}, beyond the {limit:e} {unit} any simulation reaches (a blown-up or corrupt state)",
                values[i]
            ),
        )),
    }
}

/// Every scalar is finite; names the first bad one.
pub fn all_finite_scalars(field: &str, values: &[f32]) -> Result<(), ValidationError> {
    match values.iter().position(|x| !x.is_finite()) {
        None => Ok(()),
        Some(i) => Err(ValidationError::new(
            format!("{field}[{i}]"),
            format_args!("is {}, must be finite", values[i]),
        )),
    }
}

/// `actual == expected` for an array length.
pub fn length(
    field: &str,
    actual: usize,
    expected: usize,
    why: &str,
) -> Result<(), ValidationError> {
    if actual == expected {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format_args!("has {actual} elements, expected {expected} ({why})"),
        ))
    }
}
