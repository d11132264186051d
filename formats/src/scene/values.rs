//! Scene values that take more than one TOML shape: [`TimeStep`] (`"auto"` or
//! seconds) and [`Radius`] (a number or `{ min, max }`).

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ValidationError;
use crate::validate;

/// The simulation time step.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TimeStep {
    /// A fraction of the shortest contact duration (at least 10 steps per contact).
    #[default]
    Auto,
    /// A fixed step, seconds.
    Fixed(f64),
}

impl Serialize for TimeStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Fixed(dt) => s.serialize_f64(*dt),
        }
    }
}

impl<'de> Deserialize<'de> for TimeStep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TimeStep;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"auto\" or a time step in seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TimeStep, E> {
                if v == "auto" {
                    Ok(TimeStep::Auto)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<TimeStep, E> {
                Ok(TimeStep::Fixed(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TimeStep, E> {
                Ok(TimeStep::Fixed(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TimeStep, E> {
                Ok(TimeStep::Fixed(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

/// A particle radius: one value, or uniformly distributed between two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Radius {
    /// Every particle has this radius, metres.
    Fixed(f32),
    /// Radii uniform in `[min, max]`, metres.
    Uniform {
        /// Smallest radius, metres.
        min: f32,
        /// Largest radius, metres.
        max: f32,
    },
}

impl Radius {
    /// The largest radius this can produce, metres.
    pub fn max(&self) -> f32 {
        match *self {
            Self::Fixed(r) => r,
            Self::Uniform { max, .. } => max,
        }
    }

    /// The smallest radius this can produce, metres.
    pub fn min(&self) -> f32 {
        match *self {
            Self::Fixed(r) => r,
            Self::Uniform { min, .. } => min,
        }
    }

    /// Positive and ordered.
    pub fn validate(&self, field: &str) -> Result<(), ValidationError> {
        match *self {
            Self::Fixed(r) => validate::positive(field, r.into()),
            Self::Uniform { min, max } => {
                validate::positive(&format!("{field}.min"), min.into())?;
                validate::positive(&format!("{field}.max"), max.into())?;
                if min > max {
                    return Err(ValidationError::new(
                        format!("{field}.max"),
                        format_args!("{max} is below min {min}"),
                    ));
                }
                Ok(())
            }
        }
    }
}

impl Serialize for Radius {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Self::Fixed(r) => s.serialize_f32(r),
            Self::Uniform { min, max } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("min", &min)?;
                m.serialize_entry("max", &max)?;
                m.end()
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RadiusRange {
    min: f32,
    max: f32,
}

impl<'de> Deserialize<'de> for Radius {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Radius;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a radius in metres or a range { min = .., max = .. }")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Radius, E> {
                Ok(Radius::Fixed(v as f32))
            }
            fn visit_f32<E: de::Error>(self, v: f32) -> Result<Radius, E> {
                Ok(Radius::Fixed(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Radius, E> {
                Ok(Radius::Fixed(v as f32))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Radius, E> {
                Ok(Radius::Fixed(v as f32))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Radius, A::Error> {
                let r = RadiusRange::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Radius::Uniform {
                    min: r.min,
                    max: r.max,
                })
            }
        }
        d.deserialize_any(V)
    }
}
