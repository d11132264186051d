//! [`PodVec`]: a vector of plain numeric values stored as one byte blob.
//!
//! Large arrays (particle positions, occupancy bits, table entries) are written
//! as a single MessagePack `bin` value holding the little-endian bytes of the
//! elements, not as one MessagePack value per element: that is 5-10x smaller
//! before compression and decodes at memory speed (see `docs/BENCHMARKS.md`).

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

// The blob is the elements' in-memory bytes. Every target Pellet runs on (x86_64,
// aarch64, wasm32, every GPU) is little-endian; refuse to build elsewhere rather
// than write files that other machines would misread.
#[cfg(target_endian = "big")]
compile_error!(
    "pellet-formats stores arrays as little-endian blobs and needs a little-endian target"
);

/// A `Vec<T>` of plain-old-data elements serialized as one byte blob.
///
/// Deserializing checks that the blob length is a whole number of elements and
/// copies it into a properly aligned vector, so any byte input is safe.
#[derive(Clone, Default, PartialEq)]
pub struct PodVec<T: Pod>(pub Vec<T>);

impl<T: Pod> PodVec<T> {
    /// Wraps an existing vector.
    pub fn new(values: Vec<T>) -> Self {
        Self(values)
    }

    /// The raw little-endian bytes of the elements.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }

    /// Unwraps into the inner vector.
    pub fn into_inner(self) -> Vec<T> {
        self.0
    }
}

impl<T: Pod> From<Vec<T>> for PodVec<T> {
    fn from(values: Vec<T>) -> Self {
        Self(values)
    }
}

impl<T: Pod> Deref for PodVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T: Pod> DerefMut for PodVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.0
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for PodVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 4;
        write!(f, "PodVec(len {}", self.0.len())?;
        if !self.0.is_empty() {
            write!(f, ": {:?}", &self.0[..self.0.len().min(SHOWN)])?;
            if self.0.len() > SHOWN {
                write!(f, " ...")?;
            }
        }
        write!(f, ")")
    }
}

impl<T: Pod> Serialize for PodVec<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.as_bytes())
    }
}

impl<'de, T: Pod> Deserialize<'de> for PodVec<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_bytes(BlobVisitor(PhantomData))
    }
}

struct BlobVisitor<T>(PhantomData<T>);

impl<T: Pod> Visitor<'_> for BlobVisitor<T> {
    type Value = PodVec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a byte blob of {}-byte elements", size_of::<T>())
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
        let size = size_of::<T>();
        if size == 0 || !bytes.len().is_multiple_of(size) {
            return Err(E::custom(format_args!(
                "byte blob of {} bytes is not a whole number of {size}-byte elements",
                bytes.len()
            )));
        }
        Ok(PodVec(bytemuck::pod_collect_to_vec(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_messagepack_as_one_blob() {
        let values = PodVec(vec![[1.0f32, 2.0, 3.0], [-0.5, 1e-7, f32::MAX]]);
        let bytes = rmp_serde::to_vec_named(&values).expect("serializing to a Vec cannot fail");
        // bin8 marker, length 24, then the 24 raw bytes.
        assert_eq!(bytes.len(), 2 + 24);
        assert_eq!(bytes[0], 0xc4);
        let back: PodVec<[f32; 3]> = rmp_serde::from_slice(&bytes).expect("valid blob");
        assert_eq!(back, values);
    }

    #[test]
    fn rejects_a_partial_element() {
        let bytes = rmp_serde::to_vec(&serde_bytes_like(&[0u8; 7])).expect("serialize");
        let err = rmp_serde::from_slice::<PodVec<f32>>(&bytes).expect_err("7 bytes are not f32s");
        assert!(err.to_string().contains("not a whole number"), "{err}");
    }

    #[test]
    fn rejects_a_per_element_array() {
        let bytes = rmp_serde::to_vec(&vec![1.0f32, 2.0]).expect("serialize");
        assert!(rmp_serde::from_slice::<PodVec<f32>>(&bytes).is_err());
    }

    fn serde_bytes_like(bytes: &[u8]) -> PodVec<u8> {
        PodVec(bytes.to_vec())
    }
}
