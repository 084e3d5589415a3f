//! The minimal runtime view (seed 002 §9): the installed files a process
//! recipe's runtime needs, proved from its ELF headers and nothing else.
//!
//! The closure of an executable is the executable, its interpreter
//! (`PT_INTERP`), every `DT_NEEDED` library resolved the way the glibc
//! loader does (`DT_RPATH` when there is no `DT_RUNPATH`, then
//! `DT_RUNPATH`, `/etc/ld.so.cache`, the default directories), and those
//! libraries' own closures; for Python also its standard library directory,
//! whose `lib-dynload` extension modules are part of the closure. Files in
//! the Nix store bring their whole store path. Every symbolic link on the
//! way to a file is recreated inside, so each name the loader opens
//! resolves as on the host.
//!
//! Nothing here runs the runtime or `ldd`. What cannot be proved (a `#!`
//! script, a missing library, a link loop, a closure past
//! [`MAX_OBJECTS`]) is an error: the Run fails closed, it never falls back
//! to the host's `/usr`.
//!
//! A closure is computed once per runtime (its canonical path and verified
//! digest) and kept in memory and, except under `strict` verification, in
//! an owner-private directory below the installation-verification cache.
//! A kept closure is used only while every file and directory it was proved
//! from has the same device, inode, size and times; otherwise it is proved
//! again.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use flow::json::Value;
use object::read::elf::{FileHeader, ProgramHeader};
use serde_json::json;

use crate::Error;

/// At most this many ELF objects in one closure: a bigger one is refused,
/// not walked.
pub const MAX_OBJECTS: usize = 512;
/// At most this many symbolic links followed while resolving one name
/// (the kernel's own bound): more is a loop.
pub const MAX_LINK_HOPS: usize = 40;
/// The largest ELF file read to find its headers.
pub const MAX_OBJECT_BYTES: u64 = 512 * 1024 * 1024;
/// Below the installation-verification cache directory.
pub const CACHE_SUBDIR: &str = "runtime-view";
/// At most this many proved views are kept on disk; keeping one more
/// removes the oldest (each `flow.bin` revision has a view of its own).
pub const MAX_KEPT_VIEWS: usize = 256;
/// The dynamic linker's cache of library locations.
pub const LD_SO_CACHE: &str = "/etc/ld.so.cache";
/// The Nix store: a file in it brings its whole store path.
const NIX_STORE: &str = "/nix/store";
/// The kept form, part of every key: change it whenever what a closure
/// includes changes, so views proved by an older jig are not used.
const FORMAT: &str = "jig-runtime-view/2";
const LD_CACHE_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
/// Libraries glibc itself opens by name, not through `DT_NEEDED`: the
/// unwinder for thread exit and cancellation (`pthread_exit` aborts
/// without it).
const LIBC_LOADS: [&str; 1] = ["libgcc_s.so.1"];

/// What a runtime's closure shows inside the envelope, read-only, each at
/// its host path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Directories shown whole (a standard library, a Nix store path).
    pub dirs: BTreeSet<PathBuf>,
    /// Single files shown (executables, libraries, the loader).
    pub files: BTreeSet<PathBuf>,
    /// Symbolic links recreated inside: (link, its target as read).
    pub links: BTreeMap<PathBuf, PathBuf>,
    /// What the closure was proved from, and how it looked then.
    observed: BTreeMap<PathBuf, Stamp>,
}

/// The identity of a file or directory a closure was proved from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    fn now(path: &Path) -> Option<Stamp> {
        std::fs::symlink_metadata(path).ok().map(|m| Stamp::of(&m))
    }
}

/// Which standard library a runtime brings beside its ELF closure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdlib {
    None,
    Python,
}

impl View {
    /// Is every file and directory this view was proved from unchanged?
    fn current(&self) -> bool {
        self.observed
            .iter()
            .all(|(path, stamp)| Stamp::now(path) == Some(*stamp))
    }

    /// How many binds and links this view adds to an envelope.
    pub fn mounts(&self) -> usize {
        self.dirs.len() + self.files.len() + self.links.len()
    }

