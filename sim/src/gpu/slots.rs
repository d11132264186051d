//! Where each of the kernels' arrays lives on the device: a buffer of its
//! own ([`BindingLayout::Separate`]), or a range of an arena
//! ([`BindingLayout::Packed`], `stages/packed.rs`). Every upload, clear,
//! copy and readback goes through a [`Slot`], so the rest of the GPU path
//! is the same for both layouts.

use std::collections::BTreeMap;

use pellet_gpu::{Gpu, GpuError, wgpu};

use crate::SimError;
use crate::stages::packed::{Arena, LAYOUT_ENTRIES, PackedBinding};

pub use crate::stages::BindingLayout;

/// One array's place on the device: `size` bytes of `buffer` from `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The buffer (the array's own, or an arena).
    pub buffer: wgpu::Buffer,
    /// First byte, a multiple of 256.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
}

impl Slot {
    /// All of `buffer`.
    pub fn whole(buffer: wgpu::Buffer) -> Self {
        let size = buffer.size();
        Self {
            buffer,
            offset: 0,
            size,
        }
    }

    /// The slot as a binding.
    pub fn binding(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &self.buffer,
            offset: self.offset,
            size: wgpu::BufferSize::new(self.size),
        })
    }

    /// Writes `bytes` at byte `at` of the slot.
    pub fn write(&self, queue: &wgpu::Queue, at: u64, bytes: &[u8]) {
        debug_assert!(at + bytes.len() as u64 <= self.size, "write past the slot");
        queue.write_buffer(&self.buffer, self.offset + at, bytes);
    }

    /// Zeroes `size` bytes (all of the slot when `None`) from byte `at`.
    pub fn clear(&self, enc: &mut wgpu::CommandEncoder, at: u64, size: Option<u64>) {
        let size = size.unwrap_or(self.size - at);
        enc.clear_buffer(&self.buffer, self.offset + at, Some(size));
    }

    /// Copies the first `min(len)` bytes of this slot into `to` (a
    /// different buffer: WebGPU copies within one buffer are invalid).
    pub fn copy_to(&self, enc: &mut wgpu::CommandEncoder, to: &Slot) {
        let size = self.size.min(to.size);
        enc.copy_buffer_to_buffer(&self.buffer, self.offset, &to.buffer, to.offset, size);
    }

    /// Reads `size` bytes from byte `at` (waits for the GPU).
    pub fn read_range(&self, gpu: &Gpu, at: u64, size: u64) -> Result<Vec<u8>, GpuError> {
        pellet_gpu::readback::read_buffer_range(
            &gpu.device,
            &gpu.queue,
            &self.buffer,
            self.offset + at,
            size,
        )
    }

    /// Reads the whole slot (waits for the GPU).
    pub fn read(&self, gpu: &Gpu) -> Result<Vec<u8>, GpuError> {
        self.read_range(gpu, 0, self.size)
    }
}

/// The packed layout's arenas and which binding lives in which.
#[derive(Debug, Clone, Default)]
pub(crate) struct Packing {
    /// Arena of each packed binding number.
    pub(crate) arena_of: BTreeMap<u32, Arena>,
    /// The arenas (none before the first [`pack`]).
    pub(crate) arenas: Option<BTreeMap<Arena, wgpu::Buffer>>,
}

impl Packing {
    /// The packed bindings of `common` (by number).
    pub(crate) fn new(packed: &BTreeMap<String, PackedBinding>) -> Self {
        Self {
            arena_of: packed.values().map(|p| (p.binding, p.arena)).collect(),
            arenas: None,
        }
    }

    /// The offsets table of a bind group whose packed bindings resolve
    /// through `slot_of` (`None`: unbound, an empty range); `None` while
    /// some slot is not (yet) in its arena.
    pub(crate) fn table<'a>(&self, slot_of: impl Fn(u32) -> Option<&'a Slot>) -> Option<Vec<u32>> {
        let arenas = self.arenas.as_ref()?;
        let mut at = vec![0u32; LAYOUT_ENTRIES];
        let mut len = vec![0u32; LAYOUT_ENTRIES];
        for (&b, &arena) in &self.arena_of {
            let Some(slot) = slot_of(b) else { continue };
            if slot.buffer != arenas[&arena] {
                return None;
            }
            let e = arena.element_size();
            at[b as usize] = u32::try_from(slot.offset / e).ok()?;
            len[b as usize] = u32::try_from(slot.size / e).ok()?;
        }
        at.extend(len);
        Some(at)
    }
}

