use super::*;

fn prove(exe: &Path, stdlib: Stdlib) -> Result<View, String> {
    let mut resolver = Resolver::new(None)?;
    resolver.object(exe, &[])?;
    if stdlib == Stdlib::Python {
        resolver.python_stdlib(&exe.canonicalize().unwrap())?;
    }
    resolver.finish()
}

fn shows(view: &View, path: &Path) -> bool {
    view.files.contains(path) || view.dirs.iter().any(|d| path.starts_with(d))
}

/// The real Python of this machine: its interpreter, libc, the
/// standard library with lib-dynload and the libraries of its
/// extension modules (ssl's libssl), and nothing else of /usr/bin.
#[test]
fn the_closure_of_this_machines_python() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("\n*** SKIPPED: no /usr/bin/python3 ***\n");
        return;
    }
    let view = prove(python, Stdlib::Python).unwrap();
    let real = python.canonicalize().unwrap();
    assert!(shows(&view, &real), "{view:?}");
    let elf = Elf::parse(std::fs::read(&real).unwrap().as_slice()).unwrap();
    let loader = elf.interpreter.unwrap();
    assert!(shows(&view, &loader.canonicalize().unwrap()), "{view:?}");
    let libc = view
        .files
        .iter()
        .chain(view.dirs.iter())
        .any(|f| f.to_string_lossy().contains("libc.so.6"));
    assert!(libc || view.dirs.iter().any(|d| d.starts_with(NIX_STORE)));
    let stdlib = view
        .dirs
        .iter()
        .find(|d| d.join("os.py").is_file())
        .expect("the standard library is shown whole");
    let ssl = std::fs::read_dir(stdlib.join("lib-dynload"))
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("_ssl"));
    if ssl && !real.starts_with(NIX_STORE) {
        assert!(
            view.files
                .iter()
                .any(|f| f.to_string_lossy().contains("libssl")),
            "{view:?}"
        );
    }
    // Each link the loader follows is recreated: python3 → python3.11.
    if python.symlink_metadata().unwrap().file_type().is_symlink() {
        assert!(view.links.contains_key(python), "{view:?}");
    }
    for tool in ["/usr/bin/env", "/usr/bin/bwrap", "/usr/share"] {
        assert!(!shows(&view, Path::new(tool)), "{tool} in {view:?}");
    }
    assert!(!view.dirs.contains(Path::new("/usr")));
    // The kept form reads back the same.
    let back = View::from_value(&view.to_value()).unwrap();
    assert_eq!(back, view);
    assert!(back.current());
}

/// A library that is nowhere: the closure is refused with its name.
#[test]
fn a_missing_library_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Any real dynamic executable, with one needed name bent into a
    // library that does not exist (same length, so offsets hold).
    let source = std::fs::read("/usr/bin/env").unwrap();
    let needle = b"libc.so.6\0";
    let at = source
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("env needs libc.so.6");
    let mut bent = source.clone();
    bent[at..at + needle.len()].copy_from_slice(b"libq.so.9\0");
    let exe = dir.path().join("bent");
    std::fs::write(&exe, &bent).unwrap();
    let err = prove(&exe, Stdlib::None).unwrap_err();
    assert!(err.contains("libq.so.9"), "{err}");
    // The same file unbent is provable.
    std::fs::write(&exe, &source).unwrap();
    prove(&exe, Stdlib::None).unwrap();
}

#[test]
fn a_script_and_a_link_loop_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    assert!(prove(&script, Stdlib::None).unwrap_err().contains("#!"));
    // Shorter than an ELF magic number, and still a script.
    std::fs::write(&script, "#!").unwrap();
    assert!(prove(&script, Stdlib::None).unwrap_err().contains("#!"));
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    assert!(prove(&a, Stdlib::None).unwrap_err().contains("loop"));
}

/// A chain of exactly [`MAX_LINK_HOPS`] links resolves; one more link is
/// taken for a loop.
#[test]
fn the_link_hop_bound_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let exe = base.join("env");
    std::fs::copy("/usr/bin/env", &exe).unwrap();
    let mut last = exe.clone();
    for n in 1..=MAX_LINK_HOPS + 1 {
        let link = base.join(format!("l{n}"));
        std::os::unix::fs::symlink(&last, &link).unwrap();
        last = link;
    }
    let at_bound = base.join(format!("l{MAX_LINK_HOPS}"));
    assert_eq!(Resolver::new(None).unwrap().name(&at_bound).unwrap(), exe);
    let past = Resolver::new(None).unwrap().name(&last).unwrap_err();
    assert!(past.contains("loop"), "{past}");
}