    /// The view with `other` added.
    pub fn with(&self, other: &View) -> View {
        let mut out = self.clone();
        out.dirs.extend(other.dirs.iter().cloned());
        out.files.extend(other.files.iter().cloned());
        out.links
            .extend(other.links.iter().map(|(a, b)| (a.clone(), b.clone())));
        out.observed
            .extend(other.observed.iter().map(|(a, b)| (a.clone(), *b)));
        out.tidy();
        out
    }

    /// Drop files and links a whole directory already shows.
    fn tidy(&mut self) {
        let dirs: Vec<PathBuf> = self.dirs.iter().cloned().collect();
        let under = |p: &Path| dirs.iter().any(|d| p != d && p.starts_with(d));
        self.dirs.retain(|d| !under(d));
        self.files.retain(|f| !under(f));
        self.links.retain(|l, _| !under(l));
    }

    fn to_value(&self) -> Value {
        let text = |p: &PathBuf| p.to_string_lossy().to_string();
        json!({
            "format": FORMAT,
            "dirs": self.dirs.iter().map(text).collect::<Vec<_>>(),
            "files": self.files.iter().map(text).collect::<Vec<_>>(),
            "links": self.links.iter().map(|(l, t)| json!([text(l), text(t)])).collect::<Vec<_>>(),
            "observed": self.observed.iter().map(|(p, s)| json!({
                "path": text(p), "dev": s.dev, "ino": s.ino, "size": s.size,
                "mtime": [s.mtime.0, s.mtime.1], "ctime": [s.ctime.0, s.ctime.1],
            })).collect::<Vec<_>>(),
        })
    }

    fn from_value(value: &Value) -> Option<View> {
        if value.get("format")?.as_str()? != FORMAT {
            return None;
        }
        let paths = |key: &str| -> Option<BTreeSet<PathBuf>> {
            value
                .get(key)?
                .as_array()?
                .iter()
                .map(|p| absolute(p.as_str()?))
                .collect()
        };
        let mut links = BTreeMap::new();
        for pair in value.get("links")?.as_array()? {
            match pair.as_array()?.as_slice() {
                [link, target] => {
                    links.insert(absolute(link.as_str()?)?, PathBuf::from(target.as_str()?));
                }
                _ => return None,
            }
        }
        let mut observed = BTreeMap::new();
        for entry in value.get("observed")?.as_array()? {
            let u = |k: &str| entry.get(k).and_then(Value::as_u64);
            let pair = |k: &str| match entry.get(k)?.as_array()?.as_slice() {
                [s, n] => Some((s.as_i64()?, n.as_i64()?)),
                _ => None,
            };
            let stamp = Stamp {
                dev: u("dev")?,
                ino: u("ino")?,
                size: u("size")?,
                mtime: pair("mtime")?,
                ctime: pair("ctime")?,
            };
            observed.insert(absolute(entry.get("path")?.as_str()?)?, stamp);
        }
        Some(View {
            dirs: paths("dirs")?,
            files: paths("files")?,
            links,
            observed,
        })
    }
}

fn absolute(text: &str) -> Option<PathBuf> {
    let path = PathBuf::from(text);
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    plain.then_some(path)
}

/// How many closures this process proved from ELF headers (a kept one
/// costs none): for tests and benches.
pub fn proved() -> usize {
    PROVED.load(std::sync::atomic::Ordering::Relaxed)
}

static PROVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The closure of the installed runtime `executable` whose verified digest
/// is `digest`, with its standard library.
pub fn runtime(executable: &Path, digest: &str, stdlib: Stdlib) -> Result<Arc<View>, Error> {
    let real = std::fs::canonicalize(executable)
        .map_err(|e| Error::View(format!("{} cannot be resolved: {e}", executable.display())))?;
    let key = format!(
        "{FORMAT}\0runtime\0{}\0{digest}\0{stdlib:?}",
        real.display()
    );
    kept(&key, || {
        let mut resolver = Resolver::new(None)?;
        resolver.object(executable, &[])?;
        if stdlib == Stdlib::Python {
            resolver.python_stdlib(&real)?;
        }
        resolver.finish()
    })
}

