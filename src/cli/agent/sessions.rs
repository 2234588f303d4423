//! Where `rein chat` and `rein console` keep their sessions: a JSONL store directory (`--store`,
//! default [`DEFAULT_STORE`]) with one `<id>.jsonl` log per session.
//!
//! Everything a person can get wrong is found here, before the runtime starts and before
//! anything is written, and refused with an error naming the path (and line):
//! - a `--session` that is not a valid session id (`[A-Za-z0-9_.-]`, not starting with `.`, at
//!   most 128 bytes);
//! - a store path that is not a directory, or a directory that cannot be read;
//! - an existing log that cannot be read, has a corrupt line (`PATH:LINE: corrupt log line: …`),
//!   or belongs to another session. It is read with the store's own reader, which never writes:
//!   the file stays byte for byte as it was.
//!
//! A missing store directory is created owner-only (`0700`, with its parents): the logs hold
//! conversations. A new session gets a fresh random id that names no existing log.
//!
//! A `--store` of `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` is a PostgreSQL store instead
//! ([`is_postgres`]): opened at `Disk` durability (synchronous commit), the session's log read
//! through the store the same way, and named `URL#ID` with the URL's password left out (see
//! [`open_postgres`]; `rein console` opens the whole store, [`open_postgres_store`]).

use std::path::Path;
use std::sync::Arc;

use rein_runtime::event::Event;
use rein_runtime::pending::PendingTurn;
use rein_runtime::store::jsonl::{JsonlStore, read_log};
use rein_runtime::store::postgres::PostgresStore;
use rein_runtime::store::{Durability, Head, SessionStore, TornTail, check_session_id};

/// The store directory when `--store` is not given (relative to the working directory).
pub(crate) const DEFAULT_STORE: &str = ".rein/sessions";

/// A session's place in the store, checked.
pub(crate) struct Place {
    /// The store.
    pub(crate) store: Arc<dyn SessionStore>,
    /// The session id.
    pub(crate) id: String,
    /// The session's log, as shown: its file, or `URL#ID` (the URL without its password).
    pub(crate) shown: String,
    /// What the existing log holds, when the session is resumed.
    pub(crate) resumed: Option<Resumed>,
}

/// An existing session's log, as read before resuming it.
#[derive(Debug)]
pub(crate) struct Resumed {
    /// How many turns it holds.
    pub(crate) turns: usize,
    /// A torn last line (a crash during an append): reopening the session cuts it.
    pub(crate) torn: Option<TornTail>,
    /// Its head: the turn a crash left open (opening the session resumes it), and the wake-up
    /// of the retry wait it was in.
    pub(crate) head: Head,
}

impl Resumed {
    /// The turn a crash left open, as the line `rein chat` says when opening resumes it.
    pub(crate) fn pending(&self, id: &str) -> Option<PendingTurn> {
        let turn = self.head.open_turn?;
        Some(PendingTurn { session: id.to_owned(), turn, wake_at: self.head.wake_at })
    }
}

