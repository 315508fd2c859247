//! [`ConfigMapVolume`]: a folder laid out and updated as the kubelet does a mounted
//! ConfigMap, for the hot-reload tests.
//!
//! The kubelet writes every version of the ConfigMap into a new hidden folder named after
//! the time (`..2026_12_01_18_58_48.123456789`), points the `..data` link at it by
//! renaming a fresh link over the old one (one atomic step), then makes a link
//! `key -> ..data/key` for each new key, removes the links of keys that are gone, and
//! deletes the old folder. Readers that follow `key` see the old or the new version,
//! never half of one.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// A folder as the kubelet mounts a ConfigMap volume.
#[derive(Debug)]
pub struct ConfigMapVolume {
    dir: PathBuf,
    /// The current timestamped folder's name.
    current: Option<String>,
    /// The keys published now.
    keys: Vec<String>,
    /// Versions published, so that each timestamped folder has a new name.
    generation: u32,
}

impl ConfigMapVolume {
    /// An empty volume in a fresh folder under the system's temporary folder.
    ///
    /// # Panics
    /// When the folder cannot be made.
    pub fn new(name: &str) -> ConfigMapVolume {
        let dir = std::env::temp_dir().join(format!("kapsel-volume-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the volume's folder");
        ConfigMapVolume {
            dir,
            current: None,
            keys: Vec::new(),
            generation: 0,
        }
    }

    /// The mounted folder (what the operator is given).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Publishes a new version of the ConfigMap: these keys, with these contents, and no
    /// others, swapped in as the kubelet does.
    ///
    /// # Panics
    /// When a file system step fails.
    pub fn publish(&mut self, files: &[(&str, &[u8])]) {
        self.generation += 1;
        let folder = format!("..2026_12_01_00_00_00.{:09}", self.generation);
        let path = self.dir.join(&folder);
        std::fs::create_dir(&path).expect("the timestamped folder");
        for (key, bytes) in files {
            std::fs::write(path.join(key), bytes).expect("a key's file");
        }
        // The one atomic step: `..data` now leads to the new version.
        let staged = self.dir.join("..data_tmp");
        symlink(&folder, &staged).expect("the staged link");
        std::fs::rename(&staged, self.dir.join("..data")).expect("the swap of ..data");
        let keys: Vec<String> = files.iter().map(|(key, _)| (*key).to_owned()).collect();
        for key in keys.iter().filter(|key| !self.keys.contains(key)) {
            symlink(format!("..data/{key}"), self.dir.join(key)).expect("a key's link");
        }
        for key in self.keys.iter().filter(|key| !keys.contains(key)) {
            std::fs::remove_file(self.dir.join(key)).expect("a removed key's link");
        }
        if let Some(old) = self.current.replace(folder) {
            std::fs::remove_dir_all(self.dir.join(old)).expect("the old folder");
        }
        self.keys = keys;
    }
}

impl Drop for ConfigMapVolume {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