/// The closure of an admitted native executable: `bytes` (verified, of the
/// package with `digest`) as `entry` of the package tree at `tree`, whose
/// own files are already shown and are therefore not part of the view.
pub fn native(bytes: &[u8], digest: &str, entry: &str, tree: &Path) -> Result<Arc<View>, Error> {
    let key = format!("{FORMAT}\0native\0{digest}\0{entry}\0{}", tree.display());
    kept(&key, || {
        let mut resolver = Resolver::new(Some(tree.to_path_buf()))?;
        let named = tree.join(entry);
        let elf = Elf::parse(bytes).map_err(|e| format!("{entry}: {e}"))?;
        resolver.machine = Some(elf.machine);
        resolver.walk(&named, &named, elf, &[])?;
        resolver.finish()
    })
}

/// The closure of the ELF files a package carries beside its entrypoint
/// (a prepared wheel's extension modules, a Node addon): `files` of the
/// package with `digest`, whose tree is at `tree`, for the runtime
/// executable `runtime`. Files for another machine cannot be loaded by the runtime
/// and bring nothing; `None` when the package carries no ELF file.
pub fn package(
    files: &BTreeMap<String, Vec<u8>>,
    digest: &str,
    tree: &Path,
    runtime: &Path,
) -> Result<Option<Arc<View>>, Error> {
    let objects: Vec<(&String, &Vec<u8>)> = files
        .iter()
        .filter(|(_, bytes)| bytes.starts_with(b"\x7fELF"))
        .collect();
    if objects.is_empty() {
        return Ok(None);
    }
    let machine = machine_of(runtime).map_err(Error::View)?;
    let key = format!("{FORMAT}\0package\0{digest}\0{machine}\0{}", tree.display());
    kept(&key, || {
        let mut resolver = Resolver::new(Some(tree.to_path_buf()))?;
        resolver.machine = Some(machine);
        for (path, bytes) in objects {
            let Ok(elf) = Elf::parse(bytes.as_slice()) else {
                continue;
            };
            if elf.machine != machine {
                continue;
            }
            let named = tree.join(path);
            resolver
                .walk(&named, &named, elf, &[])
                .map_err(|e| format!("{path}: {e}"))?;
        }
        resolver.finish()
    })
    .map(Some)
}

/// The ELF machine of the installed executable at `path` (its header
/// alone is read).
pub(crate) fn machine_of(path: &Path) -> Result<u16, String> {
    use std::io::Read;
    let mut head = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !head.starts_with(b"\x7fELF\x02\x01") {
        return Err(format!(
            "{} is not a 64-bit little-endian ELF file",
            path.display()
        ));
    }
    Ok(u16::from_le_bytes([head[18], head[19]]))
}

/// The view for `key`: kept (in memory or on disk) while it is current,
/// else proved by `prove` and kept.
fn kept(key: &str, prove: impl FnOnce() -> Result<View, String>) -> Result<Arc<View>, Error> {
    static MEMORY: OnceLock<Mutex<BTreeMap<String, Arc<View>>>> = OnceLock::new();
    let memory = MEMORY.get_or_init(Mutex::default);
    let held = memory
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .cloned();
    if let Some(view) = held.filter(|v| v.current()) {
        return Ok(view);
    }
    let file = cache_file(key);
    let stored = file
        .as_ref()
        .and_then(|f| read_kept(f))
        .filter(View::current);
    let view = match stored {
        Some(view) => Arc::new(view),
        None => {
            let view = prove().map_err(Error::View)?;
            PROVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(key, mounts = view.mounts(), "runtime view proved");
            // Best effort: without it the next command proves again. A
            // command that only inspects (`doctor`) keeps nothing.
            if let Some(file) = file.as_ref().filter(|_| jig_verify::current().writes()) {
                let _ = write_kept(file, &view);
            }
            Arc::new(view)
        }
    };
    memory
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key.to_string(), view.clone());
    Ok(view)
}

