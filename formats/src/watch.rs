//! Debounced file watching for hot reload (`notify`): watches the folders of
//! the given files, not the files, since editors save by writing a temporary
//! file and renaming it over the original; reports a change once no event
//! has arrived for the debounce interval.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

/// Quiet time after the last event before a change is reported. Default 150 ms.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// Watches a set of files through their folders.
pub struct FileWatcher {
    _watcher: notify::RecommendedWatcher,
    events: Receiver<notify::Result<notify::Event>>,
    files: Vec<PathBuf>,
    pending_since: Option<Instant>,
    debounce: Duration,
}

impl std::fmt::Debug for FileWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatcher")
            .field("files", &self.files)
            .finish()
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

impl FileWatcher {
    /// Watches `files` (and everything in a folder, for folders).
    pub fn new(files: &[PathBuf]) -> Result<Self, notify::Error> {
        let (tx, events) = channel();
        let mut watcher = notify::recommended_watcher(tx)?;
        let files: Vec<PathBuf> = files.iter().map(|f| absolute(f)).collect();
        let mut folders: Vec<PathBuf> = files
            .iter()
            .map(|f| {
                if f.is_dir() {
                    f.clone()
                } else {
                    f.parent()
                        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
                }
            })
            .collect();
        folders.sort();
        folders.dedup();
        for folder in &folders {
            watcher.watch(folder, RecursiveMode::NonRecursive)?;
        }
        Ok(Self {
            _watcher: watcher,
            events,
            files,
            pending_since: None,
            debounce: DEBOUNCE,
        })
    }

    /// Sets the debounce interval.
    pub fn with_debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    fn concerns(&self, path: &Path) -> bool {
        let path = absolute(path);
        self.files
            .iter()
            .any(|f| *f == path || (f.is_dir() && path.parent() == Some(f.as_path())))
    }

    /// Drains events; true once, after a watched file changed and then stayed
    /// quiet for the debounce interval.
    pub fn changed(&mut self) -> bool {
        while let Ok(event) = self.events.try_recv() {
            if let Ok(event) = event
                && !matches!(event.kind, notify::EventKind::Access(_))
                && event.paths.iter().any(|p| self.concerns(p))
            {
                self.pending_since = Some(Instant::now());
            }
        }
        match self.pending_since {
            Some(t) if t.elapsed() >= self.debounce => {
                self.pending_since = None;
                true
            }
            _ => false,
        }
    }

    /// Blocks until a change is reported or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.changed() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rename_save(path: &Path, text: &str) {
        let tmp = path.with_extension("tmp~");
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, path).expect("rename");
    }

    #[test]
    fn an_edit_is_picked_up_within_a_second() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("scene.toml");
        std::fs::write(&file, "a").expect("write");
        let mut w = FileWatcher::new(std::slice::from_ref(&file)).expect("watch");
        assert!(!w.wait(Duration::from_millis(300)), "no change yet");
        let saved = Instant::now();
        rename_save(&file, "b");
        assert!(w.wait(Duration::from_secs(1)), "missed a rename-save");
        assert!(saved.elapsed() < Duration::from_secs(1));
        // Another file in the folder is not a change of ours.
        std::fs::write(dir.path().join("other.txt"), "x").expect("write");
        assert!(!w.wait(Duration::from_millis(400)));
    }

    #[test]
    fn a_hundred_rename_saves_end_in_one_change_with_the_last_content() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("scene.toml");
        std::fs::write(&file, "0").expect("write");
        let mut w = FileWatcher::new(std::slice::from_ref(&file)).expect("watch");
        for k in 1..=100 {
            rename_save(&file, &k.to_string());
        }
        assert!(w.wait(Duration::from_secs(2)), "missed the saves");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), "100");
        assert!(!w.wait(Duration::from_millis(400)), "reported twice");
    }
}
