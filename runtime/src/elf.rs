//! Checking a plugin file before `dlopen` maps it: a truncated or foreign shared library
//! crashes the loader (SIGBUS when it touches pages past the end of a truncated file), so
//! the header, the segments and the section table must fit in the file, and the file must be
//! a shared object for this machine. Also reads the exported symbols, which tell libtpu
//! apart from the other PJRT plugins without loading it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const ELFDATA2MSB: u8 = 2;
const ET_DYN: u16 = 3;
const PT_LOAD: u32 = 1;
const SHT_DYNSYM: u32 = 11;
const SHN_UNDEF: u16 = 0;
/// The largest `.dynsym` + `.dynstr` we read (libtpu's are ~30 KB): a bound, so a corrupt
/// header cannot make us allocate gigabytes.
const MAX_SYMBOL_TABLE_BYTES: u64 = 64 << 20;

#[cfg(target_arch = "x86_64")]
const HOST_MACHINE: (u16, &str) = (62, "x86-64");
#[cfg(target_arch = "aarch64")]
const HOST_MACHINE: (u16, &str) = (183, "aarch64");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const HOST_MACHINE: (u16, &str) = (0, "this machine");

/// What the checks learned about a valid shared object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedObject {
    /// Names of the defined dynamic symbols (empty when the file has no section table).
    pub exports: Vec<String>,
}

impl SharedObject {
    /// libtpu exports TPU runtime entry points besides `GetPjrtApi`.
    pub fn is_libtpu(&self) -> bool {
        self.exports
            .iter()
            .any(|s| s == "GetLibtpuSdkApi" || s.starts_with("TfTpu_"))
    }
}

/// Little- or big-endian field reads of one file.
struct Reader {
    file: File,
    little: bool,
}