/// Where the view for `key` is kept: below the installation-verification
/// cache (its safe route), never under `strict`.
fn cache_file(key: &str) -> Option<PathBuf> {
    let verifier = jig_verify::current();
    if verifier.policy() == jig_verify::Policy::Strict {
        return None;
    }
    cache_file_in(
        &jig_verify::cache_dir(verifier.writes())?,
        key,
        verifier.writes(),
    )
}

fn cache_file_in(base: &Path, key: &str, create: bool) -> Option<PathBuf> {
    let dir = base.join(CACHE_SUBDIR);
    let meta = match std::fs::symlink_metadata(&dir) {
        Ok(meta) => meta,
        Err(_) if !create => return None,
        Err(_) => {
            std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
            std::fs::symlink_metadata(&dir).ok()?
        }
    };
    let private =
        meta.is_dir() && meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & 0o077 == 0;
    if !private {
        return None;
    }
    let hex = flow::digest::sha256_hex(key.as_bytes());
    Some(dir.join(format!("{hex}.json")))
}

/// The cache directory of views below an installation-verification cache
/// directory (for tests).
pub fn cache_dir_in(verification_cache: &Path) -> PathBuf {
    verification_cache.join(CACHE_SUBDIR)
}

fn read_kept(file: &Path) -> Option<View> {
    let bytes = jig_verify::read_own(file, jig_verify::MAX_CACHE_BYTES, false)?;
    View::from_value(&flow::json::parse(&bytes).ok()?)
}

/// Keep `view` in `file`, and at most [`MAX_KEPT_VIEWS`] views beside it.
fn write_kept(file: &Path, view: &View) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("/"));
    let mut temp = tempfile::Builder::new().prefix(".view-").tempfile_in(dir)?;
    temp.write_all(&flow::json::canonical(&view.to_value()))?;
    // No fsync: a torn file is invalid and only means proving again.
    temp.persist(file).map_err(|e| e.error)?;
    jig_verify::keep_newest(dir, MAX_KEPT_VIEWS, file);
    Ok(())
}

/// The headers of one ELF object that decide its closure.
struct Elf {
    machine: u16,
    interpreter: Option<PathBuf>,
    needed: Vec<String>,
    rpath: Vec<String>,
    runpath: Vec<String>,
}

impl Elf {
    /// Parse the headers of the object in `data`: its bytes, or an
    /// installed file read range by range (only the headers, the dynamic
    /// section and its strings are read: a runtime executable may be
    /// hundreds of megabytes).
    fn parse<'d, R: object::ReadRef<'d>>(data: R) -> Result<Elf, String> {
        let head = (data.read_bytes_at(0, 4))
            .or_else(|()| data.read_bytes_at(0, 2))
            .unwrap_or_default();
        if head.starts_with(b"#!") {
            return Err("is a #! script, not an ELF executable".into());
        }
        if head != b"\x7fELF" {
            return Err("is not an ELF file".into());
        }
        type Header = object::elf::FileHeader64<object::Endianness>;
        let bad = |e: object::read::Error| format!("is not a readable 64-bit ELF file ({e})");
        let header = Header::parse(data).map_err(bad)?;
        let endian = header.endian().map_err(bad)?;
        let mut interpreter = None;
        for segment in header.program_headers(endian, data).map_err(bad)? {
            if let Some(path) = segment.interpreter(endian, data).map_err(bad)? {
                interpreter = Some(PathBuf::from(String::from_utf8_lossy(path).to_string()));
            }
        }
        let sections = header.sections(endian, data).map_err(bad)?;
        let table = sections.dynamic_table(endian, data).map_err(bad)?;
        let (mut needed, mut rpath, mut runpath) = (Vec::new(), Vec::new(), Vec::new());
        for entry in &table {
            let into = match entry.tag {
                object::elf::DT_NEEDED => &mut needed,
                object::elf::DT_RPATH => &mut rpath,
                object::elf::DT_RUNPATH => &mut runpath,
                _ => continue,
            };
            let text = table.string(entry).map_err(bad)?;
            into.push(String::from_utf8_lossy(text).to_string());
        }
        let split = |list: Vec<String>| -> Vec<String> {
            list.iter()
                .flat_map(|l| l.split(':'))
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect()
        };
        Ok(Elf {
            machine: header.e_machine(endian),
            interpreter,
            needed,
            rpath: split(rpath),
            runpath: split(runpath),
        })
    }
}

