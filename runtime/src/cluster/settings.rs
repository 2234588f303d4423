//! Settings saved on any node, in force on every node (SPEC §12).
//!
//! A run-time patch is a compare-and-set on the settings row on whichever node receives it (the
//! store's `save_settings`), and that node's store notifies `rein_settings`. Every node then
//! reads the saved records and puts in force each one newer than its own revision
//! (`Runtime::adopt_saved_settings`: restored, and `config/changed` told to its awake
//! sessions). A patch based on a revision older than the saved one is refused on every node —
//! the compare-and-set is in the database — whether or not its notice has arrived. Notices may
//! be missed (the listener reconnecting): the node reads the records again whenever its listener
//! connects.

use super::Core;
use crate::runtime::Runtime;

/// Reads the saved settings and adopts the newer ones, on a task of the node.
pub(crate) fn spawn_sync(core: &Core, runtime: &Runtime) {
    let store = core.session_store();
    let runtime = runtime.clone();
    core.tasks.spawn(async move {
        match store.load_settings().await {
            Ok(records) => runtime.adopt_saved_settings(records),
            Err(error) => tracing::warn!(%error, "could not read the saved settings"),
        }
    });
}
