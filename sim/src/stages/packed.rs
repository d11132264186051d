//! The packed binding layout: the same kernels with their storage arrays
//! gathered into a few arenas, for devices that bind few storage buffers
//! per shader stage (WebGPU guarantees 8; SwiftShader and most browsers
//! offer 10, while the largest kernels here use 21).
//!
//! Every `array<vec4<f32>>` binding of `common.wgsl` becomes a range of one
//! arena, every `array<vec4<u32>>` a range of a second, every `array<u32>`
//! a range of a third and every `array<atomic<u32>>` a range of a fourth
//! (WebGPU refuses two writable bindings of one buffer in a dispatch, so
//! the plain and atomic views cannot share one). A uniform table gives each
//! range's first element and length. The kernels' code is rewritten, not
//! edited by hand: `pos[i]` becomes `arena_f4[packing.at[0].z + (i)]`, and
//! `arrayLength(&x)` the table's length. The arithmetic is untouched, so
//! the packed kernels compute bit-identical results (a parity test runs
//! both layouts on the same device).
//!
//! The indirect dispatch arguments stay a buffer of their own (a buffer
//! cannot be indirect arguments and written storage in one dispatch), and
//! so do the arrays of other element types (statistics partials, bodies).

use std::collections::BTreeMap;

use pellet_gpu::GpuError;

/// Binding of the offsets table (a uniform `Layout`).
pub const B_LAYOUT: u32 = 90;
/// Binding of the `vec4<f32>` arena.
pub const B_ARENA_F4: u32 = 91;
/// Binding of the `vec4<u32>` arena.
pub const B_ARENA_U4: u32 = 92;
/// Binding of the `u32` arena.
pub const B_ARENA_U1: u32 = 93;
/// Binding of the `atomic<u32>` arena.
pub const B_ARENA_ATOMIC: u32 = 94;
/// Entries of the table's `at` and `len` arrays: one per binding number
/// below this (four per `vec4<u32>`).
pub const LAYOUT_ENTRIES: usize = 68;

/// Which arena a packed binding lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arena {
    /// `array<vec4<f32>>`.
    F4,
    /// `array<vec4<u32>>`.
    U4,
    /// `array<u32>`.
    U1,
    /// `array<atomic<u32>>` (a buffer of its own: WebGPU refuses two
    /// writable bindings of one buffer in a dispatch).
    A1,
}

impl Arena {
    /// Bytes per element.
    pub fn element_size(self) -> u64 {
        match self {
            Arena::F4 | Arena::U4 => 16,
            Arena::U1 | Arena::A1 => 4,
        }
    }

    /// Every arena.
    pub const ALL: [Arena; 4] = [Arena::F4, Arena::U4, Arena::U1, Arena::A1];
}

/// One storage binding of `common.wgsl` that the packed layout moves into
/// an arena.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedBinding {
    /// Its binding number (its index in the table).
    pub binding: u32,
    /// The arena holding it.
    pub arena: Arena,
    /// Whether the kernels use it through atomics.
    pub atomic: bool,
}

/// Bindings kept out of the arenas whatever their type: the indirect
/// dispatch arguments, and the prefix sum's three arrays, which each level
/// binds to another array (a range of an arena, or a buffer of its own), so
/// that a plain view never shares a dispatch with the atomic arena it reads.
const UNPACKED_NAMES: [&str; 4] = ["dispatch_args", "scan_in", "scan_out", "scan_sums"];

/// The storage bindings of `common` the packed layout moves into arenas,
/// by variable name.
pub fn packed_bindings(common: &str) -> BTreeMap<String, PackedBinding> {
    let mut out = BTreeMap::new();
    for line in common.lines() {
        let Some((binding, name, ty)) = storage_declaration(line) else {
            continue;
        };
        if UNPACKED_NAMES.contains(&name) || binding as usize >= LAYOUT_ENTRIES {
            continue;
        }
        let (arena, atomic) = match ty {
            "vec4<f32>" => (Arena::F4, false),
            "vec4<u32>" => (Arena::U4, false),
            "u32" => (Arena::U1, false),
            "atomic<u32>" => (Arena::A1, true),
            _ => continue,
        };
        out.insert(
            name.to_string(),
            PackedBinding {
                binding,
                arena,
                atomic,
            },
        );
    }
    out
}