/// Proves one closure.
struct Resolver {
    view: View,
    /// Objects already walked, by canonical path.
    walked: BTreeSet<PathBuf>,
    /// Library names already found (the loader reuses a loaded object of
    /// the same name): name → where.
    found: BTreeMap<String, PathBuf>,
    /// `/etc/ld.so.cache`: library name → paths, in cache order.
    cache: BTreeMap<String, Vec<PathBuf>>,
    /// The machine of the executable; libraries of another are skipped.
    machine: Option<u16>,
    /// Files below this root are already shown (the package tree).
    shown: Option<PathBuf>,
}

impl Resolver {
    fn new(shown: Option<PathBuf>) -> Result<Resolver, String> {
        let mut view = View::default();
        let cache = match std::fs::read(LD_SO_CACHE) {
            Ok(bytes) => {
                if let Some(stamp) = Stamp::now(Path::new(LD_SO_CACHE)) {
                    view.observed.insert(LD_SO_CACHE.into(), stamp);
                }
                parse_ld_cache(&bytes)
            }
            Err(_) => BTreeMap::new(),
        };
        Ok(Resolver {
            view,
            walked: BTreeSet::new(),
            found: BTreeMap::new(),
            cache,
            machine: None,
            shown,
        })
    }

    /// The closure with what glibc loads by name at run time, then tidied.
    fn finish(mut self) -> Result<View, String> {
        if self.found.contains_key("libc.so.6") {
            for name in LIBC_LOADS {
                if self.found.contains_key(name) {
                    continue;
                }
                // Optional: glibc needs it only to unwind a thread.
                if let Some(path) = self.search(name, &[], &[]) {
                    self.found.insert(name.to_string(), path.clone());
                    self.object(&path, &[])?;
                }
            }
        }
        self.view.tidy();
        Ok(self.view)
    }

