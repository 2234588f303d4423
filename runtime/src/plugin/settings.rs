//! [`Settings`]: the seam through which a plugin's run-time settings are shown, changed and
//! restored, and the values that cross it.
//!
//! A settings page or a CLI talks to the runtime, never to a plugin's type. The runtime reaches a
//! plugin's settings through [`Plugin::settings`](super::Plugin::settings), one object with four
//! moves:
//!
//! - [`Settings::shown`]: the values (with the keys a patch uses) and the revision a patch must
//!   name;
//! - [`Settings::stage`]: a patch read strictly behind the revision fence — the fields it would
//!   change and the settings it would leave, or the error naming the field — with nothing applied
//!   (what a settings page calls to block a save);
//! - [`Settings::commit`]: the staged change applied, unless another commit moved the revision
//!   since it was staged ([`ConfigError::StaleRevision`]): of two pages saving from one revision
//!   exactly one wins;
//! - [`Settings::restore`]: settings and their revision put back as recorded (start-up from a
//!   durable record), with no fence.
//!
//! # Why stage, then commit
//!
//! A change is decided once, in `stage`, and carried to `commit` as a [`Staged`] value: the new
//! settings as they will be shown and their revision. Between the two, whoever drives the change
//! can make it durable (write the staged settings to a store) before it takes effect, so that a
//! crash never leaves a plugin running settings that no record knows; `commit` then applies exactly
//! what was written, or refuses if the fence moved meanwhile. The runtime does exactly that
//! ([`Runtime::configure_plugin`](crate::runtime::Runtime::configure_plugin)): stage, save to its
//! store, commit.
//!
//! `rein-plugins`' `Revisioned` implements this once for any settings type, and
//! [`ReadOnly`](super::ReadOnly) for settings shown but fixed at run time.

use std::any::Any;

use serde_json::Value;

/// A plugin's run-time settings, as the runtime drives them (see the module docs). Implemented
/// once by `rein_plugins::settings::Revisioned`; a plugin returns it from
/// [`Plugin::settings`](super::Plugin::settings).
pub trait Settings: Send + Sync {
    /// The current settings and their revision.
    fn shown(&self) -> PluginSettings;

    /// The current revision (the base the next patch must name).
    fn revision(&self) -> u64 {
        self.shown().revision
    }

    /// Reads `patch` (a JSON object of the fields to change) based on `base_revision`: refused
    /// with [`ConfigError::StaleRevision`] unless that is the current revision, with
    /// [`ConfigError::Invalid`] naming the first invalid field, [`ConfigError::ReadOnly`] when
    /// nothing can change. Nothing is applied.
    fn stage(&self, patch: &Value, base_revision: u64) -> Result<Staged, ConfigError>;

    /// Applies a change this object staged: refused with [`ConfigError::StaleRevision`] when a
    /// commit since moved the revision (nothing is applied then). Accepted, the revision is the
    /// staged one and the plugin decides with the new settings from its next read.
    fn commit(&self, staged: Staged) -> Result<ConfigOutcome, ConfigError>;

    /// Stages `patch` and commits it at once (no durable record between the two): what a
    /// program that drives one plugin's settings directly calls.
    fn configure(&self, patch: &Value, base_revision: u64) -> Result<ConfigOutcome, ConfigError> {
        let staged = self.stage(patch, base_revision)?;
        self.commit(staged)
    }

    /// Puts back `settings` (in the form [`Settings::shown`] gives them) at `revision`, as a
    /// durable record holds them: read strictly like a patch (an invalid field is refused and
    /// nothing changes), with no revision fence.
    fn restore(&self, settings: &Value, revision: u64) -> Result<(), ConfigError>;
}

/// A change staged by [`Settings::stage`], on its way to [`Settings::commit`].
pub struct Staged {
    base_revision: u64,
    changed: Vec<String>,
    settings: Value,
    value: Box<dyn Any + Send + Sync>,
}