/// `(binding, name, element type)` of a line
/// `@group(0) @binding(N) var<storage, read_write> NAME: array<TYPE>;`.
fn storage_declaration(line: &str) -> Option<(u32, &str, &str)> {
    let rest = line.trim().strip_prefix("@group(0) @binding(")?;
    let (number, rest) = rest.split_once(')')?;
    let binding = number.trim().parse().ok()?;
    let rest = rest.trim().strip_prefix("var<storage, read_write>")?;
    let (name, rest) = rest.split_once(':')?;
    let ty = rest.trim().strip_prefix("array<")?.strip_suffix(">;")?;
    Some((binding, name.trim(), ty.trim()))
}

/// The table entry of binding `b`: `layout.FIELD[b / 4].xyzw`.
fn entry(field: &str, b: u32) -> String {
    let lane = ["x", "y", "z", "w"][b as usize % 4];
    format!("packing.{field}[{}].{lane}", b / 4)
}

fn arena_name(p: &PackedBinding) -> &'static str {
    match p.arena {
        Arena::F4 => "arena_f4",
        Arena::U4 => "arena_u4",
        Arena::U1 => "arena_u1",
        Arena::A1 => "arena_atomic",
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Rewrites a module source (`common.wgsl` then a stage) for the packed
/// layout: the packed declarations give way to the arenas and the table,
/// and every indexing of a packed array, and every `arrayLength` of one,
/// reads through the table. A packed name used any other way (a local or
/// parameter of the same name) is an error naming its line: the rewrite
/// could not tell the two apart.
pub fn pack_source(
    source: &str,
    packed: &BTreeMap<String, PackedBinding>,
) -> Result<String, GpuError> {
    let err = |line: usize, what: String| GpuError::Shader {
        name: "packed layout".into(),
        report: format!("line {line}: {what}"),
    };
    let mut declarations = String::new();
    declarations.push_str(&format!(
        "struct Packing {{\n    at: array<vec4<u32>, {n}>,\n    len: array<vec4<u32>, {n}>,\n}}\n\
         @group(0) @binding({B_LAYOUT}) var<uniform> packing: Packing;\n\
         @group(0) @binding({B_ARENA_F4}) var<storage, read_write> arena_f4: array<vec4<f32>>;\n\
         @group(0) @binding({B_ARENA_U4}) var<storage, read_write> arena_u4: array<vec4<u32>>;\n\
         @group(0) @binding({B_ARENA_U1}) var<storage, read_write> arena_u1: array<u32>;\n\
         @group(0) @binding({B_ARENA_ATOMIC}) var<storage, read_write> arena_atomic: array<atomic<u32>>;\n",
        n = LAYOUT_ENTRIES / 4
    ));
    let mut out = String::with_capacity(source.len() * 5 / 4);
    let mut declared = false;
    // Per open `[`: whether it opened a packed index (closed by `)]`).
    let mut brackets: Vec<bool> = Vec::new();
    let mut struct_depth: Option<usize> = None;
    let mut braces = 0usize;
    for (number, line) in source.lines().enumerate() {
        let number = number + 1;
        if let Some((_, name, _)) = storage_declaration(line)
            && packed.contains_key(name)
        {
            if !declared {
                out.push_str(&declarations);
                declared = true;
            }
            out.push_str("// (packed) ");
            out.push_str(line.trim());
            out.push('\n');
            continue;
        }
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
                out.push_str(&line[i..]);
                break;
            }
            if c == b'{' {
                braces += 1;
            } else if c == b'}' {
                braces = braces.saturating_sub(1);
                if struct_depth == Some(braces) {
                    struct_depth = None;
                }
            }
            if c == b'[' {
                brackets.push(false);
                out.push('[');
                i += 1;
                continue;
            }
            if c == b']' {
                if brackets
                    .pop()
                    .ok_or_else(|| err(number, "unbalanced `]`".into()))?
                {
                    out.push_str(")]");
                } else {
                    out.push(']');
                }
                i += 1;
                continue;
            }
            if !is_ident(c) || (i > 0 && is_ident(bytes[i - 1])) {
                out.push(c as char);
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let word = &line[start..i];
            if word == "struct" {
                struct_depth = Some(braces);
            }
            let after = line[i..].trim_start();
            if word == "arrayLength"
                && let Some(inner) = after.strip_prefix('(')
                && let Some((arg, _)) = inner.split_once(')')
                && let Some(name) = arg.trim().strip_prefix('&')
                && let Some(p) = packed.get(name.trim())
            {
                out.push_str(&entry("len", p.binding));
                let skip = line[i..].find(')').map_or(0, |k| k + 1);
                i += skip;
                continue;
            }
            let Some(p) = packed.get(word) else {
                out.push_str(word);
                continue;
            };
            let member = line[..start].trim_end().ends_with('.');
            if member || struct_depth.is_some() && braces > 0 && after.starts_with(':') {
                out.push_str(word);
                continue;
            }
            if !after.starts_with('[') {
                return Err(err(
                    number,
                    format!(
                        "`{word}` is a packed binding but is used here without an index \
                         (a local or parameter of the same name?): rename it"
                    ),
                ));
            }
            // `name [` → `arena[layout.at[q].c + (`, closed at its `]`.
            i = line.len() - after.len() + 1;
            out.push_str(arena_name(p));
            out.push('[');
            out.push_str(&entry("at", p.binding));
            out.push_str(" + (");
            brackets.push(true);
        }
        out.push('\n');
    }
    if !brackets.is_empty() {
        return Err(err(source.lines().count(), "unclosed `[`".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexing_and_lengths_read_through_the_table() {
        let common = "@group(0) @binding(2) var<storage, read_write> pos: array<vec4<f32>>;\n\
                      @group(0) @binding(13) var<storage, read_write> cell_count: array<atomic<u32>>;\n\
                      @group(0) @binding(29) var<storage, read_write> scan_in: array<u32>;\n\
                      @group(0) @binding(56) var<storage, read_write> dispatch_args: array<u32>;\n";
        let packed = packed_bindings(common);
        assert_eq!(
            packed.len(),
            2,
            "dispatch_args and scan_in stay bindings of their own"
        );
        let src = format!(
            "{common}fn f(i: u32) -> f32 {{\n    let n = arrayLength(&pos);\n    \
             atomicAdd(&cell_count[u32(pos[i + pos_i[2]].x)], 1u); // pos[i]\n    \
             return pos[i].w + f32(n) + s.pos;\n}}\n"
        );
        let out = pack_source(&src, &packed).expect("packs");
        assert!(out.contains("let n = packing.len[0].z;"), "{out}");
        assert!(
            out.contains(
                "atomicAdd(&arena_atomic[packing.at[3].y + (u32(arena_f4[packing.at[0].z + (i + pos_i[2])].x))], 1u); // pos[i]"
            ),
            "{out}"
        );
        assert!(
            out.contains("return arena_f4[packing.at[0].z + (i)].w"),
            "{out}"
        );
        assert!(out.contains("s.pos;"), "{out}");
        assert!(out.contains("var<storage, read_write> dispatch_args"));
        // A local of a packed name is refused, not silently rewritten.
        let shadow = format!("{common}fn g() {{ let pos = 1.0; }}\n");
        assert!(pack_source(&shadow, &packed).is_err());
    }
}