    /// Resolve `name` component by component as the kernel would,
    /// recording every symbolic link met; the canonical path.
    fn name(&mut self, name: &Path) -> Result<PathBuf, String> {
        if !name.is_absolute() {
            return Err(format!("{} is not an absolute path", name.display()));
        }
        let mut pending: Vec<std::ffi::OsString> = name
            .components()
            .rev()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        let mut at = PathBuf::from("/");
        let mut hops = 0;
        while let Some(part) = pending.pop() {
            if part == ".." {
                at.pop();
                continue;
            }
            let next = at.join(&part);
            let meta = std::fs::symlink_metadata(&next)
                .map_err(|e| format!("{} is missing ({e})", next.display()))?;
            if !meta.file_type().is_symlink() {
                at = next;
                continue;
            }
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return Err(format!("{} is a symbolic link loop", name.display()));
            }
            let target = std::fs::read_link(&next)
                .map_err(|e| format!("{} cannot be read ({e})", next.display()))?;
            self.view.links.insert(next.clone(), target.clone());
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            for c in target.components().rev() {
                match c {
                    Component::Normal(n) => pending.push(n.to_os_string()),
                    Component::ParentDir => pending.push("..".into()),
                    _ => {}
                }
            }
        }
        Ok(at)
    }

    /// Show the file or directory `real` (canonical): a Nix store path
    /// whole, else exactly it.
    fn show(&mut self, real: &Path, dir: bool) {
        if self.shown.as_ref().is_some_and(|s| real.starts_with(s)) {
            return;
        }
        if let Ok(rest) = real.strip_prefix(NIX_STORE) {
            if let Some(first) = rest.components().next() {
                self.view.dirs.insert(Path::new(NIX_STORE).join(first));
                return;
            }
        }
        if dir {
            self.view.dirs.insert(real.to_path_buf());
        } else {
            self.view.files.insert(real.to_path_buf());
        }
    }

    fn observe(&mut self, real: &Path) -> Result<(), String> {
        let stamp = Stamp::now(real).ok_or_else(|| format!("{} is missing", real.display()))?;
        self.view.observed.insert(real.to_path_buf(), stamp);
        Ok(())
    }

    /// Add the object named `named` and its closure; `inherited` is the
    /// `DT_RPATH` of the objects that load it.
    fn object(&mut self, named: &Path, inherited: &[PathBuf]) -> Result<(), String> {
        let real = self.name(named)?;
        let meta = std::fs::metadata(&real).map_err(|e| format!("{}: {e}", real.display()))?;
        if !meta.is_file() || meta.len() > MAX_OBJECT_BYTES {
            return Err(format!("{} is not a regular file to load", real.display()));
        }
        let file = std::fs::File::open(&real).map_err(|e| format!("{}: {e}", real.display()))?;
        let file = object::ReadCache::new(file);
        let elf = Elf::parse(&file).map_err(|e| format!("{} {e}", named.display()))?;
        self.machine.get_or_insert(elf.machine);
        self.walk(named, &real, elf, inherited)
    }

    /// Show `real` (named `named`) and resolve what it needs.
    fn walk(
        &mut self,
        named: &Path,
        real: &Path,
        elf: Elf,
        inherited: &[PathBuf],
    ) -> Result<(), String> {
        if !self.walked.insert(real.to_path_buf()) {
            return Ok(());
        }
        if self.walked.len() > MAX_OBJECTS {
            return Err(format!("the closure has more than {MAX_OBJECTS} objects"));
        }
        if self.shown.as_ref().is_none_or(|s| !real.starts_with(s)) {
            self.observe(real)?;
        }
        self.show(real, false);
        if let Some(file) = named.file_name() {
            self.found
                .entry(file.to_string_lossy().to_string())
                .or_insert(real.to_path_buf());
        }
        if let Some(interpreter) = &elf.interpreter {
            let loader = interpreter.clone();
            self.object(&loader, &[])?;
            if let Some(file) = loader.file_name() {
                self.found
                    .insert(file.to_string_lossy().to_string(), loader.clone());
            }
        }
        let origin = real.parent().unwrap_or(Path::new("/")).to_path_buf();
        let expand = |dirs: &[String]| -> Vec<PathBuf> {
            dirs.iter()
                .map(|d| {
                    let d = d
                        .replace("${ORIGIN}", "$ORIGIN")
                        .replace("$ORIGIN", &origin.to_string_lossy())
                        .replace("${LIB}", "lib64")
                        .replace("$LIB", "lib64")
                        .replace("${PLATFORM}", std::env::consts::ARCH)
                        .replace("$PLATFORM", std::env::consts::ARCH);
                    PathBuf::from(d)
                })
                .collect()
        };
        // DT_RPATH counts only without DT_RUNPATH, and passes to what this
        // object loads; DT_RUNPATH is this object's alone.
        let mut rpath: Vec<PathBuf> = Vec::new();
        if elf.runpath.is_empty() {
            rpath.extend(expand(&elf.rpath));
            rpath.extend(inherited.iter().cloned());
        }
        let runpath = expand(&elf.runpath);
        for name in &elf.needed {
            if self.found.contains_key(name) {
                continue;
            }
            let path = if name.contains('/') {
                PathBuf::from(name)
            } else {
                self.search(name, &rpath, &runpath).ok_or_else(|| {
                    format!("{} needs {name}, which is not installed", named.display())
                })?
            };
            self.found.insert(name.clone(), path.clone());
            self.object(&path, &rpath)?;
        }
        Ok(())
    }

    /// Where the loader finds library `name`: the first loadable file of
    /// the object's machine.
    fn search(&mut self, name: &str, rpath: &[PathBuf], runpath: &[PathBuf]) -> Option<PathBuf> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        candidates.extend(rpath.iter().map(|d| d.join(name)));
        candidates.extend(runpath.iter().map(|d| d.join(name)));
        candidates.extend(self.cache.get(name).cloned().unwrap_or_default());
        for dir in default_dirs() {
            candidates.push(Path::new(&dir).join(name));
        }
        candidates.into_iter().find(|c| self.loadable(c))
    }

    fn loadable(&self, path: &Path) -> bool {
        let Ok(mut file) = std::fs::File::open(path) else {
            return false;
        };
        let mut head = [0u8; 64];
        if std::io::Read::read_exact(&mut file, &mut head).is_err() {
            return false;
        }
        // ELFCLASS64, then e_machine at offset 18 (little-endian hosts).
        let machine = u16::from_le_bytes([head[18], head[19]]);
        head.starts_with(b"\x7fELF\x02") && self.machine.is_none_or(|m| m == machine)
    }

    /// Python's standard library: `<prefix>/lib*/pythonX.Y` beside the
    /// executable's `bin/`, shown whole, with its extension modules'
    /// closures.
    fn python_stdlib(&mut self, real: &Path) -> Result<(), String> {
        let version = real
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("python"))
            .filter(|v| v.contains('.'))
            .map(str::to_string);
        let prefix = real
            .parent()
            .and_then(Path::parent)
            .ok_or("the runtime has no install prefix")?;
        let mut libraries = Vec::new();
        for lib in ["lib", "lib64"] {
            let dir = prefix.join(lib);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                let wanted = match &version {
                    Some(v) => name == format!("python{v}"),
                    None => name.starts_with("python3."),
                };
                if wanted && entry.path().is_dir() {
                    libraries.push(entry.path());
                }
            }
        }
        let landmark = libraries.iter().any(|d| d.join("os.py").is_file());
        if !landmark || (version.is_none() && libraries.len() > 1) {
            return Err(format!(
                "the standard library of {} is not found below {}",
                real.display(),
                prefix.display()
            ));
        }
        for dir in libraries {
            let real_dir = self.name(&dir)?;
            self.observe(&real_dir)?;
            self.show(&real_dir, true);
            let dynload = real_dir.join("lib-dynload");
            let Ok(entries) = std::fs::read_dir(&dynload) else {
                continue;
            };
            self.observe(&dynload)?;
            let mut modules: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "so"))
                .collect();
            modules.sort();
            for module in modules {
                self.object(&module, &[])?;
            }
        }
        Ok(())
    }
}

