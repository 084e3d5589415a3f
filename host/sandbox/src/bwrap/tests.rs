use super::*;
use std::time::Duration;

/// A Bubblewrap with `bwrap` whose cgroups are never made (a v2 base
/// that does not exist): for the arguments it builds.
fn unplaced(bwrap: PathBuf) -> Bubblewrap {
    Bubblewrap {
        bwrap,
        hierarchy: Hierarchy::new(super::super::cgroup::Layout::V2 {
            base: "/nonexistent".into(),
        }),
        host: Arc::default(),
        counter: AtomicU64::new(0),
    }
}

/// A daemon's Bubblewrap whose v2 cgroups are recorded, not made.
fn recorded(sys: &Arc<crate::syscall::recording::Recording>) -> Bubblewrap {
    let files = [
        "cgroup.procs",
        "cgroup.events",
        "cgroup.kill",
        "cgroup.subtree_control",
    ];
    sys.dir("/cg/jig.slice")
        .makes("/cg/jig.slice", &files)
        .makes("/cg/jig.slice", &["memory.max", "pids.max", "cpu.max"]);
    Bubblewrap {
        bwrap: "/usr/bin/bwrap".into(),
        hierarchy: Hierarchy::with_syscall(
            super::super::cgroup::Layout::V2 {
                base: "/cg/jig.slice".into(),
            },
            sys.clone(),
        ),
        host: Arc::default(),
        counter: AtomicU64::new(0),
    }
}

#[test]
fn a_daemon_makes_the_next_group_ahead_until_it_lets_go() {
    let sys = Arc::new(crate::syscall::recording::Recording::new());
    let bw = recorded(&sys);
    let host = format!("/cg/jig.slice/{}", Bubblewrap::host_group_name());
    bw.keep_between_runs(true);
    bw.prepare(Limits::FLOW);
    assert!(sys.has_dir(format!("{host}/run-0")), "{:?}", sys.calls());
    // A second prepare while one waits makes no other.
    bw.prepare(Limits::FLOW);
    assert!(!sys.has_dir(format!("{host}/run-1")));
    // Letting go removes the waiting group and the host group, and
    // nothing is made ahead after it.
    bw.keep_between_runs(false);
    assert!(!sys.has_dir(format!("{host}/run-0")));
    assert!(!sys.has_dir(&host));
    bw.prepare(Limits::FLOW);
    assert!(!sys.has_dir(&host), "{:?}", sys.calls());
}

fn launch() -> Launch {
    Launch {
        program: "/usr/bin/python3".into(),
        args: vec!["/p/pkg/flow.py".into()],
        env: vec![("LANG".into(), "C.UTF-8".into())],
        cwd: "/p/scratch".into(),
        package: "/p/pkg".into(),
        scratch: "/p/scratch".into(),
        scratch_bytes: Some(1 << 20),
        read_only: vec!["/p/sdk".into()],
        shown: Vec::new(),
        attachments: vec![("/a/in".into(), false), ("/a/out".into(), true)],
        limits: Limits::FLOW,
        network: false,
        view: None,
    }
}

/// `b`'s bubblewrap arguments for `launch`, as strings.
fn strings(b: &Bubblewrap, launch: &Launch) -> Vec<String> {
    b.arguments(launch)
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect()
}

fn after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    args.windows(3)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].as_str())
        .collect()
}

/// A Flow's scratch and /tmp are each a fresh tmpfs of the configured
/// size, never the host directory; a launch whose scratch the host reads
/// back (preparation) binds the host directory and leaves /tmp unsized.
#[test]
fn a_flows_scratch_and_tmp_are_bounded_tmpfs() {
    let b = unplaced(PathBuf::from("/usr/bin/bwrap"));
    let args: Vec<String> = b
        .arguments(&launch())
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    let sized: Vec<(&str, &str)> = args
        .windows(4)
        .filter(|w| w[0] == "--size" && w[2] == "--tmpfs")
        .map(|w| (w[1].as_str(), w[3].as_str()))
        .collect();
    assert!(sized.contains(&("1048576", "/p/scratch")), "{args:?}");
    assert!(sized.contains(&("1048576", "/tmp")), "{args:?}");
    assert!(after(&args, "--bind").is_empty(), "{args:?}");

    let kept = Launch {
        scratch_bytes: None,
        ..launch()
    };
    let args = strings(&b, &kept);
    assert_eq!(after(&args, "--bind"), ["/p/scratch"], "{args:?}");
    let sized: Vec<(&str, &str)> = args
        .windows(4)
        .filter(|w| w[0] == "--size" && w[2] == "--tmpfs")
        .map(|w| (w[1].as_str(), w[3].as_str()))
        .collect();
    let output = OUTPUT_TMPFS_BYTES.to_string();
    assert_eq!(sized, [(output.as_str(), "/a/out")], "{args:?}");
}

