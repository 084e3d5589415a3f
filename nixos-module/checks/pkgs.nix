# Stand-ins for the nixpkgs packages and builders that the flake, the package
# and the module use: nixpkgs itself cannot be fetched where these checks
# run. `lib` is nixpkgs' real lib, and so is `callPackage`
# (`lib.callPackageWith`).
#
# A stand-in derivation is an attribute set with `type = "derivation"`, a
# name and a store path; nothing is ever built. A runCommand's store path is
# a hash of its name, environment and script, so a changed input is a
# changed path, as in nixpkgs (the module relies on that: a changed
# host.toml is a changed unit). What these stand-ins cannot show is that
# nixpkgs builds them: that is `nix flake check`.
{
  lib,
  system,
  # The rustc of the stand-in rustPlatform (nixpkgs' own varies by release).
  rustcVersion,
}:
let
  # A store path for `name` whose hash covers `inputs`.
  storePath =
    name: inputs:
    "${builtins.storeDir}/${
      builtins.substring 0 32 (builtins.hashString "sha256" (builtins.toJSON [ name inputs ]))
    }-${name}";

  derivation' =
    name: inputs: attrs:
    attrs
    // {
      type = "derivation";
      inherit name system;
      outPath = storePath name inputs;
    };

  # A package: `pname`, `version` and `name` as nixpkgs sets them.
  package =
    pname: version:
    derivation' "${pname}-${version}" null {
      inherit pname version;
      meta.mainProgram = pname;
    };

  # runCommand keeps its environment and script as attributes, and its
  # passthru on the result, as stdenv.mkDerivation does.
  runCommand =
    name: env: buildCommand:
    let
      attrs = removeAttrs env [ "passthru" ] // {
        inherit buildCommand;
      };
    in
    derivation' name attrs attrs
    // (env.passthru or { })
    // {
      passthru = env.passthru or { };
    };

  self = {
    inherit lib;
    stdenv = rec {
      hostPlatform = {
        inherit system;
        isLinux = true;
      };
      # A native build: the build machine runs what it builds.
      buildPlatform = hostPlatform // {
        canExecute = platform: platform.system == system;
      };
    };
    callPackage = lib.callPackageWith self;
    inherit runCommand;
    mkShell = args: derivation' "nix-shell" null args;
    testers.runNixOSTest = test: derivation' "vm-test-run-${test.name}" null { inherit test; };

    # pkgs.formats.toml: nixpkgs' TOML value type (pkgs/pkgs-lib/formats.nix,
    # built from lib's types as there), and `generate`, whose derivation
    # carries the value as JSON (`value`) for json2toml, as nixpkgs' does.
    formats.toml =
      { }:
      {
        type =
          let
            valueType =
              lib.types.oneOf [
                lib.types.bool
                lib.types.int
                lib.types.float
                lib.types.str
                lib.types.path
                (lib.types.attrsOf valueType)
                (lib.types.listOf valueType)
              ]
              // {
                description = "TOML value";
              };
          in
          valueType;
        generate =
          name: value:
          runCommand name {
            value = builtins.toJSON value;
            passAsFile = [ "value" ];
          } ''json2toml "$valuePath" "$out"'';
      };

    rustPlatform = {
      rust.rustc.version = rustcVersion;
      rustLibSrc = derivation' "rust-lib-src" null { };
      # The package's attributes, and its passthru on the result. (Its
      # store path does not follow its source: hashing that would copy it.)
      buildRustPackage =
        args: derivation' "${args.pname}-${args.version}" null args // (args.passthru or { });
    };
  }
  // lib.genAttrs [
    "bun"
    "cargo"
    "clang"
    "clippy"
    "curl"
    "deno"
    "installShellFiles"
    "lld"
    "makeBinaryWrapper"
    "nixfmt-tree"
    "nodejs"
    "python3"
    "rust-analyzer"
    "rustc"
    "rustfmt"
    "wabt"
    "wasm-tools"
  ] (name: package name "0")
  // {
    bubblewrap = package "bubblewrap" "0.12.0";
  };
in
self