/// Opens the store at `dir` and places the session `id` (a new one when `None`) in it; the
/// error is a line for the person, naming the path.
pub(crate) fn open(dir: &Path, id: Option<&str>) -> Result<Place, String> {
    if let Some(id) = id {
        check_session_id(id).map_err(|e| format!("--session: {e}"))?;
    }
    let store = open_store(dir)?;
    let id = match id {
        Some(id) => id.to_owned(),
        None => fresh_id(&store)?,
    };
    let path = store.path(&id).map_err(|e| e.to_string())?;
    let resumed = match std::fs::symlink_metadata(&path) {
        Ok(_) => Some(read_existing(&path, &id)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    Ok(Place { store: Arc::new(store), id, shown: path.display().to_string(), resumed })
}

/// Whether a `--store` names a PostgreSQL database rather than a directory.
pub(crate) fn is_postgres(store: &Path) -> bool {
    store.to_str().is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// Opens the PostgreSQL store at `url` and places the session `id` (a new one when `None`) in
/// it, reading an existing log through the store. Blocks on the current tokio runtime: call it
/// from a blocking task.
pub(crate) fn open_postgres(url: &str, id: Option<&str>) -> Result<Place, String> {
    if let Some(id) = id {
        check_session_id(id).map_err(|e| format!("--session: {e}"))?;
    }
    let handle = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
    handle.block_on(async {
        let store = PostgresStore::open(url, Durability::Disk)
            .await
            .map_err(|e| format!("--store: {e}"))?;
        let id = match id {
            Some(id) => id.to_owned(),
            None => loop {
                let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
                if store.load(&id).await.map_err(|e| e.to_string())?.is_none() {
                    break id;
                }
            },
        };
        let shown = format!("{}#{id}", store.shown());
        let resumed = match store.load(&id).await.map_err(|e| e.to_string())? {
            None => None,
            Some(loaded) => Some(resumed_of(&loaded.events, loaded.torn, &shown, &id)?),
        };
        Ok(Place { store: Arc::new(store), id, shown, resumed })
    })
}

/// The PostgreSQL store at `url` (at [`Durability::Disk`]); the error names it without its
/// password.
pub(crate) async fn open_postgres_store(url: &str) -> Result<Arc<PostgresStore>, String> {
    let store =
        PostgresStore::open(url, Durability::Disk).await.map_err(|e| format!("--store: {e}"))?;
    Ok(Arc::new(store))
}

/// The JSONL store at `dir` (appends at [`Durability::Os`]), the directory created owner-only
/// when missing; refused when it is not a readable directory.
pub(crate) fn open_store(dir: &Path) -> Result<JsonlStore, String> {
    prepare_dir(dir)?;
    JsonlStore::open(dir, Durability::Os).map_err(|e| e.to_string())
}

/// The store directory, created owner-only when missing; refused when it is not a readable
/// directory.
fn prepare_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(format!("--store {shown}: not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).map_err(|e| format!("--store {shown}: cannot create it: {e}"))?;
        }
        Err(e) => return Err(format!("--store {shown}: {e}")),
    }
    std::fs::read_dir(dir).map_err(|e| format!("--store {shown}: cannot read it: {e}"))?;
    Ok(())
}

/// Reads an existing log without changing it: its turns, or why it cannot be resumed.
fn read_existing(path: &Path, id: &str) -> Result<Resumed, String> {
    let loaded = read_log(path).map_err(|e| e.to_string())?;
    resumed_of(&loaded.events, loaded.torn, &path.display().to_string(), id)
}

/// What an existing log (named `shown`) holds, or why it is not session `id`'s.
fn resumed_of(
    events: &[rein_runtime::event::Envelope],
    torn: Option<TornTail>,
    shown: &str,
    id: &str,
) -> Result<Resumed, String> {
    if let Some(first) = events.first()
        && let Event::SessionStart(start) = &first.event
        && start.session != id
    {
        return Err(format!(
            "{shown}:1: the log belongs to session {}, not {id:?}",
            rein_runtime::quote::value(&start.session)
        ));
    }
    let turns = events.iter().filter(|e| matches!(e.event, Event::TurnStart(_))).count();
    Ok(Resumed { turns, torn, head: Head::of(events) })
}

/// Whether `store` holds no log of session `id` (it reads the log: an error is one that exists
/// but cannot be read, or a store that cannot be reached).
pub(crate) async fn is_free(store: &dyn SessionStore, id: &str) -> Result<bool, String> {
    store.load(id).await.map(|loaded| loaded.is_none()).map_err(|e| e.to_string())
}

/// A new session id (12 hex digits from a v4 UUID) that names no log in `store`, any store.
pub(crate) async fn fresh_id_in(store: &dyn SessionStore) -> Result<String, String> {
    loop {
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        if is_free(store, &id).await? {
            return Ok(id);
        }
    }
}

/// A new session id (12 hex digits from a v4 UUID) that names no log in `store`.
pub(crate) fn fresh_id(store: &JsonlStore) -> Result<String, String> {
    loop {
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let path = store.path(&id).map_err(|e| e.to_string())?;
        if !path.exists() && std::fs::symlink_metadata(&path).is_err() {
            return Ok(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_places_are_refused_naming_what_is_wrong_and_nothing_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let store = tmp.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let corrupt = store.join("bad.jsonl");
        let line = |seq: u64, data: &str| {
            format!("{{\"seq\":{seq},\"time\":0,\"type\":\"session/start\",\"data\":{data}}}\n")
        };
        let bytes = format!("{}not json\n", line(0, r#"{"session":"bad","format":1}"#));
        std::fs::write(&corrupt, &bytes).unwrap();
        std::fs::write(store.join("other.jsonl"), line(0, r#"{"session":"else","format":1}"#))
            .unwrap();

        let cases: [(&Path, Option<&str>, String); 4] = [
            (&store, Some("../up"), "--session: invalid session id \"../up\"".to_owned()),
            (&file, None, format!("--store {}: not a directory", file.display())),
            (&store, Some("bad"), format!("{}:2: corrupt log line", corrupt.display())),
            (
                &store,
                Some("other"),
                format!(
                    "{}:1: the log belongs to session \"else\"",
                    store.join("other.jsonl").display()
                ),
            ),
        ];
        for (dir, id, want) in cases {
            let error = open(dir, id).err().unwrap();
            assert!(error.starts_with(&want), "{error}\nwanted {want}");
        }
        assert_eq!(std::fs::read_to_string(&corrupt).unwrap(), bytes, "left as it was");
    }

    #[test]
    fn a_missing_store_is_created_private_and_a_new_id_is_fresh() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/sessions");
        let place = open(&dir, None).unwrap();
        assert!(place.resumed.is_none());
        assert_eq!(place.id.len(), 12);
        assert_eq!(place.shown, dir.join(format!("{}.jsonl", place.id)).display().to_string());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700);
        }
        assert_ne!(open(&dir, None).unwrap().id, place.id);
        let named = open(&dir, Some("mine")).unwrap();
        assert_eq!((named.id.as_str(), named.resumed.is_none()), ("mine", true));
    }
}
