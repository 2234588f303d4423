//! Files the command line writes (session logs), written whole or not at all.
//!
//! [`write`] never writes into the file it replaces: it writes a temporary file in the same
//! directory (`.<name>.<random>.tmp`, created exclusively, so it is never anything that was there
//! before), syncs it, and renames it over the target. A rename within a directory is atomic: a
//! reader — or a crash at any moment — sees the previous file or the complete new one, never a
//! cut-off log. A crash leaves at most the temporary file behind, which nothing reads.
//!
//! A target that is a symbolic link is refused ([`OutputError::Symlink`]) rather than replaced
//! (the rename would swap the link itself for a file) or followed (in a shared directory such as
//! `/tmp`, a link planted by another user would redirect the write).
//!
//! [`private_dir`] and [`fresh_dir`] make the directories `rein demo` writes to: owner-only, and
//! never a link.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Why a file or directory could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutputError {
    /// The path is a symbolic link.
    #[error(
        "{0}: is a symbolic link; rein does not write through links it did not create (name the real path)"
    )]
    Symlink(PathBuf),
    /// The path exists and is not what is needed there.
    #[error("{path}: {what}")]
    Kind {
        /// The path.
        path: PathBuf,
        /// What it is and should not be.
        what: &'static str,
    },
    /// An I/O error on the path.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> OutputError + '_ {
    move |source| OutputError::Io { path: path.to_owned(), source }
}

/// Who may read a file [`write`] creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The owner only (`0600`).
    Private,
    /// As any file the user creates (`0666` less the umask), or the mode of the file replaced.
    Usual,
}

/// Writes `path` whole: `fill` writes the contents into a temporary file beside it, which then
/// replaces `path` in one rename. `path` must not be a symbolic link or a directory.
pub(crate) fn write(
    path: &Path,
    access: Access,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), OutputError> {
    let existing = match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(OutputError::Symlink(path.to_owned()));
        }
        Ok(meta) if meta.is_dir() => {
            return Err(OutputError::Kind { path: path.to_owned(), what: "is a directory" });
        }
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(path)(e)),
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    if let Some(mode) = creation_mode(access) {
        builder.permissions(mode);
    }
    let temp = builder.tempfile_in(dir).map_err(io_error(dir))?;
    if let (Access::Usual, Some(permissions)) = (access, existing) {
        temp.as_file().set_permissions(permissions).map_err(io_error(temp.path()))?;
    }
    {
        let mut out = BufWriter::new(temp.as_file());
        fill(&mut out).and_then(|()| out.flush()).map_err(io_error(temp.path()))?;
    }
    temp.as_file().sync_all().map_err(io_error(temp.path()))?;
    temp.persist(path).map_err(|e| io_error(path)(e.error))?;
    sync_dir(dir);
    Ok(())
}

/// The mode a new file is created with (the umask still applies).
#[cfg(unix)]
fn creation_mode(access: Access) -> Option<fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(fs::Permissions::from_mode(match access {
        Access::Private => 0o600,
        Access::Usual => 0o666,
    }))
}

#[cfg(not(unix))]
fn creation_mode(_: Access) -> Option<fs::Permissions> {
    None
}

/// Makes a rename in `dir` durable where the platform can (best effort: the file is in place).
fn sync_dir(dir: &Path) {
    if cfg!(unix)
        && let Ok(handle) = File::open(dir)
    {
        let _ = handle.sync_all();
    }
}

/// The directory `dir` for private files: created (with its missing parents) owner-only when
/// absent; refused when it is a symbolic link or not a directory.
pub(crate) fn private_dir(dir: &Path) -> Result<(), OutputError> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(OutputError::Symlink(dir.to_owned())),
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(OutputError::Kind { path: dir.to_owned(), what: "is not a directory" }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut builder = fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).map_err(io_error(dir))
        }
        Err(e) => Err(io_error(dir)(e)),
    }
}

/// A new owner-only directory `<parent>/<prefix><random>`, created exclusively (never one that
/// existed, never a link), and kept.
pub(crate) fn fresh_dir(parent: &Path, prefix: &str) -> Result<PathBuf, OutputError> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    builder.permissions(<fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o700));
    let dir = builder.tempdir_in(parent).map_err(io_error(parent))?;
    Ok(dir.keep())
}