impl Staged {
    /// A change based on `base_revision` that changes the fields `changed` and leaves `settings`
    /// (as they will be shown); `value` is what the implementation's `commit` applies (its typed
    /// settings).
    pub fn new(
        base_revision: u64,
        changed: Vec<String>,
        settings: Value,
        value: impl Any + Send + Sync,
    ) -> Self {
        Self { base_revision, changed, settings, value: Box::new(value) }
    }

    /// The revision the change is based on.
    pub fn base_revision(&self) -> u64 {
        self.base_revision
    }

    /// The revision the settings will have once committed.
    pub fn revision(&self) -> u64 {
        self.base_revision + 1
    }

    /// The fields whose value changes (empty when the patch changes nothing; it is still a new
    /// revision).
    pub fn changed(&self) -> &[String] {
        &self.changed
    }

    /// The settings once committed, as [`Settings::shown`] will show them: what a durable
    /// record of the change holds (and [`Settings::restore`] takes back).
    pub fn settings(&self) -> &Value {
        &self.settings
    }

    /// The implementation's value, if it is a `T`; else the staged change back (it was staged
    /// by another implementation).
    pub fn into_value<T: Any>(self) -> Result<(T, Vec<String>), Self> {
        let Self { base_revision, changed, settings, value } = self;
        match value.downcast::<T>() {
            Ok(value) => Ok((*value, changed)),
            Err(value) => Err(Self { base_revision, changed, settings, value }),
        }
    }
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("base_revision", &self.base_revision)
            .field("changed", &self.changed)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// A run-time settings change a plugin accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigOutcome {
    /// The new revision.
    pub revision: u64,
    /// The names of the fields that changed (written in `config/changed`).
    pub changed: Vec<String>,
}

/// A plugin's settings as a settings page or a CLI reads them ([`Settings::shown`]): the values
/// with the keys a patch uses, the revision a patch must name, and whether patches are accepted
/// at all.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginSettings {
    /// The revision the next patch must be based on (0 for the settings the plugin was built
    /// with).
    pub revision: u64,
    /// The settings, as a JSON object with the keys of the plugin's configuration and patches.
    pub settings: Value,
    /// Whether run-time patches are refused ([`ConfigError::ReadOnly`]): a page shows the
    /// values without a form.
    pub read_only: bool,
}

/// Why a run-time settings change was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The plugin has no run-time settings.
    #[error("plugin {0} has no run-time settings")]
    Unsupported(String),
    /// No plugin of that name is registered (or it was disposed).
    #[error("no plugin named {0} is in the chain")]
    UnknownPlugin(String),
    /// The patch was based on an older revision than the current one.
    #[error(
        "stale revision: the patch is based on revision {based_on}, the settings are at {current}"
    )]
    StaleRevision {
        /// The revision the patch was based on.
        based_on: u64,
        /// The current revision.
        current: u64,
    },
    /// No route of that name has route health (none has the name, or it was built without
    /// health settings).
    #[error("no route named {0} has route health")]
    NoRouteHealth(String),
    /// A field's value is invalid; `path` names it (`retryableCodes`, `extraRetries`…).
    #[error("{path}: {message}")]
    Invalid {
        /// The field.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// A staged change reached the commit of another plugin's settings.
    #[error("the staged change belongs to another plugin's settings")]
    Foreign,
    /// The change could not be saved to the store, so it was not applied.
    #[error("the settings of plugin {plugin} were not saved, so nothing changed: {message}")]
    NotSaved {
        /// The plugin.
        plugin: String,
        /// Why the save failed.
        message: String,
    },
    /// The plugin's settings can be read but not changed at run time.
    #[error("the settings of plugin {plugin} are read-only at run time: {reason}")]
    ReadOnly {
        /// The plugin.
        plugin: String,
        /// Why, and what to do instead.
        reason: String,
    },
}

impl ConfigError {
    /// The error with the field path of [`ConfigError::Invalid`] prefixed by `prefix`
    /// (`plugins[2].config`), for a configuration found inside a larger file.
    #[must_use]
    pub fn within(self, prefix: &str) -> Self {
        match self {
            ConfigError::Invalid { path, message } => ConfigError::Invalid {
                path: crate::retry_policy::field_path(prefix, &path),
                message,
            },
            other => other,
        }
    }
}