/// A shared tree shown at the package's path is the package: the
/// package path itself is not bound, the tree is, read-only, there.
#[test]
fn a_tree_shown_at_the_package_replaces_its_bind() {
    let b = unplaced(PathBuf::from("/usr/bin/bwrap"));
    let mut launch = launch();
    launch.shown = vec![
        ("/s/trees/abc".into(), "/p/pkg".into()),
        ("/s/support/py".into(), "/p/python".into()),
    ];
    let args = strings(&b, &launch);
    let binds: Vec<(&str, &str)> = args
        .windows(3)
        .filter(|w| w[0] == "--ro-bind")
        .map(|w| (w[1].as_str(), w[2].as_str()))
        .collect();
    assert!(binds.contains(&("/s/trees/abc", "/p/pkg")), "{binds:?}");
    assert!(binds.contains(&("/s/support/py", "/p/python")), "{binds:?}");
    assert!(!binds.contains(&("/p/pkg", "/p/pkg")), "{binds:?}");
    assert!(b.shows_elsewhere());
}

/// With a runtime view, the host's /usr and its top-level links are
/// not shown: only the view's files, directories and links.
#[test]
fn a_runtime_view_replaces_usr() {
    let b = unplaced(PathBuf::from("/usr/bin/bwrap"));
    let mut launch = launch();
    let mut view = super::super::closure::View::default();
    view.files.insert("/usr/bin/python3.11".into());
    view.dirs.insert("/usr/lib/python3.11".into());
    view.links
        .insert("/usr/bin/python3".into(), "python3.11".into());
    launch.view = Some(Arc::new(view));
    let args = strings(&b, &launch);
    let ro = after(&args, "--ro-bind");
    assert!(!ro.contains(&"/usr"), "{args:?}");
    assert!(ro.contains(&"/usr/bin/python3.11") && ro.contains(&"/usr/lib/python3.11"));
    assert_eq!(after(&args, "--symlink")[4..], ["python3.11"], "{args:?}");
    assert!(!args.iter().any(|a| a == "/lib64"), "{args:?}");
}

#[test]
fn arguments_grant_exactly_the_launch() {
    let b = unplaced(PathBuf::from("/usr/bin/bwrap"));
    let args: Vec<String> = b
        .arguments(&launch())
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    for flag in [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} in {args:?}");
    }
    assert!(!args.iter().any(|a| a == "--share-net"));
    let ro = after(&args, "--ro-bind");
    assert!(ro.contains(&"/p/pkg") && ro.contains(&"/p/sdk") && ro.contains(&"/a/in"));
    assert!(ro.contains(&"/usr"));
    assert!(!ro
        .iter()
        .any(|p| *p == "/etc" || *p == "/home" || *p == "/root"));
    // No host directory is writable: the scratch is a bounded tmpfs
    // (`a_flows_scratch_and_tmp_are_bounded_tmpfs`), and so is the
    // writable attachment.
    assert!(after(&args, "--bind").is_empty(), "{args:?}");
    let tmpfs = args.iter().position(|a| a == "/a/out").unwrap();
    assert_eq!(
        &args[tmpfs - 3..=tmpfs],
        ["--size", "16777216", "--tmpfs", "/a/out"]
    );
    assert_eq!(after(&args, "--chdir"), vec!["/p/scratch"]);
    assert_eq!(
        after(&args, "--dev-bind"),
        vec!["/dev/null", "/dev/zero", "/dev/urandom"]
    );
    // Binds under /tmp must come after the private /tmp.
    let tmp = args.iter().position(|a| a == "/tmp").unwrap();
    let scratch = args.iter().position(|a| a == "/p/scratch").unwrap();
    assert!(tmp < scratch);
    let env = args.iter().position(|a| a == "--setenv").unwrap();
    assert_eq!(&args[env..env + 3], ["--setenv", "LANG", "C.UTF-8"]);
    // The root view is read-only once everything is mounted.
    assert_eq!(&args[args.len() - 2..], ["--remount-ro", "/"]);
    assert_eq!(after(&args, "--uid"), vec!["65534"]);
    assert_eq!(after(&args, "--cap-drop"), vec!["ALL"]);
}