/// Bytes between the ranges of an arena (the storage offset alignment
/// every device supports, so a range can be bound alone: the renderer).
const ALIGN: u64 = 256;

/// Moves every distinct slot of `slots` whose binding is packed into fresh
/// arenas (copying its contents), and returns the map from each old slot to
/// its new range. The arenas replace `packing`'s.
// A buffer orders and hashes by its id, which never changes.
#[allow(clippy::mutable_key_type)]
pub(crate) fn pack(
    gpu: &Gpu,
    packing: &mut Packing,
    slots: &[(u32, &Slot)],
) -> Result<BTreeMap<(wgpu::Buffer, u64), Slot>, SimError> {
    let device = &gpu.device;
    let limits = device.limits();
    let max = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    // Each distinct (buffer, offset) once, in order of first appearance.
    let mut placed: BTreeMap<(wgpu::Buffer, u64), (Arena, u64, u64)> = BTreeMap::new();
    let mut order = Vec::new();
    let mut ends: BTreeMap<Arena, u64> = Arena::ALL.iter().map(|&a| (a, 0)).collect();
    for &(b, slot) in slots {
        let Some(&arena) = packing.arena_of.get(&b) else {
            continue;
        };
        let key = (slot.buffer.clone(), slot.offset);
        if placed.contains_key(&key) {
            continue;
        }
        let end = ends.get_mut(&arena).expect("every arena has an end");
        let at = *end;
        *end = (at + slot.size).next_multiple_of(ALIGN);
        placed.insert(key.clone(), (arena, at, slot.size));
        order.push(key);
    }
    let mut arenas = BTreeMap::new();
    for (&arena, &size) in &ends {
        let size = size.max(ALIGN);
        if size > max {
            return Err(SimError::BufferTooLarge {
                what: format!("packed {arena:?} arena"),
                needed: size,
                max,
                adapter: gpu.report.name.clone(),
            });
        }
        arenas.insert(
            arena,
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("sim/arena"),
                size,
                usage: super::buffers::STORAGE,
                mapped_at_creation: false,
            }),
        );
    }
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("sim/pack"),
    });
    let mut moved = BTreeMap::new();
    for key in order {
        let (arena, at, size) = placed[&key];
        let new = Slot {
            buffer: arenas[&arena].clone(),
            offset: at,
            size,
        };
        let old = Slot {
            buffer: key.0.clone(),
            offset: key.1,
            size,
        };
        old.copy_to(&mut enc, &new);
        moved.insert(key, new);
    }
    gpu.queue.submit([enc.finish()]);
    packing.arenas = Some(arenas);
    Ok(moved)
}

/// The most storage bindings one kernel uses in the separate layout
/// (`particle_forces`; a test checks it against naga's reflection).
pub const SEPARATE_STORAGE_BINDINGS: u32 = 21;

impl BindingLayout {
    /// The separate layout where the device binds enough storage buffers
    /// per shader stage, else the packed one. `PELLET_BINDINGS=packed` or
    /// `separate` overrides the choice (the packed layout runs anywhere).
    pub fn for_device(gpu: &Gpu) -> Self {
        match std::env::var("PELLET_BINDINGS").as_deref() {
            Ok("packed") => return BindingLayout::Packed,
            Ok("separate") => return BindingLayout::Separate,
            _ => {}
        }
        if gpu.device.limits().max_storage_buffers_per_shader_stage >= SEPARATE_STORAGE_BINDINGS {
            BindingLayout::Separate
        } else {
            BindingLayout::Packed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::SimShaders;
    use crate::stages::packed::B_LAYOUT;

    /// Storage bindings of the kernel that uses the most, in `layout`.
    fn most_storage_bindings(layout: BindingLayout) -> u32 {
        let uniforms = [0u32, 1, 28, B_LAYOUT];
        SimShaders::builtin()
            .compile_for(layout)
            .expect("the built-in shaders compile")
            .iter()
            .flat_map(|s| s.bindings.values())
            .map(|b| b.iter().filter(|x| !uniforms.contains(x)).count() as u32)
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn the_packed_layout_fits_every_webgpu_device() {
        assert_eq!(
            most_storage_bindings(BindingLayout::Separate),
            SEPARATE_STORAGE_BINDINGS
        );
        // WebGPU guarantees 8 storage buffers per stage.
        let packed = most_storage_bindings(BindingLayout::Packed);
        assert!(
            packed <= 8,
            "{packed} storage bindings in one packed kernel"
        );
    }
}
