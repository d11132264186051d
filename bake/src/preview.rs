//! `--preview`: the occupancy as a PNG of 2-D slices, like the seed's voxel
//! texture picture. Slices along z are tiled left to right, top to bottom;
//! within a slice x runs right and y runs up. Particles are shaded by depth
//! below the surface (bright at the surface), empty voxels are dark. Large
//! grids show every k-th slice so the picture stays under 4096 pixels a side.

use std::path::Path;

use image::{Rgb, RgbImage};

use pellet_formats::assets::ParticleBody;

/// Largest preview width or height aimed for, pixels.
const TARGET: u32 = 1600;
/// Hard cap on the preview's width and height, pixels.
const MAX_SIDE: u32 = 4096;

/// Renders the preview of `body`.
pub fn render(body: &ParticleBody) -> RgbImage {
    let [nx, ny, nz] = body.grid_dims;
    let gap = 1;
    // Show every `stride`-th slice, the fewest skipped that fit MAX_SIDE.
    let layout = |stride: u32| {
        let slices = nz.div_ceil(stride);
        let columns = (f64::from(slices)).sqrt().ceil().max(1.0) as u32;
        (stride, columns, slices.div_ceil(columns))
    };
    let (stride, columns, rows) = (1..=nz.max(1))
        .map(layout)
        .find(|&(_, c, r)| c * (nx + gap) + gap <= MAX_SIDE && r * (ny + gap) + gap <= MAX_SIDE)
        .unwrap_or_else(|| layout(nz.max(1)));
    let scale = (TARGET / (columns * (nx + gap)).max(rows * (ny + gap)).max(1)).clamp(1, 16);
    let width = columns * (nx + gap) * scale + gap;
    let height = rows * (ny + gap) * scale + gap;
    let mut img = RgbImage::from_pixel(width, height, Rgb([70, 70, 78]));
    let max_depth = body
        .depths
        .iter()
        .copied()
        .fold(0.0f32, f32::max)
        .max(f32::MIN_POSITIVE);
    // Particle k is the k-th set bit: walk the bits in order.
    let mut particle = 0usize;
    for i in 0..(nx as usize * ny as usize * nz as usize) {
        let (x, y, z) = (
            (i % nx as usize) as u32,
            ((i / nx as usize) % ny as usize) as u32,
            (i / (nx as usize * ny as usize)) as u32,
        );
        let set = body.occupancy[i / 8] >> (i % 8) & 1 == 1;
        let colour = if set {
            let depth = body.depths.get(particle).copied().unwrap_or(0.0) / max_depth;
            particle += 1;
            let t = 1.0 - 0.65 * depth;
            Rgb([(250.0 * t) as u8, (190.0 * t) as u8, (90.0 * t) as u8])
        } else {
            Rgb([24, 24, 30])
        };
        if z % stride != 0 {
            continue;
        }
        let slot = z / stride;
        let (col, row) = (slot % columns, slot / columns);
        let px = gap + col * (nx + gap) * scale + x * scale;
        let py = gap + row * (ny + gap) * scale + (ny - 1 - y) * scale;
        for dy in 0..scale {
            for dx in 0..scale {
                img.put_pixel(px + dx, py + dy, colour);
            }
        }
    }
    img
}

/// Renders the preview as PNG bytes.
pub fn encode_png(body: &ParticleBody) -> Result<Vec<u8>, image::ImageError> {
    let mut bytes = Vec::new();
    render(body).write_to(
        &mut std::io::Cursor::new(&mut bytes),
        image::ImageFormat::Png,
    )?;
    Ok(bytes)
}

/// Renders and writes the preview PNG to `path`.
pub fn write(body: &ParticleBody, path: &Path) -> Result<(), image::ImageError> {
    render(body).save_with_format(path, image::ImageFormat::Png)
}