/// The loader's default directories after the cache (multiarch first, as
/// Debian's loader searches them).
fn default_dirs() -> Vec<String> {
    let triplet = format!("{}-linux-gnu", std::env::consts::ARCH);
    vec![
        format!("/lib/{triplet}"),
        format!("/usr/lib/{triplet}"),
        "/lib64".into(),
        "/usr/lib64".into(),
        "/lib".into(),
        "/usr/lib".into(),
    ]
}

/// `/etc/ld.so.cache` (the `glibc-ld.so.cache1.1` format, alone or after
/// the old one): library name → paths in cache order. An unreadable cache
/// is empty: the default directories still apply.
fn parse_ld_cache(bytes: &[u8]) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let Some(start) = bytes
        .windows(LD_CACHE_MAGIC.len())
        .position(|w| w == LD_CACHE_MAGIC)
    else {
        return out;
    };
    let base = &bytes[start..];
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(base.get(at..at + 4)?.try_into().ok()?))
    };
    // magic+version (20), nlibs, len_strings, flags+pad (4), extension
    // offset, three unused words: 48 bytes; then 24-byte entries.
    let Some(count) = u32_at(20) else {
        return out;
    };
    let string = |at: u32| -> Option<String> {
        let rest = base.get(at as usize..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).to_string())
    };
    for n in 0..count as usize {
        let entry = 48 + n * 24;
        let (Some(key), Some(value)) = (u32_at(entry + 4), u32_at(entry + 8)) else {
            break;
        };
        if let (Some(name), Some(path)) = (string(key), string(value)) {
            out.entry(name).or_default().push(PathBuf::from(path));
        }
    }
    out
}

#[cfg(test)]
mod tests;