/// The in-process recipe's writable attachment: a 16 MiB tmpfs held
/// only by the returned descriptor. 16 MiB fit, one byte more is
/// ENOSPC, and no mount of it ever appears in the host's namespace.
#[test]
fn a_held_output_is_a_bounded_tmpfs_reachable_only_by_its_descriptor() {
    let bwrap = match super::super::find_bwrap(None) {
        Ok((path, _)) => path,
        Err(e) => {
            eprintln!("\n*** SKIPPED: no usable bubblewrap: {e} ***\n");
            return;
        }
    };
    let b = unplaced(bwrap);
    let mounts_before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let fd = b.hold_tmpfs(OUTPUT_TMPFS_BYTES).expect("a held output");
    let dir = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let fs = nix::sys::statfs::fstatfs(&fd).unwrap();
    assert_eq!(fs.filesystem_type(), nix::sys::statfs::TMPFS_MAGIC);
    assert_eq!(fs.blocks() * fs.block_size() as u64, OUTPUT_TMPFS_BYTES);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "empty");
    let chunk = vec![7u8; OUTPUT_TMPFS_BYTES as usize];
    std::fs::write(dir.join("full"), &chunk).expect("16 MiB fit");
    let one_more = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("full"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"x"));
    assert_eq!(
        one_more.unwrap_err().raw_os_error(),
        Some(nix::libc::ENOSPC),
        "one byte past the bound"
    );
    // Read back through the handed-back descriptor, as delivery does.
    let through_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let files: Vec<Vec<u8>> = std::fs::read_dir(&through_fd)
        .unwrap()
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].len() as u64, OUTPUT_TMPFS_BYTES);
    assert_eq!(
        std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
        mounts_before,
        "the tmpfs is never mounted in the host's namespace"
    );
    // Closing the descriptor frees the filesystem: its 16 MiB of
    // shared memory go (slack for whatever else runs meanwhile).
    let held = shmem_kib();
    drop(fd);
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while held - shmem_kib() < 12 * 1024 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let freed = held - shmem_kib();
    assert!(freed >= 12 * 1024, "only {freed} KiB freed after close");
}

fn shmem_kib() -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Shmem:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn an_interpreter_outside_usr_brings_its_prefix_only() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("py/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("python3"), "").unwrap();
    let roots = program_roots(&bin.join("python3"), Path::new("/p/pkg"));
    assert_eq!(roots, vec![dir.path().join("py").canonicalize().unwrap()]);
    assert!(program_roots(Path::new("/usr/bin/env"), Path::new("/p")).is_empty());
}

/// systemd's ProtectHostname= is a seccomp filter refusing sethostname()
/// to the unit and all it starts. Under such a filter bubblewrap's
/// `--hostname` fails, and what jig says about that failure names the
/// filter and that contained Runs cannot start under it.
#[test]
fn under_a_filter_refusing_sethostname_bubblewrap_fails_and_jig_says_why() {
    let bwrap = match super::super::find_bwrap(None) {
        Ok((path, _)) => path,
        Err(e) => {
            eprintln!("\n*** SKIPPED: no usable bubblewrap: {e} ***\n");
            return;
        }
    };
    // Without the filter the same command works here, so the failure
    // below is the filter's.
    let plain = std::process::Command::new(&bwrap)
        .args([
            "--unshare-all",
            "--hostname",
            "x",
            "--ro-bind",
            "/",
            "/",
            "true",
        ])
        .output()
        .unwrap();
    if !plain.status.success() {
        eprintln!(
            "\n*** SKIPPED: bubblewrap cannot start a sandbox here: {} ***\n",
            String::from_utf8_lossy(&plain.stderr)
        );
        return;
    }
    let mut command = std::process::Command::new(&bwrap);
    command.args([
        "--unshare-all",
        "--hostname",
        "x",
        "--ro-bind",
        "/",
        "/",
        "true",
    ]);
    // SAFETY: the hook only makes raw prctl() calls on a filter held on
    // its own stack; it allocates nothing and takes no locks.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(crate::testing::refuse_sethostname);
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "bubblewrap ran under the filter: {stderr}"
    );
    assert!(stderr.contains("Can't set hostname"), "{stderr}");
    let said = explain_failure(&stderr);
    assert!(said.starts_with(stderr.trim()), "{said}");
    for words in [
        "seccomp filter",
        "ProtectHostname=",
        "forbids sethostname()",
        "contained Runs cannot start under it",
    ] {
        assert!(said.contains(words), "{words:?} not in {said}");
    }
    // A Run's stderr names the cause where bubblewrap's line is in it.
    let run_stderr = format!("starting\n{stderr}");
    assert_eq!(known_failure(&run_stderr).as_deref(), Some(said.as_str()));
    assert_eq!(known_failure("Can't set hostname, said the program"), None);
    // Any other complaint is passed on unchanged.
    assert_eq!(
        explain_failure("bwrap: execvp x: No such file\n"),
        "bwrap: execvp x: No such file"
    );
}
