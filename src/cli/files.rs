//! Reading the files users name on the command line: only regular files, and at most
//! [`MAX_INPUT_FILE_BYTES`], so that `/dev/zero`, a FIFO or a runaway file is an error
//! instead of a read that grows without bound.

use super::CliError;
use std::io::Read;
use std::path::Path;

/// The largest input file (MLIR text, sweep JSON) the CLI reads: 256 MiB, far above any
/// StableHLO module or sweep Tessera writes (the full sweep JSON is ~120 KB).
pub const MAX_INPUT_FILE_BYTES: u64 = 256 << 20;

/// The text of `path`, which must be a regular file of at most `MAX_INPUT_FILE_BYTES`.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    read_text_limited(path, MAX_INPUT_FILE_BYTES)
}

pub fn read_text_limited(path: &Path, limit: u64) -> Result<String, CliError> {
    let shown = path.display().to_string();
    let io_err = |source: std::io::Error| CliError::Read {
        path: shown.clone(),
        source,
    };
    let bad = |why: String| CliError::Usage(format!("reading {}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "a device, FIFO or socket"
        };
        return Err(bad(format!("it is {kind}, not a regular file")));
    }
    let too_big = |size: u64| {
        bad(format!(
            "it has {size} bytes or more, over the limit of {limit} bytes for input files"
        ))
    };
    if meta.len() > limit {
        return Err(too_big(meta.len()));
    }
    // A file that grows while we read stops at the limit too.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io_err)?
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        bad(format!(
            "it is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_big_files_are_refused() {
        for (path, why) in [
            ("/dev/zero", "a device, FIFO or socket, not a regular file"),
            ("/", "a directory"),
        ] {
            let err = read_text(Path::new(path)).unwrap_err().to_string();
            assert!(err.contains(why), "{path}: {err}");
        }
        let dir = tempfile::Builder::new()
            .prefix("tessera-files-")
            .tempdir()
            .unwrap();
        let f = dir.path().join("ten.txt");
        std::fs::write(&f, "0123456789").unwrap();
        assert_eq!(read_text_limited(&f, 10).unwrap(), "0123456789");
        let err = read_text_limited(&f, 9).unwrap_err().to_string();
        assert!(err.contains("over the limit of 9 bytes"), "{err}");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        let err = read_text(&f).unwrap_err().to_string();
        assert!(err.contains("not UTF-8"), "{err}");
    }
}