impl Reader {
    fn read_at(&mut self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.seek(SeekFrom::Start(offset))?;
        self.file.read_exact(&mut buf)?;
        Ok(buf)
    }
    fn u16(&self, b: &[u8], at: usize) -> u16 {
        let v = [b[at], b[at + 1]];
        if self.little {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        }
    }
    fn u32(&self, b: &[u8], at: usize) -> u32 {
        let v = b[at..at + 4].try_into().expect("4 bytes");
        if self.little {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    }
    fn u64(&self, b: &[u8], at: usize) -> u64 {
        let v = b[at..at + 8].try_into().expect("8 bytes");
        if self.little {
            u64::from_le_bytes(v)
        } else {
            u64::from_be_bytes(v)
        }
    }
}

/// `offset + count * entry <= size`, without overflow.
fn fits(offset: u64, count: u64, entry: u64, size: u64) -> bool {
    count
        .checked_mul(entry)
        .and_then(|n| n.checked_add(offset))
        .is_some_and(|end| end <= size)
}

/// Checks that `path` is a whole 64-bit shared object for this machine; `Err` says why not.
pub(crate) fn check_shared_object(path: &Path) -> Result<SharedObject, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    let size = meta.len();
    let file = File::open(path).map_err(|e| format!("cannot open it: {e}"))?;
    let mut r = Reader { file, little: true };
    if size < 64 {
        return Err(format!(
            "not an ELF shared library ({size} bytes, shorter than an ELF header)"
        ));
    }
    let h = r
        .read_at(0, 64)
        .map_err(|e| format!("reading its header: {e}"))?;
    if h[0..4] != ELF_MAGIC {
        return Err("not an ELF shared library (no ELF magic number)".into());
    }
    if h[4] != ELFCLASS64 {
        return Err(format!(
            "a {}-bit ELF file; this process is 64-bit",
            if h[4] == 1 { 32 } else { 0 }
        ));
    }
    r.little = match h[5] {
        ELFDATA2LSB => true,
        ELFDATA2MSB => false,
        other => return Err(format!("ELF byte order {other} is invalid")),
    };
    if r.little != cfg!(target_endian = "little") {
        return Err("an ELF file of the other byte order than this machine".into());
    }
    let e_type = r.u16(&h, 16);
    if e_type != ET_DYN {
        return Err(format!(
            "an ELF file of type {e_type}, not a shared library (type {ET_DYN})"
        ));
    }
    let machine = r.u16(&h, 18);
    if HOST_MACHINE.0 != 0 && machine != HOST_MACHINE.0 {
        return Err(format!(
            "built for ELF machine {machine}, not for {} ({})",
            HOST_MACHINE.1, HOST_MACHINE.0
        ));
    }
    let (phoff, shoff) = (r.u64(&h, 32), r.u64(&h, 40));
    let (phentsize, phnum) = (r.u16(&h, 54) as u64, r.u16(&h, 56) as u64);
    let (shentsize, shnum) = (r.u16(&h, 58) as u64, r.u16(&h, 60) as u64);
    let truncated = |what: &str| {
        format!("the file is truncated or corrupt: its {what} lies past its end ({size} bytes)")
    };
    if phnum == 0 || phentsize < 56 || !fits(phoff, phnum, phentsize, size) {
        return Err(truncated("program header table"));
    }
    let ph = r
        .read_at(phoff, (phnum * phentsize) as usize)
        .map_err(|e| format!("reading its program headers: {e}"))?;
    for i in 0..phnum as usize {
        let p = &ph[i * phentsize as usize..];
        if r.u32(p, 0) == PT_LOAD && !fits(r.u64(p, 8), 1, r.u64(p, 32), size) {
            return Err(truncated(&format!("loadable segment {i}")));
        }
    }
    if shoff == 0 || shnum == 0 {
        // A stripped section table is legal; the loader only needs the segments.
        return Ok(SharedObject {
            exports: Vec::new(),
        });
    }
    if shentsize < 64 || !fits(shoff, shnum, shentsize, size) {
        return Err(truncated("section header table"));
    }
    let sh = r
        .read_at(shoff, (shnum * shentsize) as usize)
        .map_err(|e| format!("reading its section headers: {e}"))?;
    let section = |i: usize| &sh[i * shentsize as usize..(i + 1) * shentsize as usize];
    let mut exports = Vec::new();
    for i in 0..shnum as usize {
        let s = section(i);
        if r.u32(s, 4) != SHT_DYNSYM {
            continue;
        }
        let (sym_off, sym_size, sym_ent) = (r.u64(s, 24), r.u64(s, 32), r.u64(s, 56));
        let link = r.u32(s, 40) as usize;
        if link >= shnum as usize || sym_ent < 24 {
            return Err(truncated("dynamic symbol table"));
        }
        let strtab = section(link);
        let (str_off, str_size) = (r.u64(strtab, 24), r.u64(strtab, 32));
        if !fits(sym_off, 1, sym_size, size) || !fits(str_off, 1, str_size, size) {
            return Err(truncated("dynamic symbol table"));
        }
        if sym_size + str_size > MAX_SYMBOL_TABLE_BYTES {
            return Err(format!(
                "its dynamic symbol table ({} bytes) is implausibly large",
                sym_size + str_size
            ));
        }
        let syms = r
            .read_at(sym_off, sym_size as usize)
            .map_err(|e| format!("reading its symbols: {e}"))?;
        let strs = r
            .read_at(str_off, str_size as usize)
            .map_err(|e| format!("reading its symbol names: {e}"))?;
        for sym in syms.chunks_exact(sym_ent as usize) {
            let (name, shndx) = (r.u32(sym, 0) as usize, r.u16(sym, 6));
            if shndx == SHN_UNDEF || name == 0 || name >= strs.len() {
                continue;
            }
            let end = strs[name..]
                .iter()
                .position(|&c| c == 0)
                .map_or(strs.len(), |n| name + n);
            exports.push(String::from_utf8_lossy(&strs[name..end]).into_owned());
        }
    }
    Ok(SharedObject { exports })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libm() -> &'static Path {
        [
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/usr/lib/x86_64-linux-gnu/libm.so.6",
            "/lib/aarch64-linux-gnu/libm.so.6",
            "/lib64/libm.so.6",
        ]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("libm present")
    }

    /// `bytes` in a file named `name` in a new temporary directory, removed when the
    /// returned [`tempfile::TempDir`] is dropped.
    fn temp(name: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix("tessera-elf-")
            .tempdir()
            .unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        (dir, p)
    }

    #[test]
    fn a_real_shared_library_passes_and_lists_its_exports() {
        let so = check_shared_object(libm()).unwrap();
        assert!(so.exports.iter().any(|s| s == "cos"), "{:?}", so.exports);
        assert!(!so.is_libtpu());
    }

    #[test]
    fn truncated_or_foreign_files_are_refused_with_the_reason() {
        let whole = std::fs::read(libm()).unwrap();
        for (name, bytes, want) in [
            (
                "text.so",
                [b"not an ELF file; ".as_slice(); 8].concat(),
                "no ELF magic",
            ),
            (
                "short.so",
                whole[..40].to_vec(),
                "shorter than an ELF header",
            ),
            ("half.so", whole[..whole.len() / 2].to_vec(), "truncated"),
            ("head.so", whole[..4096].to_vec(), "truncated"),
        ] {
            let err = check_shared_object(&temp(name, &bytes).1).unwrap_err();
            assert!(err.contains(want), "{name}: {err}");
        }
        let mut exe = whole.clone();
        exe[16] = 2; // ET_EXEC
        let err = check_shared_object(&temp("exec.so", &exe).1).unwrap_err();
        assert!(err.contains("not a shared library"), "{err}");
        let mut arm = whole.clone();
        arm[18] = 40; // EM_ARM
        arm[19] = 0;
        let err = check_shared_object(&temp("arm.so", &arm).1).unwrap_err();
        assert!(err.contains("built for ELF machine 40"), "{err}");
        let err = check_shared_object(Path::new("/dev/zero")).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