/// A view is current only while what it was proved from is unchanged.
#[test]
fn at_most_max_kept_views_are_kept() {
    let view = prove(Path::new("/usr/bin/env"), Stdlib::None).unwrap();
    let kept_with = |others: usize| {
        let dir = tempfile::tempdir().unwrap();
        let start = std::time::SystemTime::now() - std::time::Duration::from_secs(100_000);
        for i in 0..others {
            let path = dir.path().join(format!("{i:05}.json"));
            std::fs::write(&path, b"{}").unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(start + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        write_kept(&dir.path().join("new.json"), &view).unwrap();
        let count = std::fs::read_dir(dir.path()).unwrap().count();
        (dir, count)
    };
    // At the bound, the one kept included: nothing goes.
    let (_dir, count) = kept_with(MAX_KEPT_VIEWS - 1);
    assert_eq!(count, MAX_KEPT_VIEWS);
    // One past it: the oldest goes, the new one stays.
    let (dir, count) = kept_with(MAX_KEPT_VIEWS);
    assert_eq!(count, MAX_KEPT_VIEWS);
    assert!(!dir.path().join("00000.json").exists());
    assert!(read_kept(&dir.path().join("new.json")).is_some());
}

#[test]
fn a_changed_file_makes_a_view_stale() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("env");
    std::fs::copy("/usr/bin/env", &exe).unwrap();
    let view = prove(&exe, Stdlib::None).unwrap();
    assert!(view.current());
    std::fs::write(&exe, std::fs::read("/usr/bin/env").unwrap()).unwrap();
    let f = std::fs::OpenOptions::new().append(true).open(&exe).unwrap();
    f.set_len(f.metadata().unwrap().len() + 1).unwrap();
    assert!(!view.current());
}

/// On NixOS a file in the store brings its whole store path, once;
/// what a shown package tree holds brings nothing.
#[test]
fn a_store_file_brings_its_store_path_and_a_package_file_nothing() {
    let mut resolver = Resolver::new(Some("/p/tree".into())).unwrap();
    resolver.show(Path::new("/nix/store/abc-glibc-2.40/lib/libc.so.6"), false);
    resolver.show(Path::new("/nix/store/abc-glibc-2.40/lib/libm.so.6"), false);
    resolver.show(
        Path::new("/nix/store/def-python3-3.12/lib/python3.12"),
        true,
    );
    resolver.show(Path::new("/p/tree/lib/own.so"), false);
    let view = resolver.finish().unwrap();
    let dirs: Vec<&Path> = view.dirs.iter().map(PathBuf::as_path).collect();
    assert_eq!(
        dirs,
        [
            Path::new("/nix/store/abc-glibc-2.40"),
            Path::new("/nix/store/def-python3-3.12")
        ]
    );
    assert!(view.files.is_empty(), "{view:?}");
}

#[test]
fn the_object_bound_is_enforced() {
    let env = Path::new("/usr/bin/env");
    // How many objects env's own closure has (env, libc, the loader…).
    let mut alone = Resolver::new(None).unwrap();
    alone.object(env, &[]).unwrap();
    let own = alone.walked.len();
    // Others walked first, so the closure ends exactly at the bound,
    // then one past it.
    let filled = |others: usize| {
        let mut resolver = Resolver::new(None).unwrap();
        for n in 0..others {
            resolver.walked.insert(PathBuf::from(format!("/x/{n}")));
        }
        resolver.object(env, &[])
    };
    filled(MAX_OBJECTS - own).unwrap();
    let err = filled(MAX_OBJECTS - own + 1).unwrap_err();
    assert!(err.contains(&MAX_OBJECTS.to_string()), "{err}");
}

/// An installed object is read by its headers, its dynamic section and
/// their strings, never whole (Bun's executable is over 100 MB): the
/// same headers as from its bytes, from a small part of the file.
#[test]
fn an_installed_object_is_read_by_its_headers_alone() {
    struct Counted(std::fs::File, std::rc::Rc<std::cell::Cell<u64>>);
    impl std::io::Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.set(self.1.get() + n as u64);
            Ok(n)
        }
    }
    impl std::io::Seek for Counted {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.0.seek(to)
        }
    }
    let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
    let whole = std::fs::read(&exe).unwrap();
    let from_bytes = Elf::parse(whole.as_slice()).unwrap();
    let read = std::rc::Rc::new(std::cell::Cell::new(0));
    let file = object::ReadCache::new(Counted(std::fs::File::open(&exe).unwrap(), read.clone()));
    let from_file = Elf::parse(&file).unwrap();
    assert_eq!(from_file.machine, from_bytes.machine);
    assert_eq!(from_file.interpreter, from_bytes.interpreter);
    assert_eq!(from_file.needed, from_bytes.needed);
    assert!(!from_file.needed.is_empty(), "{:?}", from_file.needed);
    assert_eq!(from_file.rpath, from_bytes.rpath);
    assert_eq!(from_file.runpath, from_bytes.runpath);
    let size = whole.len() as u64;
    assert!(
        read.get() * 20 < size,
        "{} of {size} bytes read to parse the headers",
        read.get()
    );
}
