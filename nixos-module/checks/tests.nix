# Offline tests for the Nix files (run by ../check.sh through nix-instantiate).
# Evaluates to the list of passed case names, or throws naming every failure.
let
  inherit (builtins)
    all
    any
    attrNames
    concatStringsSep
    elem
    filter
    functionArgs
    isFunction
    length
    pathExists
    readFile
    fromJSON
    stringLength
    tryEval
    ;

  root = ../..;
  jigLib = import ../lib.nix;
  stubs = import ./stubs.nix;
  inherit (jigLib) repeat;

  cargoWorkspace = (fromTOML (readFile (root + "/Cargo.toml"))).workspace;

  # ---- flake.nix and flake.lock -------------------------------------------
  flake = import (root + "/flake.nix");
  outputs = flake.outputs {
    self = outputs;
    inherit (stubs) nixpkgs;
  };
  lock = fromJSON (readFile (root + "/flake.lock"));
  locked = lock.nodes.nixpkgs.locked;

  perSystem =
    pred: all pred stubs.systems;

  # ---- nixos-module/package.nix -------------------------------------------
  packageWith =
    rustcVersion:
    import ../package.nix {
      inherit (stubs) lib;
      rustPlatform = {
        rust.rustc.version = rustcVersion;
        buildRustPackage = attrs: attrs;
      };
      inherit (stubs) formats;
      makeBinaryWrapper = stubs.fakeDrv "make-binary-wrapper";
      installShellFiles = stubs.fakeDrv "install-shell-files";
      python3 = stubs.fakeDrv "python3";
      bubblewrap = stubs.fakeDrv "bubblewrap";
    };
  package = packageWith cargoWorkspace.package.rust-version;
  sourcePaths = package.src.fileset.include.union;

  # ---- nixos-module/default.nix -------------------------------------------
  moduleWith =
    cfg:
    import ../default.nix {
      config = {
        services.jig = cfg;
        users.users.alice.group = "staff";
        users.users.bob.group = "";
      };
      inherit (stubs) lib;
      pkgs = stubs.pkgs "x86_64-linux";
    };
  configOf = cfg: (moduleWith cfg).config.content;

  goodCfg = {
    enable = true;
    package = stubs.fakeDrv "jig";
    bubblewrapPackage = stubs.fakeDrv "bubblewrap" // {
      version = "0.12.0";
    };
    settings = {
      runtimes = {
        python = "/opt/py/bin/python3";
        node = null;
        bun = null;
        deno = null;
      };
      containment.bwrap = "/opt/bw/bin/bwrap";
      agent = {
        api = "chat-completions";
        base-url = null;
        model = "some-model";
        api-key-file = "/run/credentials/jig/agent-key";
      };
      providers = [
        {
          name = "kv";
          kind = "wasm";
          path = "/opt/kv/kv.wasm";
          settings.namespace = "demo";
          secrets.token = "/run/credentials/jig/kv-token";
        }
        {
          name = "checkpoint";
          kind = "builtin";
          path = null;
          settings = { };
          secrets = { };
        }
      ];
    };
    projects = {
      intake = {
        path = "/srv/jig/intake";
        user = "alice";
        group = null;
      };
      notes = {
        path = "/srv/jig/notes";
        user = "bob";
        group = null;
      };
    };
  };

  badCfg = goodCfg // {
    bubblewrapPackage = stubs.fakeDrv "bubblewrap" // {
      version = "0.11.0";
    };
    settings = goodCfg.settings // {
      providers = goodCfg.settings.providers ++ [
        {
          name = "kv";
          kind = "native";
          path = null;
          settings = { };
          secrets = { };
        }
      ];
    };
    projects = goodCfg.projects // {
      again = {
        path = "/srv/jig/intake";
        user = "mallory";
        group = null;
      };
    };
  };

  failedAssertions = cfg: map (a: a.message) (filter (a: !a.assertion) (configOf cfg).assertions);

  expectedHostToml = {
    runtimes.python = "/opt/py/bin/python3";
    containment.bwrap = "/opt/bw/bin/bwrap";
    agent = {
      api = "chat-completions";
      model = "some-model";
      api-key-file = "/run/credentials/jig/agent-key";
    };
    providers = [
      {
        name = "kv";
        kind = "wasm";
        path = "/opt/kv/kv.wasm";
        settings.namespace = "demo";
        secrets.token = "/run/credentials/jig/kv-token";
      }
      {
        name = "checkpoint";
        kind = "builtin";
      }
    ];
  };

  tmpfiles = (configOf goodCfg).systemd.tmpfiles.settings."10-jig-projects";

  # ---- cases ----------------------------------------------------------------
  cases = {
    # Agent model (HOST-FACTS §6): at most 256 characters.
    "model of 256 characters is accepted" = jigLib.isModel (repeat 256 "a");
    "model of 257 characters is rejected" = !jigLib.isModel (repeat 257 "a");
    "model with . _ : / - is accepted" = jigLib.isModel "org/model-1.5:free_x";
    "model starting with punctuation is rejected" = !jigLib.isModel "-model";
    "empty model is rejected" = !jigLib.isModel "";

    # Agent base URL (HOST-FACTS §6): https, <= 4096, no userinfo/query/fragment.
    "base URL of 4096 characters is accepted" =
      let
        url = "https://h/" + repeat (4096 - stringLength "https://h/") "a";
      in
      stringLength url == 4096 && jigLib.isBaseUrl url;
    "base URL of 4097 characters is rejected" =
      let
        url = "https://h/" + repeat (4097 - stringLength "https://h/") "a";
      in
      stringLength url == 4097 && !jigLib.isBaseUrl url;
    "plain base URL is accepted" = jigLib.isBaseUrl "https://api.example.org/v1";
    "host-only base URL is accepted" = jigLib.isBaseUrl "https://api.example.org";
    "http base URL is rejected" = !jigLib.isBaseUrl "http://api.example.org/v1";
    "base URL with userinfo is rejected" = !jigLib.isBaseUrl "https://user:pw@api.example.org/v1";
    "base URL with query is rejected" = !jigLib.isBaseUrl "https://api.example.org/v1?x=1";
    "base URL with fragment is rejected" = !jigLib.isBaseUrl "https://api.example.org/v1#x";

    # Secrets are paths outside the world-readable store.
    "secret file outside the store is accepted" = jigLib.isSecretFile "/run/credentials/jig/agent-key";
    "secret file in the store is rejected" = !jigLib.isSecretFile "/nix/store/0000-key";
    "the store itself is rejected as a secret file" = !jigLib.isSecretFile "/nix/store";
    "relative secret file is rejected" = !jigLib.isSecretFile "keys/agent";

    "project path is accepted" = jigLib.isProjectPath "/srv/jig/intake";
    "project path / is rejected" = !jigLib.isProjectPath "/";
    "project path with .. is rejected" = !jigLib.isProjectPath "/srv/../etc";
    "project path with . is rejected" = !jigLib.isProjectPath "/srv/./x";
    "project path with // is rejected" = !jigLib.isProjectPath "/srv//x";
    "project path with trailing / is rejected" = !jigLib.isProjectPath "/srv/x/";
    "project path with a space is rejected" = !jigLib.isProjectPath "/srv/a b";
    "relative project path is rejected" = !jigLib.isProjectPath "srv/x";

    "duplicates are reported once each" = jigLib.duplicates [ "a" "b" "a" "c" "a" "b" ] == [ "a" "b" ];

    "host.toml drops nulls, empty provider fields and keeps the rest" =
      jigLib.hostToml goodCfg.settings == expectedHostToml;
    "host.toml without agent or providers has neither key" =
      jigLib.hostToml {
        runtimes.python = null;
        containment.bwrap = "/b";
        agent = null;
        providers = [ ];
      } == {
        runtimes = { };
        containment.bwrap = "/b";
      };
    "host.toml keeps freeform keys" =
      (jigLib.hostToml {
        containment.bwrap = "/b";
        extra.flag = true;
      }).extra.flag;

    # Workspace members for the package source.
    "member dirs follow Cargo.toml" =
      jigLib.memberDirs (root + "/Cargo.toml")
      == map (m: m) cargoWorkspace.members;
    "every member dir exists with a Cargo.toml" = all (
      d: pathExists (root + "/${d}/Cargo.toml")
    ) (jigLib.memberDirs (root + "/Cargo.toml"));

    # flake.nix
    "flake input is nixos-25.11" = flake.inputs.nixpkgs.url == "github:NixOS/nixpkgs/nixos-25.11";
    "flake outputs are the expected set" =
      attrNames outputs == [
        "apps"
        "checks"
        "devShells"
        "formatter"
        "nixosModules"
        "overlays"
        "packages"
      ];
    "flake has outputs for x86_64-linux and aarch64-linux" = all (
      o: attrNames outputs.${o} == stubs.systems || attrNames outputs.${o} == [ "aarch64-linux" "x86_64-linux" ]
    ) [ "apps" "checks" "devShells" "formatter" "packages" ];
    "packages.default is package.nix" = perSystem (
      s: outputs.packages.${s}.default.callPackageOf == root + "/nixos-module/package.nix"
    );
    "apps.default runs bin/jig of packages.default" = perSystem (
      s:
      outputs.apps.${s}.default.type == "app"
      && outputs.apps.${s}.default.program == "${outputs.packages.${s}.default}/bin/jig"
    );
    "devShell has the toolchain and runtimes" = perSystem (
      s:
      let
        names = map (p: p.name) outputs.devShells.${s}.default.packages;
      in
      all (n: elem n names) [
        "rustc"
        "cargo"
        "clippy"
        "rustfmt"
        "python3"
        "bubblewrap"
        "nodejs"
        "clang"
        "lld"
        "wasm-tools"
      ]
    );
    "checks are the package and the VM test" = perSystem (
      s:
      attrNames outputs.checks.${s} == [
        "module"
        "package"
      ]
      && outputs.checks.${s}.package == outputs.packages.${s}.default
      && outputs.checks.${s}.module.runNixOSTest
    );
    "the VM test imports the module and enables it" =
      let
        machine = outputs.checks.x86_64-linux.module.nodes.machine { config = { }; };
      in
      machine.imports == [ (root + "/nixos-module/default.nix") ] && machine.services.jig.enable;
    "nixosModules.default is a NixOS module function" =
      isFunction outputs.nixosModules.default
      && functionArgs outputs.nixosModules.default == {
        config = false;
        lib = false;
        pkgs = false;
      };
    "overlay adds jig" =
      (outputs.overlays.default (stubs.pkgs "x86_64-linux") { }).jig.callPackageOf
      == root + "/nixos-module/package.nix";

    # flake.lock
    "flake.lock is version 7 with root and nixpkgs" =
      lock.version == 7 && lock.root == "root" && lock.nodes.root.inputs.nixpkgs == "nixpkgs";
    "flake.lock nixpkgs is a locked github node" =
      locked.type == "github"
      && locked.owner == "NixOS"
      && locked.repo == "nixpkgs"
      && stringLength locked.rev == 40
      && builtins.match "sha256-[A-Za-z0-9+/]{43}=" locked.narHash != null
      && builtins.isInt locked.lastModified;
    "flake.lock original follows nixos-25.11" = lock.nodes.nixpkgs.original == {
      owner = "NixOS";
      repo = "nixpkgs";
      ref = "nixos-25.11";
      type = "github";
    };

    # package.nix
    "package builds only -p jig without tests" =
      package.cargoBuildFlags == [ "-p" "jig" ] && package.doCheck == false;
    "package name and version come from the workspace" =
      package.pname == "jig" && package.version == cargoWorkspace.package.version;
    "package uses the workspace Cargo.lock" = package.cargoLock.lockFile == root + "/Cargo.lock";
    "package source is the manifest, the lock and every member" =
      sourcePaths == [
        (root + "/Cargo.toml")
        (root + "/Cargo.lock")
      ]
      ++ map (d: root + "/${d}") (jigLib.memberDirs (root + "/Cargo.toml"));
    "package installs the manual page and bash, zsh and fish completions" =
      builtins.match ".*jig manpage > jig.1.*installManPage jig.1.*--bash <\\(\\$out/bin/jig completions bash\\).*--zsh <\\(\\$out/bin/jig completions zsh\\).*--fish <\\(\\$out/bin/jig completions fish\\).*" package.postInstall
      != null;
    "package wraps jig with a default JIG_CONFIG" =
      builtins.match ".*wrapProgram \\$out/bin/jig --set-default JIG_CONFIG \\$out/share/jig/host.toml.*" package.postInstall
      != null;
    "package host.toml names python and bwrap by store path" =
      package.passthru.hostToml.value == {
        runtimes.python = "${stubs.fakeDrv "python3"}/bin/python3";
        containment.bwrap = "${stubs.fakeDrv "bubblewrap"}/bin/bwrap";
      };
    "package refuses a rustc older than rust-version" = !(tryEval (packageWith "1.91.1").pname).success;

    # default.nix (config side, evaluated with a hand-made cfg)
    "module is gated on enable" = (moduleWith goodCfg).config.condition;
    "module writes /etc/jig/host.toml from settings" =
      (configOf goodCfg).environment.etc."jig/host.toml".source.value == expectedHostToml;
    "module sets JIG_CONFIG" = (configOf goodCfg).environment.sessionVariables.JIG_CONFIG == "/etc/jig/host.toml";
    "module installs jig and bubblewrap" =
      map (p: p.name) (configOf goodCfg).environment.systemPackages == [ "jig" "bubblewrap" ];
    "module allows unprivileged user namespaces" =
      (configOf goodCfg).security.allowUserNamespaces && (configOf goodCfg).security.unprivilegedUsernsClone;
    "module delegates cgroup controllers to user managers" =
      (configOf goodCfg).systemd.services."user@".serviceConfig.Delegate == "cpu cpuset io memory pids";
    "module enables nix-ld by default" = (configOf goodCfg).programs.nix-ld.enable.value;
    "module creates project root and .jig with owner and mode" =
      tmpfiles.condition
      && tmpfiles.content.contents == [
        {
          "/srv/jig/intake".d = {
            user = "alice";
            group = "staff";
            mode = "0750";
          };
          "/srv/jig/intake/.jig".d = {
            user = "alice";
            group = "staff";
            mode = "0700";
          };
        }
        {
          "/srv/jig/notes".d = {
            user = "bob";
            group = "users";
            mode = "0750";
          };
          "/srv/jig/notes/.jig".d = {
            user = "bob";
            group = "users";
            mode = "0700";
          };
        }
      ];
    "no projects means no tmpfiles rules" = !(configOf (goodCfg // { projects = { }; })).systemd.tmpfiles.settings."10-jig-projects".condition;
    "a valid configuration passes every assertion" = failedAssertions goodCfg == [ ];
    "a valid configuration has no warnings" = (configOf goodCfg).warnings == [ ];
    "invalid configurations fail the right assertions" =
      failedAssertions badCfg == [
        "services.jig.settings.providers: duplicate names kv"
        "services.jig.projects: more than one project at /srv/jig/intake"
        "services.jig.settings.providers: provider `kv` of kind `native` must set `path`"
        "services.jig.projects.again.user: no user `mallory` in users.users"
      ];
    "old bubblewrap warns" = length (configOf badCfg).warnings == 1;
  };

  failures = filter (name: !cases.${name}) (attrNames cases);
in
if failures == [ ] then
  attrNames cases
else
  throw "failed:\n  ${concatStringsSep "\n  " failures}"
