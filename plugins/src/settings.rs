//! Plugin settings and the two ways they arrive (see `docs/runtime-semantics.md`, "auto-retry").
//!
//! - A **configuration file** is edited by hand and read once, leniently ([`file::FileReader`]):
//!   a value that cannot be used falls back (to the default, or clamped into its bounds) and
//!   leaves a [`Warning`] naming the field, so a typo never stops the runtime and never passes
//!   silently.
//! - A **run-time update** comes from a settings page or a CLI: a patch (a JSON object of the
//!   fields to change) plus the revision it was based on. It is read strictly
//!   ([`patch`]: an invalid value is a [`FieldError`] naming the field, nothing changes) behind a
//!   compare-and-set fence ([`Revisioned`]): a patch based on a revision that is no longer current
//!   is refused, so of two concurrent writers exactly one wins and the other must reload.
//!
//! A plugin's settings type implements [`Patchable`] (how a patch applies to it); [`Revisioned`]
//! then gives it the fence, the revision counter, staging and committing, and restoring: it
//! implements the runtime's [`Settings`](rein_runtime::plugin::Settings) seam once for every
//! settings type, so a plugin's `Plugin::settings` is `Some(&self.settings)`.
//!
//! # Why lenient in one place and strict in the other
//!
//! A file is read when nobody is looking at a form: refusing it would take the plugin (or the
//! runtime) down over a typo, so it degrades to safe values and says so. A run-time patch has a
//! person (or a program) waiting for the answer: it can be told exactly which field is wrong, and
//! writing a value the person did not mean would be worse than refusing.

pub mod file;
pub mod patch;
pub mod revisioned;

use serde_json::Value;

pub use file::{FileReader, Warning, WarningKind};
pub use patch::FieldError;
pub use revisioned::{Revisioned, Snapshot};

/// Settings that can be changed at run time by a patch (a JSON object of the fields to change).
/// The keys a patch uses are the keys the settings serialize with, so the settings as shown are
/// also a patch that restores them.
pub trait Patchable: Send + Sync + 'static + Sized {
    /// Reads `patch` strictly against `self`: the settings with the patch applied and the names
    /// of the fields whose value actually changed (in the settings' own key order), or the first
    /// invalid field. `self` is not changed.
    fn patched(&self, patch: &Value) -> Result<Patched<Self>, FieldError>;
}

/// Settings with a patch applied, and what it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Patched<T> {
    /// The new settings.
    pub settings: T,
    /// The keys of the fields whose value changed (empty when the patch changed nothing).
    pub changed: Vec<&'static str>,
}
