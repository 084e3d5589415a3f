# Offline tests of the Nix files, run by ../check.sh through nix-instantiate.
#
# The flake, the package and the module are evaluated with nixpkgs' real
# lib: the module as NixOS evaluates it (lib.evalModules, real option
# types, mkIf/mkMerge/mkDefault, submodule defaults), beside stand-ins for
# NixOS's own options (nixos.nix) and for nixpkgs' packages (pkgs.nix).
#
# Evaluates to { passed = [ name ]; failed = [ { name; result; expected; } ]; }.
# A case is a boolean, or { expr; expected; } when a failure should show
# both sides.
{ nixpkgsLib }:
let
  inherit (builtins)
    all
    any
    attrNames
    elem
    filter
    fromJSON
    functionArgs
    isBool
    isFunction
    length
    pathExists
    readFile
    stringLength
    tryEval
    ;

  system = import ./system.nix { inherit nixpkgsLib; };
  inherit (system)
    lib
    root
    workspace
    pkgs
    jig
    nixos
    builds
    failedAssertions
    hostToml
    unitToml
    unitLines
    ;
  jigLib = import ../lib.nix;
  repeat = n: s: lib.strings.replicate n s;
  store = builtins.storeDir;

  # ---- flake.nix and flake.lock -------------------------------------------
  flake = import (root + "/flake.nix");
  outputs = flake.outputs {
    # A flake's self is its outputs and its source in the store.
    self = outputs // {
      outPath = "${store}/00000000000000000000000000000000-source";
    };
    nixpkgs = {
      inherit lib;
      legacyPackages = lib.genAttrs system.systems system.pkgsFor;
    };
  };
  lock = fromJSON (readFile (root + "/flake.lock"));
  locked = lock.nodes.nixpkgs.locked;
  perSystem = pred: all pred system.systems;

  # ---- nixos-module/package.nix, through the flake's callPackage ----------
  package = outputs.packages.x86_64-linux.default;
  withRustc =
    version:
    package.override {
      rustPlatform = pkgs.rustPlatform // {
        rust.rustc.version = version;
      };
    };
  # Is this file of the repository in the package's source?
  inSource = path: package.src.filter (toString (root + "/${path}")) "regular";

  # ---- the VM test's nodes, evaluated as NixOS would ----------------------
  vmTest = outputs.checks.x86_64-linux.module.test;
  vmNode = name: nixos [ vmTest.nodes.${name} ];
  vmMachine = vmNode "machine";
  vmServer = vmNode "server";
  vmQueued = vmNode "queued";
  vmTestScript = vmTest.testScript {
    nodes = {
      machine = vmMachine.config;
      server = vmServer.config;
      queued = vmQueued.config;
    };
  };

  # ---- nixos-module/default.nix --------------------------------------------
  hosts = import ./hosts.nix system;
  inherit (hosts)
    users
    settings
    userProjects
    userCfg
    userWith
    greeterSrc
    serverCfg
    serverWith
    database
    workerWith
    ;

  userHost = userWith { };
  c = userHost.config;

  serverHost = serverWith { };
  s = serverHost.config;
  jigService = s.systemd.services.jig;
  admitGreeter = s.systemd.services.jig-admit-greeter;
  admitDrafts = s.systemd.services.jig-admit-drafts;
  jigUnit = unitLines serverHost "jig.service";

  workerHost = workerWith { };
  workerServices = lib.filterAttrs (n: _: lib.hasPrefix "jig-worker-" n) workerHost.config.systemd.services;

  jigPackage = c.services.jig.package;
  checkedHostToml = s.environment.etc."jig/host.toml".source;
  checkedServeToml = s.environment.etc."jig/serve.toml".source;

  # Does some line of `text` match the regex `re` (anywhere in the line)?
  contains = re: text: any (l: builtins.match ".*${re}.*" l != null) (lib.splitString "\n" text);
  # The comment lines right above the first line matching `line`.
  commentAbove =
    line: text:
    let
      before = lib.splitString "\n" (builtins.head (builtins.split "\n${line}" text));
      go =
        acc: rest:
        if rest == [ ] || builtins.match " *#.*" (builtins.head rest) == null then
          acc
        else
          go (acc + builtins.head rest) (builtins.tail rest);
    in
    go "" (lib.reverseList before);

  # A tmpfiles.d directory entry as NixOS completes it.
  dir = user: group: mode: {
    d = {
      type = "d";
      inherit user group mode;
      age = "-";
      argument = "";
    };
  };

  expectedHostToml = {
    runtimes.python = "/opt/py/bin/python3";
    containment.bwrap = "/opt/bw/bin/bwrap";
    agent = {
      api = "chat-completions";
      model = "some-model";
      api-key-file = "/var/keys/alice-agent";
    };
    providers = [
      {
        name = "kv";
        kind = "wasm";
        path = "/opt/kv/kv.wasm";
        settings.namespace = "demo";
        secrets.token = "/var/keys/kv-token";
      }
      {
        name = "checkpoint";
        kind = "builtin";
      }
    ];
  };

  serveCreds = "/run/credentials/jig.service";
  # What the server's jig at a shell reads (/etc/jig/host.toml): the
  # operator's files.
  expectedServerHostToml = expectedHostToml // {
    agent = {
      api = "chat-completions";
      base-url = "http://127.0.0.1:8080/v1";
      model = "some-model";
      api-key-file = "/var/keys/jig-agent";
    };
    secrets.deploy = "/var/keys/deploy";
    serve = expectedServeToml.serve // {
      token-file = "/var/keys/jig-token";
    };
    inherit (expectedServeToml) projects;
  };
  # What jig.service reads: every secret file a credential of its own.
  expectedServeToml = expectedHostToml // {
    agent = {
      api = "chat-completions";
      base-url = "http://127.0.0.1:8080/v1";
      model = "some-model";
      api-key-file = "${serveCreds}/agent-key";
    };
    providers = [
      (builtins.head expectedHostToml.providers // { secrets.token = "${serveCreds}/provider-kv-token"; })
      (builtins.elemAt expectedHostToml.providers 1)
    ];
    secrets.deploy = "${serveCreds}/secret-deploy";
    serve = {
      socket = "/run/jig/jig.sock";
      max-active-runs = 4;
      max-queued-runs = 64;
      envelopes-ahead = 4;
      shutdown-grace = "2m";
      max-connections = 512;
      header-timeout = "5s";
      body-timeout = "2m";
      tcp = "127.0.0.1:8480";
      token-file = "${serveCreds}/serve-token";
    };
    projects = [
      {
        name = "drafts";
        path = "/var/lib/jig/projects/drafts";
      }
      {
        name = "greeter";
        path = "/var/lib/jig/projects/greeter";
      }
    ];
  };

  # ---- cases ----------------------------------------------------------------
  cases = {
    # ---- lib.nix: each limit at its bound and one past it ------------------
    # Agent model (docs/src/agents.md): at most 256 characters.
    "model of 256 characters is accepted" = jigLib.isModel (repeat 256 "a");
    "model of 257 characters is rejected" = !jigLib.isModel (repeat 257 "a");
    "model with . _ : / - is accepted" = jigLib.isModel "org/model-1.5:free_x";
    "model starting with punctuation is rejected" = !jigLib.isModel "-model";
    "empty model is rejected" = !jigLib.isModel "";

    # Agent base URL (docs/src/agents.md): https, <= 4096, no userinfo/query/fragment.
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
    "http base URL to 127.0.0.1 is accepted" = jigLib.isBaseUrl "http://127.0.0.1:8080/v1";
    "http base URL to localhost is accepted" = jigLib.isBaseUrl "http://localhost/v1";
    "http base URL to [::1] is accepted" = jigLib.isBaseUrl "http://[::1]:8080";
    "http base URL to another host is rejected" = !jigLib.isBaseUrl "http://api.example.org/v1";
    "http base URL to a 127.* name is rejected" = !jigLib.isBaseUrl "http://127.0.0.1.example.org/v1";
    "http base URL with a query is rejected" = !jigLib.isBaseUrl "http://127.0.0.1/v1?x=1";
    "loopback base URL of 4096 characters is accepted" =
      jigLib.isBaseUrl ("http://127.0.0.1/" + repeat (4096 - 17) "a");
    "loopback base URL of 4097 characters is rejected" =
      !jigLib.isBaseUrl ("http://127.0.0.1/" + repeat (4097 - 17) "a");

    # Secrets are paths outside the world-readable store.
    "secret file outside the store is accepted" = jigLib.isSecretFile "/run/credentials/jig/agent-key";
    "secret file in the store is rejected" = !jigLib.isSecretFile "${store}/0000-key";
    "the store itself is rejected as a secret file" = !jigLib.isSecretFile store;
    "relative secret file is rejected" = !jigLib.isSecretFile "keys/agent";

    "project path is accepted" = jigLib.isProjectPath "/srv/jig/intake";
    "project path / is rejected" = !jigLib.isProjectPath "/";
    "project path with .. is rejected" = !jigLib.isProjectPath "/srv/../etc";
    "project path with . is rejected" = !jigLib.isProjectPath "/srv/./x";
    "project path with // is rejected" = !jigLib.isProjectPath "/srv//x";
    "project path with trailing / is rejected" = !jigLib.isProjectPath "/srv/x/";
    "project path with a space is rejected" = !jigLib.isProjectPath "/srv/a b";
    "relative project path is rejected" = !jigLib.isProjectPath "srv/x";

    "LocalName of 64 characters is accepted" = jigLib.isLocalName (repeat 64 "a");
    "LocalName of 65 characters is rejected" = !jigLib.isLocalName (repeat 65 "a");
    "LocalName with inner hyphens is accepted" = jigLib.isLocalName "my-project-2";
    "LocalName with a double hyphen is rejected" = !jigLib.isLocalName "a--b";
    "LocalName with upper case is rejected" = !jigLib.isLocalName "Upper";
    "LocalName with a trailing hyphen is rejected" = !jigLib.isLocalName "a-";
    "empty LocalName is rejected" = !jigLib.isLocalName "";

    "secret name of 64 characters is accepted" = jigLib.isSecretName (repeat 64 "a");
    "secret name of 65 characters is rejected" = !jigLib.isSecretName (repeat 65 "a");
    "secret name with . _ - is accepted" = jigLib.isSecretName "deploy_token.v2-x";
    "secret name with / is rejected" = !jigLib.isSecretName "a/b";
    "secret name with : is rejected" = !jigLib.isSecretName "a:b";
    "empty secret name is rejected" = !jigLib.isSecretName "";

    "durations with each unit are accepted" = all jigLib.isDuration [
      "500ms"
      "30s"
      "2m"
      "1h"
    ];
    "durations without a unit or with another are rejected" = !any jigLib.isDuration [
      "30"
      "1d"
      "-1s"
      "1.5s"
      ""
    ];
    "durations convert to whole seconds, rounded up" = {
      expr = map jigLib.durationSeconds [
        "1ms"
        "1000ms"
        "1001ms"
        "30s"
        "2m"
        "1h"
        "010s"
      ];
      expected = [
        1
        1
        2
        30
        120
        3600
        10
      ];
    };

    "TCP port 65535 is accepted" = jigLib.isTcpAddress "0.0.0.0:65535";
    "TCP port 65536 is rejected" = !jigLib.isTcpAddress "0.0.0.0:65536";
    "TCP port 1 is accepted" = jigLib.isTcpAddress "localhost:1";
    "TCP port 0 is rejected" = !jigLib.isTcpAddress "localhost:0";
    "TCP [v6]:port is accepted" = jigLib.isTcpAddress "[::1]:8480";
    "TCP without a host is rejected" = !jigLib.isTcpAddress "8480";
    "TCP with a path is rejected" = !jigLib.isTcpAddress "host:80/x";

    "run bounds of 1 are accepted" = jigLib.isPositiveInt 1;
    "run bounds of 0 are rejected" = !jigLib.isPositiveInt 0;
    "run bounds that are not integers are rejected" = !jigLib.isPositiveInt "4";

    "a database URL with a password is refused" =
      !jigLib.isDatabaseUrl "postgresql://jig:secret@db/jig"
      && jigLib.isDatabaseUrl "postgresql://jig@db/jig"
      && jigLib.isDatabaseUrl "postgres:///jig?host=/run/postgresql";

    "duplicates are reported once each" = {
      expr = jigLib.duplicates [
        "a"
        "b"
        "a"
        "c"
        "a"
        "b"
      ];
      expected = [
        "a"
        "b"
      ];
    };

    "host.toml without agent or providers has neither key" = {
      expr = jigLib.hostToml {
        runtimes.python = null;
        containment.bwrap = "/b";
        agent = null;
        providers = [ ];
      };
      expected = {
        runtimes = { };
        containment.bwrap = "/b";
      };
    };

    "an admission unit's host.toml names that unit's credentials" =
      let
        creds = "/run/credentials/jig-admit-greeter.service";
      in
      {
        expr = unitToml serverHost "jig-admit-greeter.service";
        expected = expectedServeToml // {
          agent = expectedServeToml.agent // {
            api-key-file = "${creds}/agent-key";
          };
          providers = [
            (builtins.head expectedHostToml.providers // { secrets.token = "${creds}/provider-kv-token"; })
            (builtins.elemAt expectedHostToml.providers 1)
          ];
          secrets.deploy = "${creds}/secret-deploy";
          serve = expectedServeToml.serve // {
            token-file = "${creds}/serve-token";
          };
        };
      };
    "a worker's [database] names its own credential" = {
      expr = (unitToml workerHost "jig-worker-2.service").database;
      expected = {
        inherit (database) url;
        password-file = "/run/credentials/jig-worker-2.service/database-password";
      };
    };

    # Workspace members for the package source.
    "member dirs follow Cargo.toml" = jigLib.memberDirs (root + "/Cargo.toml") == workspace.members;
    "every member dir exists with a Cargo.toml" = all (d: pathExists (root + "/${d}/Cargo.toml")) (
      jigLib.memberDirs (root + "/Cargo.toml")
    );

    # ---- flake.nix ---------------------------------------------------------
    # nixos-25.11's rustc (1.91) is older than Cargo.toml's rust-version.
    "flake input is nixos-unstable" = flake.inputs.nixpkgs.url == "github:NixOS/nixpkgs/nixos-unstable";
    "flake outputs are the expected set" = {
      expr = attrNames outputs;
      expected = [
        "apps"
        "checks"
        "devShells"
        "formatter"
        "lib"
        "nixosModules"
        "overlays"
        "packages"
      ];
    };
    "buildJigProvider builds the library for wasm32-wasip2 and installs the component" =
      let
        built = outputs.lib.buildJigProvider {
          pkgs.rustPlatform.buildRustPackage = args: args;
          src = /nonexistent/kv;
          pname = "kv-provider";
          meta.description = "kept";
        };
      in
      built.pname == "kv-provider"
      && built.cargoLock.lockFile == /nonexistent/kv/Cargo.lock
      && contains "cargo build --release --offline --lib --target wasm32-wasip2" built.buildPhase
      && contains "wasm32-wasip2/release/[*][.]wasm [$]out/lib/" built.installPhase
      && contains "jig-provider-sdk = [{] path = \"[^\"]*/providers/sdk\" [}]" built.postPatch
      && built.doCheck == false
      && built.meta.description == "kept"
      && !(built ? pkgs);
    "flake has outputs for x86_64-linux and aarch64-linux" = all (
      o:
      attrNames outputs.${o} == [
        "aarch64-linux"
        "x86_64-linux"
      ]
    ) [ "apps" "checks" "devShells" "formatter" "packages" ];
    "packages.default and packages.jig are package.nix" = perSystem (
      sys:
      let
        p = outputs.packages.${sys};
      in
      p.default.pname == "jig"
      && p.default.system == sys
      && p.default.cargoLock.lockFile == root + "/Cargo.lock"
      && p.jig.outPath == p.default.outPath
    );
    "apps.default runs bin/jig of packages.default" = perSystem (
      sys:
      outputs.apps.${sys}.default.type == "app"
      && outputs.apps.${sys}.default.program == "${outputs.packages.${sys}.default}/bin/jig"
    );
    "devShell has the toolchain and runtimes" = perSystem (
      sys:
      let
        names = map (p: p.pname) outputs.devShells.${sys}.default.packages;
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
      sys:
      attrNames outputs.checks.${sys} == [
        "module"
        "package"
      ]
      && outputs.checks.${sys}.package.outPath == outputs.packages.${sys}.default.outPath
      && outputs.checks.${sys}.module.test.name == "jig"
    );
    "nixosModules.default is the module" =
      isFunction outputs.nixosModules.default
      && (nixos [ outputs.nixosModules.default ]).options.services.jig.enable.type.name == "bool";
    # A host on nixos-25.11 (rustc 1.91) cannot build jig with its own
    # nixpkgs: the flake's module installs the flake's build instead, and
    # the operator may still choose another.
    "the flake's module installs the flake's own jig, so a host on an older nixpkgs works" =
      let
        olderPkgs = import ./pkgs.nix {
          inherit lib;
          system = "x86_64-linux";
          rustcVersion = "1.91.1";
        };
        onOlder =
          modules:
          lib.evalModules {
            class = "nixos";
            modules = [
              ./nixos.nix
              { _module.args.pkgs = olderPkgs; }
              { services.jig.enable = true; }
            ]
            ++ modules;
          };
        viaFlake = onOlder [ outputs.nixosModules.default ];
        mine = olderPkgs.bubblewrap // { pname = "my-jig"; };
      in
      (tryEval viaFlake.config.services.jig.package.outPath).value
        == outputs.packages.x86_64-linux.default.outPath
      && builds viaFlake
      && !(tryEval (onOlder [ ../default.nix ]).config.services.jig.package.pname).success
      && (onOlder [ outputs.nixosModules.default { services.jig.package = mine; } ]).config.services.jig.package.pname == "my-jig";
    "overlay adds jig" = (outputs.overlays.default pkgs pkgs).jig.pname == "jig";
    "formatter is nixfmt-tree" = perSystem (sys: outputs.formatter.${sys}.pname == "nixfmt-tree");

    # flake.lock
    "flake.lock is version 7 with root and nixpkgs" =
      lock.version == 7 && lock.root == "root" && lock.nodes.root.inputs.nixpkgs == "nixpkgs";
    "flake.lock nixpkgs is a locked github node" =
      locked.type == "github"
      && lib.toLower locked.owner == "nixos"
      && locked.repo == "nixpkgs"
      && stringLength locked.rev == 40
      && builtins.match "sha256-[A-Za-z0-9+/]{43}=" locked.narHash != null
      && builtins.isInt locked.lastModified;
    "flake.lock original follows nixos-unstable" = lock.nodes.nixpkgs.original == {
      owner = "NixOS";
      repo = "nixpkgs";
      ref = "nixos-unstable";
      type = "github";
    };

    # ---- package.nix -------------------------------------------------------
    "package builds only -p jig and runs the suites that need no namespaces" =
      package.cargoBuildFlags == [
        "-p"
        "jig"
      ]
      && package.doCheck
      && package.cargoTestFlags == [
        "-p"
        "flow"
        "-p"
        "jig-verify"
      ];
    "package name and version come from the workspace" =
      package.pname == "jig" && package.version == workspace.package.version;
    "package installs jig-agent-acp, built alone from its own lock, beside jig" =
      package.passthru.acpWorker.cargoLock.lockFile == root + "/providers/acp/Cargo.lock"
      && package.passthru.acpWorker.pname == "jig-agent-acp"
      && contains "install -Dm0555 ${package.passthru.acpWorker}/bin/jig-agent-acp [$]out/bin/jig-agent-acp" package.postInstall;
    # lib.fileset, evaluated for real: which files of this checkout the
    # build sees.
    "package source has the manifest, the lock, the provider WIT world, the Troubleshooting page and every member" = all inSource (
      [
        "Cargo.toml"
        "Cargo.lock"
        "docs/src/troubleshooting.md"
      ]
      ++ map (f: "providers/wit/${f}") (
        attrNames (lib.filterAttrs (_: t: t == "regular") (builtins.readDir (root + "/providers/wit")))
      )
      ++ map (d: "${d}/Cargo.toml") (jigLib.memberDirs (root + "/Cargo.toml"))
    );
    "package source leaves out the rest of the checkout" = !any inSource [
      "README.md"
      "docs/src/runs.md"
      "ARCHITECTURE.md"
      "flake.nix"
      "flake.lock"
      "nixos-module/default.nix"
      "examples/review/bindings/reviewer.ts"
      "providers/acp/Cargo.toml"
    ];
    "package installs the Rust and provider SDK sources under one workspace manifest" =
      builtins.match ".*cp -r sdk-rust flow \\$out/share/jig/.*cp -r providers/sdk providers/wit \\$out/share/jig/providers/.*members = .*\"flow.*\"sdk-rust.*\"providers/sdk.*Cargo.toml > \\$out/share/jig/Cargo.toml.*" package.postInstall
      != null;
    "package installs the manual page and bash, zsh and fish completions" =
      builtins.match ".*jig manpage > jig.1.*installManPage jig.1.*--bash <\\(\\$out/bin/jig completions bash\\).*--zsh <\\(\\$out/bin/jig completions zsh\\).*--fish <\\(\\$out/bin/jig completions fish\\).*" package.postInstall
      != null;
    # A cross build cannot run the binary it built: no manual page or
    # completions then, the wrapper all the same.
    "package runs the built jig at build time only where the build machine can" =
      let
        cross = package.override {
          stdenv = pkgs.stdenv // {
            buildPlatform = pkgs.stdenv.buildPlatform // {
              canExecute = _: false;
            };
          };
        };
      in
      !(contains "[$]out/bin/jig (manpage|completions)" cross.postInstall)
      && contains "wrapProgram [$]out/bin/jig --set-default JIG_CONFIG" cross.postInstall
      && contains "[$]out/bin/jig manpage > jig.1" package.postInstall;
    "package wraps jig with a default JIG_CONFIG" =
      contains "wrapProgram [$]out/bin/jig --set-default JIG_CONFIG [$]out/share/jig/host.toml" package.postInstall;
    "package host.toml names python and bwrap by store path" = {
      expr = fromJSON package.passthru.hostToml.value;
      expected = {
        runtimes.python = "${pkgs.python3}/bin/python3";
        containment.bwrap = "${pkgs.bubblewrap}/bin/bwrap";
      };
    };
    "package accepts rustc at rust-version and refuses the one before" =
      (tryEval (withRustc workspace.package.rust-version).pname).success
      && !(tryEval (withRustc "1.94.1").pname).success;
    "package meta: Apache-2.0, Linux, main program jig" =
      package.meta.license.spdxId == "Apache-2.0"
      && package.meta.mainProgram == "jig"
      && package.meta.platforms == system.systems;

    # ---- the module: a host whose users run jig ---------------------------
    "module does nothing unless enabled" =
      let
        off = (jig { } [ users ]).config;
      in
      off.environment.etc == { }
      && attrNames off.systemd.services == [ ]
      && off.systemd.tmpfiles.settings == { }
      && failedAssertions (jig { } [ users ]) == [ ];
    "a valid configuration builds" = builds userHost;
    "a valid configuration passes every assertion" = {
      expr = failedAssertions userHost;
      expected = [ ];
    };
    "a valid configuration has no warnings" = {
      expr = c.warnings;
      expected = [ ];
    };
    "module writes /etc/jig/host.toml from settings" = {
      expr = hostToml userHost;
      expected = expectedHostToml;
    };
    "host.toml keeps freeform keys" =
      (hostToml (userWith { settings.extra.flag = true; })).extra.flag;
    "module defaults the runtimes and bwrap to nixpkgs' by store path" = {
      expr = hostToml (jig { enable = true; } [ ]);
      expected = {
        runtimes = {
          python = "${pkgs.python3}/bin/python3";
          node = "${pkgs.nodejs}/bin/node";
          bun = "${pkgs.bun}/bin/bun";
          deno = "${pkgs.deno}/bin/deno";
        };
        containment.bwrap = "${pkgs.bubblewrap}/bin/bwrap";
      };
    };
    "module sets JIG_CONFIG" = c.environment.sessionVariables.JIG_CONFIG == "/etc/jig/host.toml";
    "module installs jig and bubblewrap" = {
      expr = map (p: p.pname) c.environment.systemPackages;
      expected = [
        "jig"
        "bubblewrap"
      ];
    };
    "module's package is package.nix built with the system's nixpkgs" =
      jigPackage.outPath == package.outPath;
    "module allows unprivileged user namespaces" =
      c.security.allowUserNamespaces && c.security.unprivilegedUsernsClone;
    "module delegates cgroup controllers to user managers" =
      elem "Delegate=cpu cpuset io memory pids" (unitLines userHost "user@.service");
    "module enables nix-ld by default, and the operator may turn it off" =
      c.programs.nix-ld.enable
      && !(jig userCfg [
        users
        { programs.nix-ld.enable = false; }
      ]).config.programs.nix-ld.enable;
    "module creates project root and .jig with owner and mode" = {
      expr = c.systemd.tmpfiles.settings."10-jig-projects";
      expected = {
        "/srv/jig/intake" = dir "alice" "staff" "0750";
        "/srv/jig/intake/.jig" = dir "alice" "staff" "0700";
        # bob's group is NixOS's default for a normal user.
        "/srv/jig/notes" = dir "bob" "users" "0750";
        "/srv/jig/notes/.jig" = dir "bob" "users" "0700";
      };
    };
    "a project's group overrides the user's" =
      let
        rules = (userWith { projects.notes.group = "staff"; }).config.systemd.tmpfiles.settings;
      in
      rules."10-jig-projects"."/srv/jig/notes".d.group == "staff";
    "no projects means no tmpfiles rules" =
      !(jig (userCfg // { projects = { }; }) [ users ]).config.systemd.tmpfiles.settings ? "10-jig-projects";
    "invalid configurations fail the right assertions" = {
      expr = failedAssertions (
        jig (
          userCfg
          // {
            settings = userCfg.settings // {
              providers = settings.providers ++ [
                {
                  name = "kv";
                  kind = "native";
                }
              ];
            };
            projects = userProjects // {
              again = {
                path = "/srv/jig/intake";
                user = "mallory";
              };
            };
          }
        ) [ users ]
      );
      expected = [
        "services.jig.settings.providers: duplicate names kv"
        "services.jig.projects: more than one project at /srv/jig/intake"
        "services.jig.settings.providers: provider `kv` of kind `native` must set `path`"
        "services.jig.projects.again.user: no user `mallory` in users.users"
      ];
    };
    "a builtin provider with a path is refused" =
      failedAssertions (
        jig (
          userCfg
          // {
            settings = userCfg.settings // {
              providers = [
                {
                  name = "checkpoint";
                  kind = "builtin";
                  path = "/opt/x.wasm";
                }
              ];
            };
          }
        ) [ users ]
      ) == [ "services.jig.settings.providers: provider `checkpoint` of kind `builtin` must not set `path`" ];
    "old bubblewrap warns" = {
      expr =
        map (version: (userWith { bubblewrapPackage = pkgs.bubblewrap // { inherit version; }; }).config.warnings) [
          "0.6.3"
          "0.7.0"
          "0.11.0"
        ];
      # jig refuses below 0.7.0 (host/sandbox BWRAP_MIN_VERSION); 0.12 is
      # only what the reference host asks for.
      expected = [
        [
          "services.jig: Bubblewrap 0.6.3 is older than 0.7.0, the oldest jig accepts (it needs --size): jig refuses to run process recipes contained with it. Set services.jig.bubblewrapPackage to a newer one."
        ]
        [ ]
        [ ]
      ];
    };
    "a user project needs its path and user" =
      let
        p = (userWith { projects.loose = { }; }).config.services.jig.projects.loose;
      in
      !(tryEval p.path).success && !(tryEval p.user).success;

    # ---- the server --------------------------------------------------------
    "no server: host.toml has no serve, projects, agent credential or secrets" =
      !any (k: (hostToml userHost) ? ${k}) [
        "serve"
        "projects"
        "secrets"
        "database"
      ];
    "no server: no socket, no jig user, no server units" =
      c.systemd.sockets == { }
      && !(c.users.users ? jig)
      && attrNames c.systemd.services == [ "user@" ];
    "no server: secrets name the operator's files" = {
      expr = (hostToml (userWith { secrets.deploy = "/var/keys/deploy"; })).secrets;
      expected.deploy = "/var/keys/deploy";
    };
    "a valid server configuration builds" = builds serverHost;
    "a valid server configuration passes every assertion" = {
      expr = failedAssertions serverHost;
      expected = [ ];
    };
    "jig.service reads its own host.toml: every secret file a credential of its own" = {
      expr = unitToml serverHost "jig.service";
      expected = expectedServeToml;
    };
    "/etc/jig/host.toml on a server names the operator's files, never a unit's credentials" = {
      expr = hostToml serverHost;
      expected = expectedServerHostToml;
    };
    "/etc/jig/serve.toml is what jig.service reads" =
      s.environment.etc."jig/serve.toml".source == s.services.jig.unitHostTomls."jig.service";
    "server.console renders [serve] console = true" = {
      expr = (hostToml (serverWith { server.console = true; })).serve.console;
      expected = true;
    };
    "the console without tcp is refused" =
      elem "services.jig.server: `console` serves the console on the TCP listener, so it requires `tcp`"
        (
          failedAssertions (
            jig (
              serverCfg
              // {
                server = removeAttrs serverCfg.server [ "tcp" "tokenFile" ] // { console = true; };
              }
            ) [ users ]
          )
        );
    "host.toml is checked by jig config check at build time" =
      contains "^${jigPackage}/bin/jig config check ${checkedHostToml.toml}$" checkedHostToml.buildCommand
      && contains "^cp ${checkedHostToml.toml} [$]out$" checkedHostToml.buildCommand;
    "jig.service serves the checked host.toml over the socket" =
      elem "ExecStart=${jigPackage}/bin/jig serve --config ${checkedServeToml}" jigUnit
      && s.services.jig.unitHostTomls."jig.service" == checkedServeToml
      && contains "^${jigPackage}/bin/jig config check ${checkedServeToml.toml}$" checkedServeToml.buildCommand
      && elem "Requires=jig.socket" jigUnit
      && elem "After=jig.socket network-online.target" jigUnit
      && jigService.wantedBy == [ "multi-user.target" ];
    "a changed host.toml is a changed jig.service" =
      s.systemd.units."jig.service".text
      != (serverWith { server.maxActiveRuns = 5; }).config.systemd.units."jig.service".text;
    "jig.socket listens on the socket for the jig group" = {
      expr = unitLines serverHost "jig.socket";
      expected = [
        "[Unit]"
        "Description=jig FLOW host API socket"
        "[Socket]"
        "DirectoryMode=0755"
        "ListenStream=/run/jig/jig.sock"
        "SocketGroup=jig"
        "SocketMode=0660"
        "SocketUser=jig"
        ""
      ];
    };
    "jig.socket is started at boot" = s.systemd.sockets.jig.wantedBy == [ "sockets.target" ];
    "jig.service runs as the jig system user with its state directory" =
      all (l: elem l jigUnit) [
        "User=jig"
        "Group=jig"
        "StateDirectory=jig"
        "StateDirectoryMode=0750"
        "WorkingDirectory=/var/lib/jig"
        "Environment=HOME=/var/lib/jig"
      ]
      && s.users.users.jig.isSystemUser
      && s.users.users.jig.group == "jig"
      && s.users.users.jig.home == "/var/lib/jig"
      && s.users.groups ? jig;
    "jig.service delegates cpu, memory and pids" =
      elem "Delegate=cpu memory pids" jigUnit && elem "KillMode=control-group" jigUnit;
    "jig.service stops within the grace plus the margin" = elem "TimeoutStopSec=150s" jigUnit;
    "jig.service may open its TCP connections and the Runs' descriptors" =
      elem "LimitNOFILE=65536" jigUnit;
    "jig.service gets the key, the secret and the token as credentials" = {
      expr = filter (lib.hasPrefix "LoadCredential=") jigUnit;
      expected = [
        "LoadCredential=agent-key:/var/keys/jig-agent"
        "LoadCredential=secret-deploy:/var/keys/deploy"
        "LoadCredential=serve-token:/var/keys/jig-token"
        "LoadCredential=provider-kv-token:/var/keys/kv-token"
      ];
    };
    "jig.service is hardened where bubblewrap allows" = all (l: elem l jigUnit) [
      "NoNewPrivileges=true"
      "CapabilityBoundingSet="
      "AmbientCapabilities="
      "ProtectSystem=strict"
      "ProtectHome=true"
      "PrivateTmp=true"
      "PrivateDevices=true"
      "PrivateIPC=true"
      "ProtectKernelModules=true"
      "ProtectKernelLogs=true"
      "RestrictSUIDSGID=true"
      "UMask=0077"
      "SystemCallArchitectures=native"
      "SystemCallFilter=@system-service"
      "SystemCallFilter=@mount"
      "SystemCallErrorNumber=EPERM"
    ];
    "no unit that starts bubblewrap filters sethostname (ProtectHostname)" =
      let
        units = [
          (unitLines serverHost "jig.service")
          (unitLines serverHost "jig-admit-greeter.service")
          (unitLines serverHost "jig-admit-drafts.service")
        ]
        ++ map (n: unitLines workerHost "${n}.service") (attrNames workerServices);
      in
      length units > 3 && all (lines: !(elem "ProtectHostname=true" lines)) units;
    "jig.service relaxes only what bubblewrap needs" = all (l: elem l jigUnit) [
      "ProtectHostname=false"
      "RestrictNamespaces=false"
      "PrivateUsers=false"
      "ProtectKernelTunables=false"
      "ProtectProc=default"
      "ProcSubset=all"
      "ProtectControlGroups=false"
      "MemoryDenyWriteExecute=false"
      "RestrictAddressFamilies=AF_NETLINK"
    ];
    "every relaxation in the module is commented" =
      let
        text = readFile ../default.nix;
      in
      all (k: builtins.match ".*# Relaxed.*" (commentAbove " *${k} = [^;]*;" text) != null) [
        "ProtectHostname"
        "RestrictNamespaces"
        "PrivateUsers"
        "ProtectKernelTunables"
        "ProtectControlGroups"
        "MemoryDenyWriteExecute"
        "SystemCallFilter"
      ]
      && builtins.match ".*AF_NETLINK: bubblewrap.*" (commentAbove " *RestrictAddressFamilies = [[]" text) != null;
    "jig.service may write the served projects" = {
      expr = filter (lib.hasPrefix "ReadWritePaths=") jigUnit;
      expected = [
        "ReadWritePaths=/var/lib/jig/projects/drafts"
        "ReadWritePaths=/var/lib/jig/projects/greeter"
      ];
    };
    "one admission unit per served project, none for user projects" = {
      expr = attrNames s.systemd.services;
      expected = [
        "jig"
        "jig-admit-drafts"
        "jig-admit-greeter"
        "user@"
      ];
    };
    "admission runs before jig.service without holding it back" =
      admitGreeter.before == [ "jig.service" ]
      && elem "jig.service" admitGreeter.wantedBy
      && !(elem "jig-admit-greeter.service" jigService.requires)
      && elem "Type=oneshot" (unitLines serverHost "jig-admit-greeter.service")
      && elem "RemainAfterExit=true" (unitLines serverHost "jig-admit-greeter.service");
    "admission's main process is its script" =
      length (filter (lib.hasPrefix "ExecStart=") (unitLines serverHost "jig-admit-greeter.service")) == 1;
    "admission re-runs when the source changes" =
      admitGreeter.restartTriggers == [ greeterSrc ] && contains "src='${greeterSrc}'" admitGreeter.script;
    "admission copies the source and keeps the protected state" =
      contains "dest='/var/lib/jig/projects/greeter'" admitGreeter.script
      && contains "! -name '.jig' -exec rm -rf" admitGreeter.script
      && contains "cp -rT" admitGreeter.script
      && contains "if [[] -e \"[$]src/.jig\" []]; then" admitGreeter.script;
    "admission reviews with the admission unit's host.toml" =
      contains "exec ${jigPackage}/bin/jig -C \"[$]dest\" --config ${store}/[^ ]*-jig-host-admit-greeter.toml review --yes" admitGreeter.script
      && admitGreeter.serviceConfig.LoadCredential == jigService.serviceConfig.LoadCredential;
    "admit = false copies without reviewing" =
      contains "cp -rT" admitDrafts.script && !(contains "review --yes" admitDrafts.script);
    "served projects get a directory under the state directory" =
      let
        rules = s.systemd.tmpfiles.settings."10-jig-projects";
      in
      rules."/var/lib/jig/projects" == dir "jig" "jig" "0750"
      && rules."/var/lib/jig/projects/greeter" == dir "jig" "jig" "0750"
      && rules."/var/lib/jig/projects/greeter/.jig" == dir "jig" "jig" "0700";
    "invalid server configurations fail the right assertions" = {
      expr = failedAssertions (
        jig (
          serverCfg
          // {
            settings = userCfg.settings;
            server = removeAttrs serverCfg.server [ "tokenFile" ];
            secrets."bad/name" = "/var/keys/x";
            projects = serverCfg.projects // {
              Upper.source = greeterSrc;
              alices = {
                source = greeterSrc;
                user = "alice";
              };
            };
          }
        ) [ users ]
      );
      expected = [
        "services.jig.projects.Upper: a served project's name must be a LocalName (`[a-z0-9]+(-[a-z0-9]+)*`, at most 64 characters)"
        "services.jig.projects.alices.user: a served project belongs to `jig`, not `alice`"
        "services.jig.server: `tcp` and `tokenFile` go together (TCP always requires a bearer token)"
        "services.jig.secrets.bad/name: the name must match `[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}` (a systemd credential ID)"
      ];
    };
    "a token file without tcp is refused" = elem "services.jig.server: `tcp` and `tokenFile` go together (TCP always requires a bearer token)" (
      failedAssertions (jig (serverCfg // { server = removeAttrs serverCfg.server [ "tcp" ]; }) [ users ])
    );
    "a served project without the server is refused" = {
      expr = failedAssertions (userWith { projects.greeter.source = greeterSrc; });
      expected = [
        "services.jig.projects.greeter.user: no user `jig` in users.users"
        "services.jig.projects.greeter.source: a served project needs services.jig.server.enable"
      ];
    };
    "a refused configuration does not build" =
      !builds (jig (serverCfg // { server = removeAttrs serverCfg.server [ "tokenFile" ]; }) [ users ]);

    # ---- the server's bounds, through the options ----------------------------
    # Each pair differs only in the value at its bound and one past it;
    # past it, the option's type or an assertion refuses the build.
    "agent.model of 256 characters builds, 257 is refused" =
      builds (serverWith { agent.model = repeat 256 "m"; })
      && !builds (serverWith { agent.model = repeat 257 "m"; });
    "agent.model of 256 characters builds on a user host, 257 is refused" =
      builds (userWith { agent.model = repeat 256 "m"; })
      && !builds (userWith { agent.model = repeat 257 "m"; });
    "agent.baseUrl of 4096 characters builds, 4097 is refused" =
      let
        url = n: "https://h/" + repeat (n - 10) "a";
      in
      builds (serverWith { agent.baseUrl = url 4096; }) && !builds (serverWith { agent.baseUrl = url 4097; });
    "agent.baseUrl over http builds only to a loopback host" =
      builds (serverWith { agent.baseUrl = "http://localhost:8080/v1"; })
      && !builds (serverWith { agent.baseUrl = "http://api.example.org/v1"; });
    "server.maxActiveRuns of 1 builds, 0 is refused" =
      builds (serverWith { server.maxActiveRuns = 1; }) && !builds (serverWith { server.maxActiveRuns = 0; });
    "server.maxQueuedRuns of 1 builds, 0 is refused" =
      builds (serverWith { server.maxQueuedRuns = 1; }) && !builds (serverWith { server.maxQueuedRuns = 0; });
    "server.envelopesAhead of 0 builds, -1 is refused" =
      builds (serverWith { server.envelopesAhead = 0; }) && !builds (serverWith { server.envelopesAhead = -1; });
    "server.tcp port 65535 builds, 65536 is refused" =
      builds (serverWith { server.tcp = "127.0.0.1:65535"; })
      && !builds (serverWith { server.tcp = "127.0.0.1:65536"; });
    # The service holds no capabilities: it cannot bind below 1024.
    "server.tcp port 1024 builds, 1023 is refused" =
      builds (serverWith { server.tcp = "localhost:1024"; })
      && !builds (serverWith { server.tcp = "localhost:1023"; })
      && !builds (serverWith { server.tcp = "localhost:443"; });
    "server.maxConnections, headerTimeout and bodyTimeout reach [serve], and LimitNOFILE makes room" =
      let
        host = serverWith {
          server.maxConnections = 100000;
          server.headerTimeout = "5s";
          server.bodyTimeout = "2m";
        };
        serve = (hostToml host).serve;
      in
      serve.max-connections == 100000
      && serve.header-timeout == "5s"
      && serve.body-timeout == "2m"
      && elem "LimitNOFILE=101024" (unitLines host "jig.service")
      && !builds (serverWith { server.maxConnections = 0; })
      && !builds (serverWith { server.headerTimeout = "1d"; })
      && !builds (serverWith { server.bodyTimeout = "soon"; });
    "server.shutdownGrace in hours builds, in days is refused" =
      builds (serverWith { server.shutdownGrace = "1h"; })
      && !builds (serverWith { server.shutdownGrace = "1d"; });
    "retention.maxAge of 3650d builds, 3651d and 30 days are refused" =
      builds (serverWith { retention.maxAge = "3650d"; })
      && !builds (serverWith { retention.maxAge = "3651d"; })
      && !builds (serverWith { retention.maxAge = "30 days"; })
      && !builds (serverWith { retention.maxAge = "0d"; });
    "retention.maxRuns of 1 builds, 0 is refused" =
      builds (serverWith { retention.maxRuns = 1; }) && !builds (serverWith { retention.maxRuns = 0; });
    "retention without a limit is refused" =
      !builds (serverWith { retention.interval = "1m"; })
      && builds (serverWith { retention.packetsMaxAge = "7d"; });
    "retention renders [retention] in the served host.toml" = {
      expr =
        (hostToml (serverWith {
          retention = {
            maxAge = "30d";
            maxRuns = 10000;
            keyWindow = "12h";
            interval = "1m";
          };
        })).retention;
      expected = {
        max-age = "30d";
        max-runs = 10000;
        key-window = "12h";
        interval = "1m";
      };
    };
    "retention reaches a user host's host.toml, and none renders no table" = {
      expr = [
        (hostToml (userWith { retention.maxRuns = 5; })).retention
        ((hostToml userHost) ? retention)
      ];
      expected = [
        { max-runs = 5; }
        false
      ];
    };
    "a served project named with 64 characters builds, 65 is refused" =
      builds (serverWith { projects.${repeat 64 "p"}.source = greeterSrc; })
      && !builds (serverWith { projects.${repeat 65 "p"}.source = greeterSrc; });
    "a secret named with 64 characters builds, 65 is refused" =
      builds (serverWith { secrets.${repeat 64 "s"} = "/var/keys/s"; })
      && !builds (serverWith { secrets.${repeat 65 "s"} = "/var/keys/s"; });
    "worker.concurrency of 1 builds, 0 is refused" =
      builds (workerWith { worker.concurrency = 1; })
      && !builds (workerWith { worker.concurrency = 0; });
    "worker.count of 0 builds, -1 is refused" =
      builds (workerWith { worker.count = 0; })
      && !builds (workerWith { worker.count = -1; });
    "a project path with .. is refused" =
      !builds (userWith { projects.intake.path = "/srv/../intake"; });
    "an unknown provider kind is refused" =
      !builds (
        jig (
          userCfg
          // {
            settings = settings // {
              providers = [
                {
                  name = "py";
                  kind = "python";
                  path = "/opt/p";
                }
              ];
            };
          }
        ) [ users ]
      );

    # Keys never enter the store: a store path, or a Nix path (which would be
    # copied there), is refused by the options' types.
    "agent.apiKeyFile in the store is refused" =
      !builds (serverWith { agent.apiKeyFile = "${store}/00000000000000000000000000000000-key"; });
    "agent.apiKeyFile as a Nix path is refused" = !builds (serverWith { agent.apiKeyFile = ./tests.nix; });
    "server.tokenFile in the store is refused" =
      !builds (serverWith { server.tokenFile = "${store}/00000000000000000000000000000000-token"; });
    "a secret in the store is refused" =
      !builds (serverWith { secrets.stored = "${store}/00000000000000000000000000000000-secret"; });
    "settings.agent.api-key-file in the store is refused" =
      !builds (
        userWith { settings.agent.api-key-file = "${store}/00000000000000000000000000000000-key"; }
      );
    "a provider secret in the store is refused" =
      !builds (
        jig (
          userCfg
          // {
            settings = userCfg.settings // {
              providers = [
                {
                  name = "kv";
                  kind = "wasm";
                  path = "/opt/kv.wasm";
                  secrets.token = "${store}/00000000000000000000000000000000-token";
                }
              ];
            };
          }
        ) [ users ]
      );
    "a database password in the store, or in the URL, is refused" =
      !builds (serverWith { server.database = database // { passwordFile = "${store}/0-pw"; }; })
      && !builds (serverWith { server.database.url = "postgresql://jig:secret@db/jig"; });

    # ---- PostgreSQL: serve --database and workers ----------------------------
    "server.database renders [database] with the credential path" = {
      expr = (unitToml (serverWith { server.database = database; }) "jig.service").database;
      expected = {
        inherit (database) url;
        password-file = "${serveCreds}/database-password";
      };
    };
    "server.database's password reaches jig.service as a credential" = elem "LoadCredential=database-password:/var/keys/jig-db" (
      unitLines (serverWith { server.database = database; }) "jig.service"
    );
    "server TLS files reach jig.service as credentials and [serve] names them" =
      let
        host = serverWith {
          server.tcp = "0.0.0.0:8443";
          server.tlsCertFile = "/var/lib/acme/jig.example.org/fullchain.pem";
          server.tlsKeyFile = "/var/lib/acme/jig.example.org/key.pem";
        };
      in
      {
        expr = {
          credentials = filter (lib.hasPrefix "LoadCredential=serve-") (unitLines host "jig.service");
          serve = removeAttrs (unitToml host "jig.service").serve [
            "socket"
            "max-active-runs"
            "max-queued-runs"
            "envelopes-ahead"
            "shutdown-grace"
            "max-connections"
            "header-timeout"
            "body-timeout"
          ];
        };
        expected = {
          credentials = [
            "LoadCredential=serve-token:/var/keys/jig-token"
            "LoadCredential=serve-tls-cert:/var/lib/acme/jig.example.org/fullchain.pem"
            "LoadCredential=serve-tls-key:/var/lib/acme/jig.example.org/key.pem"
          ];
          serve = {
            tcp = "0.0.0.0:8443";
            token-file = "${serveCreds}/serve-token";
            tls-cert = "${serveCreds}/serve-tls-cert";
            tls-key = "${serveCreds}/serve-tls-key";
          };
        };
      };
    "server.tcp off loopback builds only with TLS or insecurePlainHttp" =
      let
        tls = {
          tlsCertFile = "/var/lib/acme/j/fullchain.pem";
          tlsKeyFile = "/var/lib/acme/j/key.pem";
        };
      in
      all (tcp: builds (serverWith { server.tcp = tcp; })) [
        "127.0.0.1:8480"
        "127.1.2.3:8480"
        "[::1]:8480"
        "localhost:8480"
      ]
      && all (tcp: !builds (serverWith { server.tcp = tcp; })) [
        "0.0.0.0:8480"
        "[::]:8480"
        "10.0.0.1:8480"
        "jig.example.org:8480"
      ]
      && builds (serverWith { server = tls // { tcp = "0.0.0.0:8480"; }; })
      && builds (serverWith { server = { tcp = "0.0.0.0:8480"; insecurePlainHttp = true; }; })
      && (hostToml (serverWith { server = { tcp = "0.0.0.0:8480"; insecurePlainHttp = true; }; }))
        .serve.insecure-plain-http;
    "server TLS refusals: half a pair, no tcp, and TLS with insecurePlainHttp" = {
      expr = map (server: failedAssertions (serverWith { inherit server; })) [
        { tlsCertFile = "/var/keys/c.pem"; }
        {
          tcp = null;
          tokenFile = null;
          tlsCertFile = "/var/keys/c.pem";
          tlsKeyFile = "/var/keys/k.pem";
        }
        {
          tlsCertFile = "/var/keys/c.pem";
          tlsKeyFile = "/var/keys/k.pem";
          insecurePlainHttp = true;
        }
      ];
      expected = [
        [ "services.jig.server: `tlsCertFile` and `tlsKeyFile` go together" ]
        [ "services.jig.server: `tlsCertFile` and `tlsKeyFile` serve the TCP listener, so they require `tcp`" ]
        [ "services.jig.server: `insecurePlainHttp` and `tlsCertFile` contradict each other: set one" ]
      ];
    };
    "workers: one unit each, claiming with the configured concurrency" =
      attrNames workerServices == [
        "jig-worker-1"
        "jig-worker-2"
      ]
      && contains "^ExecStart=${jigPackage}/bin/jig worker --config ${store}/[^ ]*-jig-host-worker-2.toml --concurrency 3 --cache /var/cache/jig-worker-2$" workerHost.config.systemd.units."jig-worker-2.service".text;
    "workers: the database password is a credential, the cache owner-private" =
      let
        lines = unitLines workerHost "jig-worker-1.service";
      in
      filter (lib.hasPrefix "LoadCredential=") lines == [
        "LoadCredential=agent-key:/var/keys/alice-agent"
        "LoadCredential=database-password:/var/keys/jig-db"
        "LoadCredential=provider-kv-token:/var/keys/kv-token"
      ]
      && all (l: elem l lines) [
        "CacheDirectory=jig-worker-1"
        "CacheDirectoryMode=0700"
        "User=jig"
        "NoNewPrivileges=true"
        "After=network-online.target postgresql.service"
      ];
    "a valid worker configuration builds" = builds workerHost;
    "workers without a database are refused" = {
      expr = failedAssertions (workerWith { worker.database = null; });
      expected = [ "services.jig.worker.database: workers need the database URL" ];
    };
    "no workers by default" = workerServices != { } && !any (lib.hasPrefix "jig-worker-") (attrNames s.systemd.services);

    # ---- issue 54: workers reach the Agent -----------------------------------
    "workers read [agent] with their own key credential" =
      let
        lines = unitLines workerHost "jig-worker-1.service";
      in
      (unitToml workerHost "jig-worker-1.service").agent == {
        api = "chat-completions";
        model = "some-model";
        api-key-file = "/run/credentials/jig-worker-1.service/agent-key";
      }
      && elem "LoadCredential=agent-key:/var/keys/alice-agent" lines;
    "workers read the secrets and the providers' secrets as credentials, not the server's tables" =
      let
        host = serverWith {
          server.database = database;
          worker.count = 1;
        };
        toml = unitToml host "jig-worker-1.service";
        creds = "/run/credentials/jig-worker-1.service";
      in
      toml.secrets.deploy == "${creds}/secret-deploy"
      && (builtins.head toml.providers).secrets.token == "${creds}/provider-kv-token"
      && !(toml ? serve)
      && !(toml ? projects)
      && !(elem "LoadCredential=serve-token:/var/keys/jig-token" (unitLines host "jig-worker-1.service"));

    # ---- issue 54: settings and the typed options, one configuration -------
    "settings.serve and settings.secrets survive server.enable" =
      let
        host = serverWith {
          settings.serve.console = true;
          settings.secrets.extra = "/var/keys/extra";
        };
        toml = unitToml host "jig.service";
      in
      toml.serve.console
      && toml.serve.max-active-runs == 4
      && toml.secrets == {
        deploy = "${serveCreds}/secret-deploy";
        extra = "${serveCreds}/secret-extra";
      }
      && elem "LoadCredential=secret-extra:/var/keys/extra" (unitLines host "jig.service");
    "a key set in settings and by a typed option must agree" =
      !builds (serverWith { settings.serve.max-active-runs = 8; })
      && builds (serverWith { settings.serve.max-active-runs = 4; })
      && !builds (serverWith { settings.agent.model = "another-model"; })
      && !builds (serverWith { settings.database.url = "postgresql:///other"; server.database = database; });
    "a secret file set through settings is refused in the store" =
      !builds (serverWith { settings.secrets.stored = "${store}/00000000000000000000000000000000-secret"; });
    "a provider secret whose credential ID is not one is refused" = {
      expr = failedAssertions (
        userWith {
          settings.providers = [
            {
              name = "kv";
              kind = "wasm";
              path = "/opt/kv.wasm";
              secrets."a/b" = "/var/keys/x";
            }
          ];
        }
      );
      expected = [
        "services.jig.settings: the credential `provider-kv-a/b` for /var/keys/x is not a systemd credential ID (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}`): rename the provider or the secret"
      ];
    };

    # ---- issue 54: the queue deploys whole ------------------------------------
    "database.createLocally creates the database and orders the units after it" =
      let
        host = serverWith {
          database.createLocally = true;
          worker.count = 2;
        };
        h = host.config;
        url = "postgresql:///jig?host=/run/postgresql&user=jig";
      in
      builds host
      && h.services.postgresql.enable
      && h.services.postgresql.ensureDatabases == [ "jig" ]
      && h.services.postgresql.ensureUsers == [
        {
          name = "jig";
          ensureDBOwnership = true;
        }
      ]
      && (unitToml host "jig.service").database == { inherit url; }
      && (unitToml host "jig-worker-2.service").database == { inherit url; }
      && all (unit: elem "postgresql.target" h.systemd.services.${unit}.after && elem "postgresql.target" h.systemd.services.${unit}.requires) [
        "jig"
        "jig-worker-1"
        "jig-worker-2"
      ];
    "jig.service is ordered after PostgreSQL when it has a database" =
      elem "postgresql.service" (serverWith { server.database = database; }).config.systemd.services.jig.after
      && !(elem "postgresql.service" jigService.after);
    "workers default to the server's database" =
      let
        host = serverWith {
          server.database = database;
          worker.count = 1;
        };
      in
      host.config.services.jig.worker.database == database
      && (unitToml host "jig-worker-1.service").database == {
        inherit (database) url;
        password-file = "/run/credentials/jig-worker-1.service/database-password";
      };
    "jig.service and the workers restart after 5 s, not 100 ms" =
      elem "RestartSec=5s" jigUnit
      && elem "Restart=on-failure" jigUnit
      && elem "RestartSec=5s" (unitLines workerHost "jig-worker-1.service");
    "the workers are parts of jig-workers.target, which multi-user.target wants" =
      let
        w = workerHost.config.systemd;
      in
      w.targets.jig-workers.wantedBy == [ "multi-user.target" ]
      && all (n: w.services.${n}.wantedBy == [ "jig-workers.target" ] && elem "PartOf=jig-workers.target" (unitLines workerHost "${n}.service")) (attrNames workerServices)
      && !(s.systemd.targets ? jig-workers);
    "a host with workers and no server has the jig user the workers run as" =
      workerHost.config.users.users.jig.isSystemUser && workerHost.config.users.groups ? jig;

    # ---- issue 54: capping all Runs, relaxing hardening -----------------------
    "every jig unit runs in jig.slice, which runs caps" =
      let
        host = serverWith {
          runs = {
            memoryMax = "8G";
            tasksMax = 4096;
            cpuQuota = "400%";
          };
          worker = {
            count = 1;
            inherit database;
          };
        };
      in
      all (u: elem "Slice=jig.slice" (unitLines host u)) [
        "jig.service"
        "jig-admit-greeter.service"
        "jig-worker-1.service"
      ]
      && unitLines host "jig.slice" == [
        "[Unit]"
        "Description=jig FLOW host: all Runs of the jig units"
        "[Slice]"
        "CPUQuota=400%"
        "MemoryMax=8G"
        "TasksMax=4096"
        ""
      ]
      && unitLines serverHost "jig.slice" == [
        "[Unit]"
        "Description=jig FLOW host: all Runs of the jig units"
        "[Slice]"
        ""
      ]
      && !builds (serverWith { runs.memoryMax = "8 GB"; })
      && !builds (serverWith { runs.tasksMax = 0; })
      && !builds (serverWith { runs.cpuQuota = "4"; });
    "an operator relaxes one hardening setting without mkForce" =
      let
        host = jig serverCfg [
          users
          { systemd.services.jig.serviceConfig.ProtectSystem = "full"; }
        ];
      in
      builds host
      && elem "ProtectSystem=full" (unitLines host "jig.service")
      && !(elem "ProtectSystem=strict" (unitLines host "jig.service"));

    # ---- test.nix: the VM test's nodes, as NixOS evaluates them -------------
    "the VM test has the machine, server and queued nodes" =
      attrNames vmTest.nodes == [
        "machine"
        "queued"
        "server"
      ];
    "every VM test node builds" = all builds [
      vmMachine
      vmServer
      vmQueued
    ];
    "machine: host.toml is what the test script asserts" =
      let
        toml = hostToml vmMachine;
      in
      !(toml ? agent)
      && !(toml.runtimes ? bun)
      && !(toml.runtimes ? deno)
      && contains "bwrap = \"${toml.containment.bwrap}\"" vmTestScript
      && contains "python = \"${toml.runtimes.python}\"" vmTestScript
      && vmMachine.config.systemd.tmpfiles.settings."10-jig-projects"."/home/alice/intake" == dir "alice" "users" "0750";
    "server: a served project, the Agent and the key outside the store" =
      let
        toml = unitToml vmServer "jig.service";
        jigCfg = vmServer.config.services.jig;
      in
      jigCfg.projects.review.source == root + "/examples/review"
      && pathExists (root + "/examples/review/bindings/reviewer.ts")
      && vmServer.config.systemd.services ? jig-admit-review
      && toml.agent.api-key-file == "/run/credentials/jig.service/agent-key"
      && toml.serve.socket == "/run/jig/jig.sock"
      && !(lib.hasInfix "/var/keys" (builtins.toJSON toml))
      && elem "jig.service" vmServer.config.systemd.services.fake-agent.before
      && contains "'api-key-file = \"${toml.agent.api-key-file}\"' in serve_toml" vmTestScript
      && contains "'api-key-file = \"${(hostToml vmServer).agent.api-key-file}\"' in host_toml" vmTestScript
      && contains "--unix-socket ${toml.serve.socket}" vmTestScript
      && contains "http://jig/v1/projects/review/runs" vmTestScript;
    "server: a contained flow.ts Run, TCP with a token, the slice and an exposure ceiling" =
      let
        toml = unitToml vmServer "jig.service";
      in
      vmServer.config.systemd.services ? jig-admit-repair
      && pathExists (root + "/examples/repair/flows/repair/flow.ts")
      && pathExists (root + "/examples/repair/input.json")
      && contains "\"target\": \"binding:fixer\"" vmTestScript
      && toml.serve.tcp == "127.0.0.1:8480"
      && toml.serve.token-file == "/run/credentials/jig.service/serve-token"
      && elem "LoadCredential=serve-token:/var/keys/jig-token" (unitLines vmServer "jig.service")
      && contains "Bearer test-token' http://${toml.serve.tcp}/v1/health" vmTestScript
      && contains "/sys/fs/cgroup/jig.slice/jig.service/cgroup.controllers" vmTestScript
      && contains "systemd-analyze security jig.service --no-pager --threshold=60\"[)]$" vmTestScript;
    "queued: PostgreSQL before jig.service, two workers, a served project" =
      let
        q = vmQueued.config;
      in
      q.services.jig.database.createLocally
      && q.services.postgresql.enable
      && q.services.postgresql.ensureDatabases == [ "jig" ]
      && elem "postgresql.target" q.systemd.services.jig.after
      && elem "jig.socket" q.systemd.services.jig.requires
      && elem "postgresql.target" q.systemd.services.jig.requires
      && q.systemd.services ? jig-worker-1
      && q.systemd.services ? jig-worker-2
      && q.systemd.services ? jig-admit-triage
      && pathExists (root + "/examples/triage/flows/code/flow.py")
      && (unitToml vmQueued "jig.service").database.url == q.services.jig.worker.database.url
      && (unitToml vmQueued "jig-worker-1.service").database.url == q.services.jig.worker.database.url
      && contains "systemctl restart jig-workers.target" vmTestScript
      && (unitToml vmQueued "jig-worker-1.service").agent.api-key-file == "/run/credentials/jig-worker-1.service/agent-key"
      && contains "'api-key-file = \"/run/credentials/jig-worker-1.service/agent-key\"' in worker_toml" vmTestScript
      && q.systemd.services ? jig-admit-review
      && contains "jig-worker-2.service" vmTestScript
      && contains "http://jig/v1/projects/triage/runs" vmTestScript;
  };

  results = lib.mapAttrsToList (
    name: case:
    let
      c' =
        if isBool case then
          {
            expr = case;
            expected = true;
          }
        else
          case;
    in
    {
      inherit name;
      ok = c'.expr == c'.expected;
      result = c'.expr;
      inherit (c') expected;
    }
  ) cases;
in
{
  passed = map (r: r.name) (filter (r: r.ok) results);
  failed = map (r: removeAttrs r [ "ok" ]) (filter (r: !r.ok) results);
}
