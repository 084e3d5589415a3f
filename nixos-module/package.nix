# The `jig` host binary, built from this repository's Cargo workspace.
#
# The binary is wrapped so that, unless the environment already names one
# (the NixOS module sets JIG_CONFIG=/etc/jig/host.toml), it reads a host.toml
# in its own output that points at Python and Bubblewrap in the Nix store.
# Runtimes and containment tools are therefore chosen by host configuration,
# never by the caller's PATH.
{
  lib,
  stdenv,
  rustPlatform,
  formats,
  makeBinaryWrapper,
  installShellFiles,
  python3,
  bubblewrap,
  # Attribute set of runtime name -> absolute executable path for the default
  # host.toml; null means "Python only".
  runtimes ? null,
}:
let
  jigLib = import ./lib.nix;
  root = ../.;
  workspace = (builtins.fromTOML (builtins.readFile (root + "/Cargo.toml"))).workspace.package;
  rustc = rustPlatform.rust.rustc;

  hostToml = (formats.toml { }).generate "jig-host.toml" {
    runtimes = if runtimes != null then runtimes else { python = "${python3}/bin/python3"; };
    containment.bwrap = "${bubblewrap}/bin/bwrap";
  };

  # Exactly what `cargo build -p jig` reads: the workspace manifest and lock,
  # and every member and path dependency named in Cargo.toml (cargo loads the
  # whole workspace even when building one package).
  src = lib.fileset.toSource {
    inherit root;
    fileset = lib.fileset.difference (lib.fileset.unions (
      [
        (root + "/Cargo.toml")
        (root + "/Cargo.lock")
      ]
      # The provider WIT world, read by the wasm provider host and the
      # provider SDK at build time (`path: "../wit"`).
      ++ [ (root + "/providers/wit") ]
      # The guide's Troubleshooting page, built into jig for `jig explain`.
      ++ [ (root + "/docs/src/troubleshooting.md") ]
      ++ map (dir: root + "/${dir}") (jigLib.memberDirs (root + "/Cargo.toml"))
    )) (lib.fileset.fileFilter (file: file.hasExt "pyc") root);
  };

  # The ACP Agent worker `jig-agent-acp` (native ACP clients): its own Cargo
  # package and lock in providers/acp, outside the workspace, built alone so
  # that the serde_json `preserve_order` feature its ACP crate enables never
  # reaches jig's build. jig finds it beside its own executable.
  acpRoot = root + "/providers/acp";
  acpWorker = rustPlatform.buildRustPackage {
    pname = "jig-agent-acp";
    inherit (workspace) version;
    src = lib.fileset.toSource {
      root = acpRoot;
      fileset = lib.fileset.unions [
        (acpRoot + "/Cargo.toml")
        (acpRoot + "/Cargo.lock")
        (acpRoot + "/src")
      ];
    };
    cargoLock.lockFile = acpRoot + "/Cargo.lock";
    # Its session test needs the ACP SDK agent of host/tests (Node, npm).
    doCheck = false;
  };
in
lib.throwIfNot (lib.versionAtLeast rustc.version workspace.rust-version)
  ''
    jig needs rustc >= ${workspace.rust-version} (rust-version in Cargo.toml), but this
    nixpkgs provides rustc ${rustc.version}. Use the flake's own package (its
    nixosModules.default installs it on any release), build against a newer
    nixpkgs such as nixos-unstable, or pass a newer toolchain:
    jig.override { rustPlatform = ...; }''
  rustPlatform.buildRustPackage
  {
    pname = "jig";
    inherit (workspace) version;
    inherit src;

    cargoLock.lockFile = root + "/Cargo.lock";
    cargoBuildFlags = [
      "-p"
      "jig"
    ];

    # The suites of the FLOW library (wire, schema, package and contract
    # rules) and of the runtime verifier need no namespaces, network or
    # home directory, so they run here. The host's suites create user
    # namespaces and cgroups and run Bubblewrap, which the Nix build
    # sandbox does not permit; the NixOS VM test (checks.<system>.module)
    # exercises the installed binary instead.
    doCheck = true;
    cargoTestFlags = [
      "-p"
      "flow"
      "-p"
      "jig-verify"
    ];

    # rquickjs-sys compiles its bundled C sources with the stdenv C
    # compiler; it ships pre-generated bindings for x86_64/aarch64 Linux, so
    # neither bindgen nor libclang is needed. (zstd-sys, from wasmtime's
    # `cache` feature, is built only for the conformance runner, not jig.)
    nativeBuildInputs = [
      makeBinaryWrapper
      installShellFiles
    ];

    postInstall = ''
      install -Dm0444 ${hostToml} $out/share/jig/host.toml
      # The ACP Agent worker, in the same bin/ as jig (beside the wrapped
      # executable, where jig looks for it).
      install -Dm0555 ${acpWorker}/bin/jig-agent-acp $out/bin/jig-agent-acp
      # The bundled Python Run SDK (`jiggy`), beside the binary for a host
      # that looks it up relative to its executable.
      if [ -d host/python/jiggy ]; then
        mkdir -p $out/share/jig/python
        cp -r host/python/jiggy $out/share/jig/python/
      fi
      # The Rust Run SDK's sources, for `jig init --lang rust` (it looks for
      # <exe>/../share/jig/sdk-rust): sdk-rust and flow, which inherit
      # workspace fields, under a workspace manifest naming only these.
      cp -r sdk-rust flow $out/share/jig/
      # The provider SDK's sources, for `jig provider new --lang rust` (it
      # looks for <exe>/../share/jig/providers/sdk), with the WIT world it
      # binds (../wit), a member of the same workspace manifest.
      mkdir -p $out/share/jig/providers
      cp -r providers/sdk providers/wit $out/share/jig/providers/
      awk '/^members = \[/ { print "members = [\"flow\", \"sdk-rust\", \"providers/sdk\"]"; skip = 1; next }
        skip && /^\]/ { skip = 0; next }
        skip || /^(default-members|exclude) =/ { next }
        { print }' Cargo.toml > $out/share/jig/Cargo.toml
    ''
    # The manual page (clap_mangen) and shell completions (clap_complete),
    # generated at build time by the binary just built: only where the
    # build machine can run it (not in a cross build).
    + lib.optionalString (stdenv.buildPlatform.canExecute stdenv.hostPlatform) ''
      $out/bin/jig manpage > jig.1
      installManPage jig.1
      installShellCompletion --cmd jig \
        --bash <($out/bin/jig completions bash) \
        --zsh <($out/bin/jig completions zsh) \
        --fish <($out/bin/jig completions fish)
    ''
    + ''
      wrapProgram $out/bin/jig --set-default JIG_CONFIG $out/share/jig/host.toml
    '';

    passthru = {
      inherit hostToml acpWorker;
    };

    meta = {
      description = "A FLOW host: runs FLOW packages in rootless Linux containment";
      license = lib.licenses.asl20;
      mainProgram = "jig";
      platforms = [
        "x86_64-linux"
        "aarch64-linux"
      ];
    };
  }
