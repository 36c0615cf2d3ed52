//! Reading a file the user named or a config discovery found, with a bound: only regular
//! files are read (a FIFO, a device such as `/dev/zero` or a directory is refused at once,
//! without blocking), and a file over the limit is an error before its bytes are held.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The largest config file read (4 MiB): real ones are a few KiB.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The bytes of the regular file at `path`, at most `limit` of them.
///
/// Errors: the open's own (`NotFound`, `PermissionDenied`, ...); `InvalidInput` for a file
/// that is not a regular file (naming what it is); `InvalidData` for one over `limit`
/// (naming the limit), also when it grew while being read.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", kind_of(&meta)),
        ));
    }
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "larger than the {} a file may have",
            crate::units::human_size(usize::try_from(limit).unwrap_or(usize::MAX))
        ),
    )
}

/// Opened without blocking: opening a FIFO for reading waits for a writer otherwise.
fn open_nonblocking(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_directories_are_refused_at_once_and_big_files_by_size() {
        let err = read_regular(Path::new("/dev/zero"), 1024).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("character device"), "{err}");
        let dir = std::env::temp_dir().join(format!("switchboard-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = read_regular(&dir, 1024).unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would never return.
        let err = read_regular(&fifo, 1024).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        let big = dir.join("big.json");
        std::fs::write(&big, vec![b' '; 2048]).unwrap();
        let err = read_regular(&big, 1024).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("1 KiB"), "{err}");
        assert_eq!(read_regular(&big, 4096).unwrap().len(), 2048);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
