//! [`Outputs`]: the files a command writes, checked before the work and
//! replaced all together after it. Every Pellet binary checks its outputs
//! here (`bake`'s files, `player run --save/--stats/--save-dir`, `player nns
//! --out`), so an output is refused the same way, with the same words,
//! everywhere.
//!
//! [`Outputs::prepare`] refuses an output that is one of the command's inputs
//! (the same file by path, link or hard link), named twice, a folder or a
//! device, or in a folder that is missing or cannot be written (a probe file
//! is created there and removed). After the work, [`Outputs::write`] puts
//! each output into a temporary file beside its target and
//! [`Outputs::commit`] renames them over their targets only when every one is
//! written. A failure anywhere, or dropping the [`Outputs`] uncommitted,
//! removes the temporary files and leaves the old outputs byte-identical; as
//! temporary files exist only while the outputs are written, a bake
//! interrupted with Ctrl-C leaves nothing behind either.

// On wasm32 `File` has no `Drop` (there is no file system): the closes are no-ops there.
#![cfg_attr(target_arch = "wasm32", allow(clippy::drop_non_drop))]

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::io::file_kind as kind;
use thiserror::Error;

/// Why an output cannot be written. Each message names the output file.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The output is one of the inputs.
    #[error("{}: is also an input of this command; refusing to overwrite it", path.display())]
    IsInput {
        /// The output.
        path: PathBuf,
    },
    /// Two outputs are the same file.
    #[error("{}: is named for two outputs", path.display())]
    Twice {
        /// The output.
        path: PathBuf,
    },
    /// The output names a folder (or has no file name).
    #[error("{}: is a folder, not a file", path.display())]
    IsFolder {
        /// The output.
        path: PathBuf,
    },
    /// The output exists and is a device, FIFO or socket.
    #[error("{}: is a {kind}, not a regular file", path.display())]
    NotRegular {
        /// The output.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// The output's folder does not exist or is not a folder.
    #[error("{}: the folder {} {problem}", path.display(), folder.display())]
    BadFolder {
        /// The output.
        path: PathBuf,
        /// Its folder.
        folder: PathBuf,
        /// `does not exist`, `is not a folder`.
        problem: String,
    },
    /// An output folder exists and is not a folder.
    #[error("{}: is a {kind}, not a folder", path.display())]
    NotFolder {
        /// The output folder.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// The file system refused to create or write the output.
    #[error("{}: cannot write: {error}", path.display())]
    Io {
        /// The output.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
}

/// One output: its target and, once written, the temporary file beside it.
#[derive(Debug)]
struct Pending {
    target: PathBuf,
    temp: Option<PathBuf>,
}

/// Outputs checked up front, written to temporary files, renamed together.
#[derive(Debug)]
pub struct Outputs {
    pending: Vec<Pending>,
}

/// The folder `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A file's identity: its canonical path, or its canonical folder and name
/// when it does not exist yet; and device and inode when it exists.
#[derive(Debug, PartialEq, Eq)]
struct Identity {
    path: Option<PathBuf>,
    inode: Option<(u64, u64)>,
}

impl Identity {
    fn of(path: &Path) -> Self {
        let canonical = std::fs::canonicalize(path).ok().or_else(|| {
            let name = path.file_name()?;
            std::fs::canonicalize(folder_of(path))
                .ok()
                .map(|d| d.join(name))
        });
        Self {
            path: canonical,
            inode: inode(path),
        }
    }

    fn same(&self, other: &Self) -> bool {
        (self.path.is_some() && self.path == other.path)
            || (self.inode.is_some() && self.inode == other.inode)
    }
}

#[cfg(unix)]
fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn inode(_: &Path) -> Option<(u64, u64)> {
    None
}

/// Refuses `path` as an output if it is one of `inputs`.
fn refuse_inputs(path: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    let me = Identity::of(path);
    if inputs.iter().any(|i| Identity::of(i).same(&me)) {
        return Err(OutputError::IsInput {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Checks that `folder` exists and is a folder (for `path`'s messages).
fn check_folder(path: &Path, folder: &Path) -> Result<(), OutputError> {
    let bad = |problem: String| OutputError::BadFolder {
        path: path.to_path_buf(),
        folder: folder.to_path_buf(),
        problem,
    };
    match std::fs::metadata(folder) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(bad("is not a folder".into())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad("does not exist".into())),
        Err(e) => Err(bad(format!("cannot be read: {e}"))),
    }
}

/// Creates a new, empty temporary file in `folder` for `name`.
fn create_temp(folder: &Path, name: &str, tag: &str) -> std::io::Result<(PathBuf, File)> {
    let mut attempt = 0u32;
    loop {
        let temp = folder.join(format!(".{name}.{}.{attempt}.{tag}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(f) => return Ok((temp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

impl Outputs {
    /// Checks every target (see the module documentation), before any work
    /// is done.
    pub fn prepare(targets: &[&Path], inputs: &[&Path]) -> Result<Self, OutputError> {
        let mut out = Self {
            pending: Vec::new(),
        };
        let mut seen: Vec<Identity> = Vec::new();
        for &target in targets {
            let path = target.to_path_buf();
            let Some(name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                return Err(OutputError::IsFolder { path });
            };
            match std::fs::metadata(target) {
                Ok(m) if m.is_dir() => return Err(OutputError::IsFolder { path }),
                Ok(m) if !m.is_file() => {
                    return Err(OutputError::NotRegular {
                        path,
                        kind: kind(&m),
                    });
                }
                _ => {}
            }
            refuse_inputs(target, inputs)?;
            let me = Identity::of(target);
            if seen.iter().any(|s| s.same(&me)) {
                return Err(OutputError::Twice { path });
            }
            seen.push(me);
            let folder = folder_of(target);
            check_folder(target, folder)?;
            // The folder is writable if a file can be created in it.
            let (probe, file) =
                create_temp(folder, &name, "tmp").map_err(|error| OutputError::Io {
                    path: path.clone(),
                    error,
                })?;
            drop(file);
            let _ = std::fs::remove_file(probe);
            out.pending.push(Pending {
                target: path,
                temp: None,
            });
        }
        Ok(out)
    }

    /// Refuses the outputs if one of them is one of `inputs` (files learnt
    /// during the work, such as a glTF's buffer files).
    pub fn refuse_inputs(&self, inputs: &[&Path]) -> Result<(), OutputError> {
        self.pending
            .iter()
            .try_for_each(|p| refuse_inputs(&p.target, inputs))
    }

    /// Writes `bytes` into the temporary file of the output `index` (in
    /// [`Outputs::prepare`]'s order) and flushes it to disk.
    pub fn write(&mut self, index: usize, bytes: &[u8]) -> Result<(), OutputError> {
        let Some(p) = self.pending.get_mut(index) else {
            return Err(OutputError::Io {
                path: PathBuf::new(),
                error: std::io::Error::other(format!("no output {index}")),
            });
        };
        let io = |error| OutputError::Io {
            path: p.target.clone(),
            error,
        };
        if p.temp.is_some() {
            return Err(io(std::io::Error::other("written twice")));
        }
        let name = p
            .target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (temp, mut file) = create_temp(folder_of(&p.target), &name, "tmp").map_err(io)?;
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        drop(file);
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io(error));
        }
        p.temp = Some(temp);
        Ok(())
    }

    /// Renames every temporary file over its target. All outputs must have
    /// been written. If a rename fails, the targets already renamed are put
    /// back from hard-link backups (where the file system has them), so the
    /// old files stay as they were.
    pub fn commit(mut self) -> Result<(), OutputError> {
        if let Some(p) = self.pending.iter().find(|p| p.temp.is_none()) {
            return Err(OutputError::Io {
                path: p.target.clone(),
                error: std::io::Error::other("was never written"),
            });
        }
        let pending = std::mem::take(&mut self.pending);
        // Backups of the old targets, in case a later rename fails.
        let mut backups: Vec<Option<PathBuf>> = Vec::new();
        for p in &pending {
            let backup = p.target.exists().then(|| {
                let name = p.target.file_name()?.to_string_lossy().into_owned();
                let (path, file) = create_temp(folder_of(&p.target), &name, "bak").ok()?;
                drop(file);
                let _ = std::fs::remove_file(&path);
                std::fs::hard_link(&p.target, &path).ok().map(|()| path)
            });
            backups.push(backup.flatten());
        }
        let mut failure = None;
        let temps: Vec<&Path> = pending.iter().filter_map(|p| p.temp.as_deref()).collect();
        for (k, (p, temp)) in pending.iter().zip(&temps).enumerate() {
            if let Err(error) = std::fs::rename(temp, &p.target) {
                failure = Some((k, error));
                break;
            }
        }
        if let Some((failed, error)) = failure {
            for (p, backup) in pending.iter().zip(&backups).take(failed) {
                match backup {
                    Some(b) => {
                        let _ = std::fs::rename(b, &p.target);
                    }
                    None => {
                        let _ = std::fs::remove_file(&p.target);
                    }
                }
            }
            for temp in &temps[failed..] {
                let _ = std::fs::remove_file(temp);
            }
            for b in backups.iter().flatten() {
                let _ = std::fs::remove_file(b);
            }
            return Err(OutputError::Io {
                path: pending[failed].target.clone(),
                error,
            });
        }
        for b in backups.iter().flatten() {
            let _ = std::fs::remove_file(b);
        }
        Ok(())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for temp in self.pending.iter().filter_map(|p| p.temp.as_deref()) {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// Checks that `folder` can be a command's output folder before the work:
/// it is a folder (created, with its parents, if missing) in which a file
/// can be created.
pub fn prepare_folder(folder: &Path) -> Result<(), OutputError> {
    let path = folder.to_path_buf();
    match std::fs::metadata(folder) {
        Ok(m) if m.is_dir() => {}
        Ok(m) => {
            return Err(OutputError::NotFolder {
                path,
                kind: if m.is_file() { "file" } else { kind(&m) },
            });
        }
        Err(_) => std::fs::create_dir_all(folder).map_err(|error| OutputError::Io {
            path: path.clone(),
            error,
        })?,
    }
    let (probe, file) = create_temp(folder, "write-check", "tmp")
        .map_err(|error| OutputError::Io { path, error })?;
    drop(file);
    let _ = std::fs::remove_file(probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect()
    }

    #[test]
    fn outputs_replace_all_targets_only_on_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a.pellet"), dir.path().join("b.png"));
        std::fs::write(&a, b"old a").expect("write");
        let mut outputs = Outputs::prepare(&[&a, &b], &[]).expect("prepare");
        outputs.write(0, b"new a").expect("write a");
        drop(outputs); // the work failed before b was written
        assert_eq!(std::fs::read(&a).expect("a"), b"old a");
        assert!(!b.exists());
        assert!(
            leftovers(dir.path()).is_empty(),
            "{:?}",
            leftovers(dir.path())
        );

        let mut outputs = Outputs::prepare(&[&a, &b], &[]).expect("prepare");
        outputs.write(0, b"new a").expect("write a");
        assert!(outputs.commit().is_err(), "b was never written");
        assert_eq!(std::fs::read(&a).expect("a"), b"old a");
        assert!(leftovers(dir.path()).is_empty());

        let mut outputs = Outputs::prepare(&[&a, &b], &[]).expect("prepare");
        outputs.write(0, b"new a").expect("write a");
        outputs.write(1, b"new b").expect("write b");
        outputs.commit().expect("commit");
        assert_eq!(std::fs::read(&a).expect("a"), b"new a");
        assert_eq!(std::fs::read(&b).expect("b"), b"new b");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_failed_rename_puts_the_renamed_targets_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"old a").expect("write");
        let mut outputs = Outputs::prepare(&[&a, &b], &[]).expect("prepare");
        outputs.write(0, b"new a").expect("write a");
        outputs.write(1, b"new b").expect("write b");
        // b became a non-empty folder after the check: its rename fails.
        std::fs::create_dir(&b).expect("mkdir");
        std::fs::write(b.join("x"), b"x").expect("write");
        assert!(outputs.commit().is_err());
        assert_eq!(std::fs::read(&a).expect("a"), b"old a");
        assert!(
            leftovers(dir.path()).is_empty(),
            "{:?}",
            leftovers(dir.path())
        );
    }

    #[test]
    fn inputs_folders_devices_and_missing_folders_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("t.glb");
        std::fs::write(&input, b"mesh").expect("write");
        let err = Outputs::prepare(&[&input], &[&input]).expect_err("input");
        assert!(matches!(err, OutputError::IsInput { .. }), "{err}");
        // The same file by another spelling, a symbolic link and a hard link.
        let other = dir.path().join(".").join("t.glb");
        let err = Outputs::prepare(&[&other], &[&input]).expect_err("input");
        assert!(matches!(err, OutputError::IsInput { .. }), "{err}");
        #[cfg(unix)]
        {
            let link = dir.path().join("link.glb");
            std::os::unix::fs::symlink(&input, &link).expect("symlink");
            let err = Outputs::prepare(&[&link], &[&input]).expect_err("symlink");
            assert!(matches!(err, OutputError::IsInput { .. }), "{err}");
            let hard = dir.path().join("hard.glb");
            std::fs::hard_link(&input, &hard).expect("hard link");
            let err = Outputs::prepare(&[&hard], &[&input]).expect_err("hard link");
            assert!(matches!(err, OutputError::IsInput { .. }), "{err}");
            let err = Outputs::prepare(&[Path::new("/dev/null")], &[]).expect_err("device");
            assert!(matches!(err, OutputError::NotRegular { .. }), "{err}");
        }
        let out = dir.path().join("o.pellet");
        let err = Outputs::prepare(&[&out, &out], &[]).expect_err("twice");
        assert!(matches!(err, OutputError::Twice { .. }), "{err}");
        let err = Outputs::prepare(&[dir.path()], &[]).expect_err("folder");
        assert!(matches!(err, OutputError::IsFolder { .. }), "{err}");
        let err = Outputs::prepare(&[Path::new("/nodir/p.png")], &[]).expect_err("no folder");
        assert_eq!(
            err.to_string(),
            "/nodir/p.png: the folder /nodir does not exist"
        );
        let err = Outputs::prepare(&[&input.join("x.png")], &[]).expect_err("file as folder");
        assert!(err.to_string().contains("is not a folder"), "{err}");
        assert_eq!(std::fs::read(&input).expect("input"), b"mesh");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn an_output_folder_must_be_a_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("scene.toml");
        std::fs::write(&file, b"x").expect("write");
        let err = prepare_folder(&file).expect_err("file");
        assert!(
            err.to_string().ends_with("is a file, not a folder"),
            "{err}"
        );
        prepare_folder(&dir.path().join("new/baked")).expect("created");
        assert!(dir.path().join("new/baked").is_dir());
        assert!(leftovers(&dir.path().join("new/baked")).is_empty());
    }
}
