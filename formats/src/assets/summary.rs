//! [`Summary`]: the handful of facts `bake inspect` prints about an asset.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// One summary value; serializes as a plain JSON scalar or array.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SummaryValue {
    /// A count or identifier.
    Int(u64),
    /// A measured quantity (unit in the key name).
    Float(f64),
    /// Free text.
    Text(String),
    /// A small vector, e.g. a position.
    List(Vec<f64>),
}

impl std::fmt::Display for SummaryValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(v) => write!(f, "{v}"),
            Self::Float(v) => write!(f, "{v}"),
            Self::Text(v) => f.write_str(v),
            Self::List(v) => {
                let parts: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

/// Ordered key-value facts; keys are snake_case with the unit as a suffix
/// (`voxel_size_m`, `mass_kg`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary(pub Vec<(&'static str, SummaryValue)>);

impl Summary {
    /// Appends an integer fact.
    pub fn int(mut self, key: &'static str, v: impl TryInto<u64>) -> Self {
        self.0
            .push((key, SummaryValue::Int(v.try_into().unwrap_or(u64::MAX))));
        self
    }

    /// Appends a float fact.
    pub fn float(mut self, key: &'static str, v: impl Widen) -> Self {
        self.0.push((key, SummaryValue::Float(v.widen())));
        self
    }

    /// Appends a text fact.
    pub fn text(mut self, key: &'static str, v: impl Into<String>) -> Self {
        self.0.push((key, SummaryValue::Text(v.into())));
        self
    }

    /// Appends a vector fact.
    pub fn list<T: Widen + Copy>(mut self, key: &'static str, v: &[T]) -> Self {
        self.0.push((
            key,
            SummaryValue::List(v.iter().map(|&x| x.widen()).collect()),
        ));
        self
    }
}

impl Serialize for Summary {
    /// An object whose keys keep their order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Conversion to `f64` that keeps an `f32`'s shortest decimal form, so `0.1f32`
/// prints as `0.1`, not `0.10000000149011612`.
pub trait Widen {
    /// The value as `f64`.
    fn widen(self) -> f64;
}

impl Widen for f32 {
    fn widen(self) -> f64 {
        self.to_string().parse().unwrap_or(f64::from(self))
    }
}

impl Widen for f64 {
    fn widen(self) -> f64 {
        self
    }
}

impl Widen for u32 {
    fn widen(self) -> f64 {
        f64::from(self)
    }
}
