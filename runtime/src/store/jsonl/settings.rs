//! Plugin settings in a JSONL store's directory: one `<plugin>.settings.json` per plugin, one
//! JSON document ([`SettingsRecord`]), replaced atomically.
//!
//! A save takes an exclusive lock on `<plugin>.settings.lock` (blocking, held for the few
//! milliseconds of the save, released by the operating system if the process dies), reads the
//! record there, applies the compare-and-set, writes the new record to
//! `<plugin>.settings.json.tmp`, syncs it, renames it over the record and syncs the directory:
//! a crash leaves the old record or the new one, never half of one, and two processes on one
//! directory cannot both win from one revision. Settings are synced whatever the store's
//! durability for appends: they are rare, and a change acknowledged must survive a power loss.
//!
//! The lock file stays (see `lock_file` for why lock files are never deleted).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::file;
use crate::store::settings_record::{check_base, check_plugin_name, read_record};
use crate::store::{SettingsRecord, StoreError, StoredSettings};

/// The longest settings record read, in bytes.
const MAX_RECORD_BYTES: u64 = 1 << 20;

const SUFFIX: &str = ".settings.json";

fn record_path(dir: &Path, plugin: &str) -> PathBuf {
    dir.join(format!("{plugin}{SUFFIX}"))
}

/// Saves `record` based on `base` (see the module docs).
pub(super) fn save(dir: &Path, record: &SettingsRecord, base: u64) -> Result<(), StoreError> {
    check_plugin_name(&record.plugin)?;
    let lock_path = dir.join(format!("{}.settings.lock", record.plugin));
    let options = OpenOptions::new().read(true).write(true).create(true).clone();
    let lock = file::open(&lock_path, &options).map_err(|e| StoreError::io(&lock_path, e))?;
    lock.lock().map_err(|e| StoreError::io(&lock_path, e))?;

    let path = record_path(dir, &record.plugin);
    let stored = match read(&path, &record.plugin) {
        Ok(stored) => stored.map(|s| s.revision()),
        Err(e) => return Err(StoreError::io(&path, e)),
    };
    check_base(record, base, stored)?;

    let mut text =
        serde_json::to_vec(record).map_err(|e| StoreError::io(&path, io::Error::other(e)))?;
    text.push(b'\n');
    let tmp = dir.join(format!("{}{SUFFIX}.tmp", record.plugin));
    let written = (|| {
        let mut out = File::create(&tmp)?;
        out.write_all(&text)?;
        out.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(StoreError::io(&tmp, e));
    }
    std::fs::rename(&tmp, &path).map_err(|e| StoreError::io(&path, e))?;
    if cfg!(unix) {
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io(dir, e))?;
    }
    drop(lock);
    Ok(())
}

/// The record at `path`, leniently; `None` when there is none.
fn read(path: &Path, plugin: &str) -> io::Result<Option<StoredSettings>> {
    let at = path.display().to_string();
    match file::read_to_string(path, MAX_RECORD_BYTES) {
        Ok(text) => Ok(Some(read_record(plugin, &at, &text))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Ok(Some(StoredSettings::Damaged {
            plugin: plugin.to_owned(),
            at,
            message: "the record is not UTF-8".to_owned(),
            revision: 0,
        })),
        Err(e) if matches!(e.kind(), io::ErrorKind::FileTooLarge | io::ErrorKind::InvalidInput) => {
            let message = e.to_string();
            Ok(Some(StoredSettings::Damaged {
                plugin: plugin.to_owned(),
                at,
                message,
                revision: 0,
            }))
        }
        Err(e) => Err(e),
    }
}

/// Every record in `dir`, in plugin-name order.
pub(super) fn load(dir: &Path) -> Result<Vec<StoredSettings>, StoreError> {
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))?;
    let mut plugins = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        let name = entry.file_name();
        let Some(plugin) = name.to_str().and_then(|n| n.strip_suffix(SUFFIX)) else { continue };
        if check_plugin_name(plugin).is_ok() {
            plugins.push(plugin.to_owned());
        }
    }
    plugins.sort();
    let mut records = Vec::with_capacity(plugins.len());
    for plugin in plugins {
        let path = record_path(dir, &plugin);
        match read(&path, &plugin) {
            Ok(Some(stored)) => records.push(stored),
            Ok(None) => {} // replaced or removed meanwhile
            Err(e) => return Err(StoreError::io(&path, e)),
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(plugin: &str, revision: u64) -> SettingsRecord {
        SettingsRecord {
            plugin: plugin.into(),
            revision,
            settings: json!({"maxRetries": revision}),
        }
    }

    #[test]
    fn saves_continue_the_revision_and_replace_the_record() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &record("llm-retry", 1), 0).unwrap();
        save(dir.path(), &record("llm-retry", 2), 1).unwrap();
        save(dir.path(), &record("auto-retry", 1), 0).unwrap();
        let conflict = save(dir.path(), &record("llm-retry", 2), 1).unwrap_err();
        assert!(
            matches!(conflict, StoreError::SettingsConflict { base: 1, found: 2, .. }),
            "{conflict:?}"
        );
        let loaded = load(dir.path()).unwrap();
        assert_eq!(
            loaded,
            [
                StoredSettings::Record(record("auto-retry", 1)),
                StoredSettings::Record(record("llm-retry", 2))
            ]
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "auto-retry.settings.json",
                "auto-retry.settings.lock",
                "llm-retry.settings.json",
                "llm-retry.settings.lock"
            ],
            "no temporary file is left"
        );
    }

    #[test]
    fn a_damaged_record_is_reported_and_replaced_by_the_first_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("llm-retry.settings.json");
        std::fs::write(&path, b"{\"plugin\":\"llm-retry\",\"revis").unwrap();
        std::fs::write(dir.path().join("fallback.settings.json"), [0xff, 0xfe]).unwrap();
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded.len(), 2, "{loaded:?}");
        for stored in &loaded {
            let StoredSettings::Damaged { at, .. } = stored else { panic!("{stored:?}") };
            assert!(at.ends_with(&format!("{}.settings.json", stored.plugin())), "{at}");
        }
        // Counted as revision 0: the first accepted patch replaces it.
        save(dir.path(), &record("llm-retry", 1), 0).unwrap();
        assert_eq!(load(dir.path()).unwrap()[1], StoredSettings::Record(record("llm-retry", 1)));
    }

    #[test]
    fn a_plugin_name_that_cannot_name_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = save(dir.path(), &record("../x", 1), 0).unwrap_err();
        assert!(matches!(error, StoreError::InvalidPluginName(_)), "{error:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
