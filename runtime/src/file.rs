//! Opening the files rein reads and writes: regular files only, read within a limit.
//!
//! A path can name anything. A FIFO blocks `open` until a writer comes, and its reads may never
//! end; a device such as `/dev/zero` reads zeros forever; a directory is not a file. A reader that
//! meets one hangs, spins or allocates until the machine gives up — and a process stuck in a
//! blocking `open` does not even get to handle Ctrl-C. So every file a store, a tool over logs or
//! the CLI opens goes through [`open`]:
//!
//! - **non-blocking** (`O_NONBLOCK` on Unix): opening a FIFO returns at once instead of waiting
//!   for a writer. The flag changes nothing for a regular file.
//! - **its type checked on the open handle** (`fstat`, not the path, so nothing can be swapped in
//!   between): anything but a regular file is refused with an error of kind
//!   [`io::ErrorKind::InvalidInput`] saying what it is ("not a regular file: a FIFO"). A symbolic
//!   link to a regular file is followed, like any link.
//!
//! [`read_to_string`] and [`within`] add a limit on the length: a file longer than its reader's
//! limit is refused ([`io::ErrorKind::FileTooLarge`], naming both lengths) before a byte of it is
//! read, and a reader reads at most the length the file had when it was opened, so a file that
//! keeps growing under it cannot keep it reading. The limits are the readers' own (a session log:
//! `store::MAX_LOG_BYTES`; a scenario file: the CLI's).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Opens `path` with `options`, refusing (and closing again) anything but a regular file. On
/// Unix the open never blocks (see the module docs).
pub fn open(path: &Path, options: &OpenOptions) -> io::Result<File> {
    let mut options = options.clone();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        // Opening a FIFO for writing with no reader, or a directory for writing, fails: say why.
        Err(e) => match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => return Err(not_regular(&meta.file_type())),
            _ => return Err(e),
        },
    };
    let kind = file.metadata()?.file_type();
    if kind.is_file() { Ok(file) } else { Err(not_regular(&kind)) }
}

/// Opens `path` for reading (see [`open`]).
pub fn open_read(path: &Path) -> io::Result<File> {
    open(path, OpenOptions::new().read(true))
}

/// The length of `file` when it is at most `max` bytes; otherwise an error of kind
/// [`io::ErrorKind::FileTooLarge`] naming both lengths.
pub fn within(file: &File, max: u64) -> io::Result<u64> {
    let len = file.metadata()?.len();
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("the file is {len} bytes, over the limit of {}", size(max)),
        ));
    }
    Ok(len)
}

/// The text of the regular file at `path`, at most `max` bytes long (see [`within`]).
pub fn read_to_string(path: &Path, max: u64) -> io::Result<String> {
    let file = open_read(path)?;
    let len = within(&file, max)?;
    let mut text = String::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_string(&mut text)?;
    Ok(text)
}

/// `64 MiB`, `4 GiB`: a limit as a person reads it.
pub fn size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}

/// The error for a file that is not a regular file, saying what it is.
fn not_regular(kind: &std::fs::FileType) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("not a regular file: {}", describe(kind)))
}

/// What a file that is not a regular file is.
fn describe(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() { "a directory" } else { "not a file" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn only_regular_files_open_and_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let regular = dir.path().join("log.jsonl");
        std::fs::write(&regular, "x\n").unwrap();
        assert!(open_read(&regular).is_ok());
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&regular, &link).unwrap();
        assert!(open_read(&link).is_ok(), "a link to a regular file is followed");

        let fifo = dir.path().join("fifo.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let zero = dir.path().join("zero.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let cases = [
            (&fifo, "not a regular file: a FIFO"),
            (&zero, "not a regular file: a character device"),
            (&dir.path().to_path_buf(), "not a regular file: a directory"),
        ];
        for (path, want) in cases {
            let err = open_read(path).unwrap_err();
            assert_eq!((err.kind(), err.to_string()), (io::ErrorKind::InvalidInput, want.into()));
            let append = open(path, OpenOptions::new().append(true)).unwrap_err();
            assert_eq!(append.to_string(), want, "{}", path.display());
        }
    }

    #[test]
    fn a_file_over_its_limit_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scenario.json");
        std::fs::write(&path, "0123456789").unwrap();
        assert_eq!(read_to_string(&path, 10).unwrap(), "0123456789");
        let err = read_to_string(&path, 9).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "the file is 10 bytes, over the limit of 9 bytes");
    }

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        let cases = [(0, "0 bytes"), (1000, "1000 bytes"), (1 << 20, "1 MiB"), (4 << 30, "4 GiB")];
        for (bytes, want) in cases {
            assert_eq!(size(bytes), want);
        }
        assert_eq!(size(16 << 10), "16 KiB");
    }
}
