# What the checks evaluate with: nixpkgs' real lib (from `nixpkgsLib`, the
# path of its `lib` directory), stand-in packages (pkgs.nix), and NixOS
# systems made by `lib.evalModules` from stand-ins for NixOS's own options
# (nixos.nix) and the modules given.
{ nixpkgsLib }:
rec {
  lib = import ./nixpkgs-lib.nix nixpkgsLib;

  root = ../..;
  workspace = (builtins.fromTOML (builtins.readFile (root + "/Cargo.toml"))).workspace;

  systems = [
    "x86_64-linux"
    "aarch64-linux"
  ];
  pkgsFor =
    system:
    import ./pkgs.nix {
      inherit lib system;
      # As new as Cargo.toml's rust-version, the oldest the package accepts.
      rustcVersion = workspace.package.rust-version;
    };
  pkgs = pkgsFor "x86_64-linux";

  # A NixOS system of `modules`, as nixpkgs.lib.nixosSystem evaluates one.
  nixos =
    modules:
    lib.evalModules {
      class = "nixos";
      modules = [
        ./nixos.nix
        { _module.args.pkgs = pkgs; }
      ]
      ++ modules;
    };

  # The module with `cfg` as services.jig, and `modules` beside it.
  jig =
    cfg: modules:
    nixos (
      [
        ../default.nix
        { services.jig = cfg; }
      ]
      ++ modules
    );

  failedAssertions = system: map (a: a.message) (builtins.filter (a: !a.assertion) system.config.assertions);

  # What building the system asks of the module: failed assertions refuse
  # it (lib.asserts.checkAssertWarn, as NixOS does), then every /etc file,
  # unit file, tmpfiles rule, user and package must evaluate with values
  # of their options' types. Throws like `nixos-rebuild build` would;
  # otherwise true.
  build =
    system:
    let
      c = system.config;
      outputs = [
        (lib.mapAttrsToList (_: f: "${f.source}") c.environment.etc)
        (lib.mapAttrsToList (_: u: u.text) c.systemd.units)
        c.systemd.tmpfiles.settings
        c.users
        c.environment.sessionVariables
        (map (p: p.outPath) c.environment.systemPackages)
        c.security
        c.programs
      ];
    in
    lib.asserts.checkAssertWarn c.assertions [ ] (builtins.deepSeq outputs true);

  builds = system: (builtins.tryEval (build system)).success;

  # The host.toml value the system writes to /etc/jig/host.toml.
  hostToml = system: builtins.fromJSON system.config.environment.etc."jig/host.toml".source.toml.value;

  # The host.toml value a jig unit reads (jig.service, jig-admit-<name>,
  # jig-worker-<n>).
  unitToml = system: unit: builtins.fromJSON system.config.services.jig.unitHostTomls.${unit}.toml.value;

  # The lines of a unit file.
  unitLines = system: unit: lib.splitString "\n" system.config.systemd.units.${unit}.text;
}
