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
        # A derivation's attributes, with a store path to interpolate.
        buildRustPackage = attrs: attrs // { outPath = "/nix/store/stub-${attrs.pname}"; };
      };
      inherit (stubs) formats;
      makeBinaryWrapper = stubs.fakeDrv "make-binary-wrapper";
      installShellFiles = stubs.fakeDrv "install-shell-files";
      python3 = stubs.fakeDrv "python3";
      bubblewrap = stubs.fakeDrv "bubblewrap";
    };
  package = packageWith cargoWorkspace.package.rust-version;
  # The VM test's script, for a machine node with stub tool paths.
  vmTestScript = outputs.checks.x86_64-linux.module.testScript {
    nodes = {
      machine.services.jig = {
        package.version = "0";
        settings.containment.bwrap = "/b";
        settings.runtimes.python = "/p";
      };
    };
  };
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
      intake = userProject {
        path = "/srv/jig/intake";
        user = "alice";
      };
      notes = userProject {
        path = "/srv/jig/notes";
        user = "bob";
      };
    };
    server = serverOff;
    worker = {
      count = 0;
      concurrency = 1;
      database = null;
    };
    agent = null;
    secrets = { };
  };

  # Two workers against one PostgreSQL with a password credential.
  workerCfg = goodCfg // {
    worker = {
      count = 2;
      concurrency = 3;
      database = {
        url = "postgresql:///jig?host=/run/postgresql&user=jig";
        passwordFile = "/var/keys/jig-db";
      };
    };
  };
  workerServices = (builtins.elemAt (servicesOf workerCfg) 2).content;

  # A project as the submodule would complete it.
  userProject =
    p:
    {
      group = null;
      source = null;
      admit = true;
    }
    // p;
  servedProject =
    name: p:
    {
      path = "/var/lib/jig/projects/${name}";
      user = "jig";
      group = null;
      source = "/nix/store/00000000000000000000000000000000-${name}-src";
      admit = true;
    }
    // p;

  serverOff = {
    enable = false;
    maxActiveRuns = null;
    maxQueuedRuns = null;
    shutdownGrace = "30s";
    tcp = null;
    tokenFile = null;
  };

  # The server with every option set: two served projects (one admitted,
  # one copied only), the Agent, a secret and TCP with a token.
  serverCfg = goodCfg // {
    settings = goodCfg.settings // {
      agent = null;
    };
    server = serverOff // {
      enable = true;
      maxActiveRuns = 4;
      maxQueuedRuns = 64;
      shutdownGrace = "2m";
      tcp = "127.0.0.1:8480";
      tokenFile = "/var/keys/jig-token";
    };
    agent = {
      api = "chat-completions";
      baseUrl = "http://127.0.0.1:8080/v1";
      model = "some-model";
      apiKeyFile = "/var/keys/jig-agent";
    };
    secrets.deploy = "/var/keys/deploy";
    projects = goodCfg.projects // {
      greeter = servedProject "greeter" { };
      drafts = servedProject "drafts" { admit = false; };
    };
  };

  badServerCfg = serverCfg // {
    settings = goodCfg.settings;
    server = serverCfg.server // {
      tokenFile = null;
    };
    agent = serverCfg.agent // {
      apiKeyFile = "/nix/store/00000000000000000000000000000000-key";
    };
    secrets = {
      "bad/name" = "/var/keys/x";
      stored = "/nix/store/00000000000000000000000000000000-secret";
    };
    projects = serverCfg.projects // {
      Upper = servedProject "Upper" { };
      alices = servedProject "alices" { user = "alice"; };
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
      again = userProject {
        path = "/srv/jig/intake";
        user = "mallory";
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

  # The server side of the module, evaluated with serverCfg.
  serverConfig = configOf serverCfg;
  servicesOf = cfg: (configOf cfg).systemd.services.contents;
  serverServices = (builtins.elemAt (servicesOf serverCfg) 1).content;
  jigService = serverServices.jig;
  admitGreeter = serverServices.jig-admit-greeter;
  admitDrafts = serverServices.jig-admit-drafts;
  lines = text: filter builtins.isString (builtins.split "\n" text);
  # Does one line of `hay` contain a match of the regex `needle`?
  contains = needle: hay: any (l: builtins.match ".*${needle}.*" l != null) (lines hay);
  # The comment lines right above the first line matching `line`.
  commentAbove =
    line: text:
    let
      before = lines (builtins.head (builtins.split "\n${line}" text));
      go =
        acc: rest:
        if rest == [ ] || builtins.match " *#.*" (builtins.head rest) == null then
          acc
        else
          go (acc + builtins.head rest) (builtins.tail rest);
    in
    go "" (builtins.genList (i: builtins.elemAt before (length before - 1 - i)) (length before));

  serveCreds = "/run/credentials/jig.service";
  expectedServeToml = removeAttrs expectedHostToml [ "agent" ] // {
    agent = {
      api = "chat-completions";
      base-url = "http://127.0.0.1:8080/v1";
      model = "some-model";
      api-key-file = "${serveCreds}/agent-key";
    };
    secrets.deploy = "${serveCreds}/secret-deploy";
    serve = {
      socket = "/run/jig/jig.sock";
      max-active-runs = 4;
      max-queued-runs = 64;
      shutdown-grace = "2m";
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
        "lib"
        "nixosModules"
        "overlays"
        "packages"
      ];
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
      && builtins.match ".*cargo build --release --offline --lib --target wasm32-wasip2.*" built.buildPhase != null
      && builtins.match ".*wasm32-wasip2/release/[*][.]wasm [$]out/lib/.*" built.installPhase != null
      && built.doCheck == false
      && built.meta.description == "kept"
      && !(built ? pkgs);
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
    "the VM test's server node declares a served project, the Agent and the key outside the store" =
      let
        test = outputs.checks.x86_64-linux.module;
        server = test.nodes.server { pkgs = stubs.pkgs "x86_64-linux"; };
        jig = server.services.jig;
        script = vmTestScript;
      in
      server.imports == [ (root + "/nixos-module/default.nix") ]
      && jig.server.enable
      && jig.projects.review.source == root + "/examples/review"
      && pathExists (root + "/examples/review/bindings/reviewer.ts")
      && jigLib.isBaseUrl jig.agent.baseUrl
      && jigLib.isSecretFile jig.agent.apiKeyFile
      && server.systemd.services.fake-agent.wantedBy == [ "multi-user.target" ]
      && contains "--unix-socket /run/jig/jig.sock" script
      && contains "http://jig/v1/projects/review/runs" script;
    "the VM test's queued node runs PostgreSQL, serve --database and two workers, and submits a Run" =
      let
        test = outputs.checks.x86_64-linux.module;
        queued = test.nodes.queued { };
        jig = queued.services.jig;
        script = vmTestScript;
      in
      queued.imports == [ (root + "/nixos-module/default.nix") ]
      && queued.services.postgresql.enable
      && queued.services.postgresql.ensureDatabases == [ "jig" ]
      && jig.server.enable
      && jigLib.isDatabaseUrl jig.server.database.url
      && jig.worker.count == 2
      && jig.worker.database == jig.server.database
      && jig.projects.triage.source == root + "/examples/triage"
      && pathExists (root + "/examples/triage/flows/code/flow.py")
      && contains "jig-worker-2.service" script
      && contains "http://jig/v1/projects/triage/runs" script;
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
    "package installs jig-agent-acp, built alone from its own lock, beside jig" =
      package.passthru.acpWorker.cargoLock.lockFile == root + "/providers/acp/Cargo.lock"
      && package.passthru.acpWorker.pname == "jig-agent-acp"
      && builtins.match ".*install -Dm0555 /nix/store/stub-jig-agent-acp/bin/jig-agent-acp \\$out/bin/jig-agent-acp.*wrapProgram.*" package.postInstall
        != null;
    "package source is the manifest, the lock, the provider WIT world and every member" =
      sourcePaths == [
        (root + "/Cargo.toml")
        (root + "/Cargo.lock")
        (root + "/providers/wit")
      ]
      ++ map (d: root + "/${d}") (jigLib.memberDirs (root + "/Cargo.toml"));
    "package installs the Rust and provider SDK sources under one workspace manifest" =
      builtins.match ".*cp -r sdk-rust flow \\$out/share/jig/.*cp -r providers/sdk providers/wit \\$out/share/jig/providers/.*members = .*\"flow.*\"sdk-rust.*\"providers/sdk.*Cargo.toml > \\$out/share/jig/Cargo.toml.*" package.postInstall
      != null;
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
      (configOf goodCfg).environment.etc."jig/host.toml".source.passthru.toml.value == expectedHostToml;
    "module sets JIG_CONFIG" = (configOf goodCfg).environment.sessionVariables.JIG_CONFIG == "/etc/jig/host.toml";
    "module installs jig and bubblewrap" =
      map (p: p.name) (configOf goodCfg).environment.systemPackages == [ "jig" "bubblewrap" ];
    "module allows unprivileged user namespaces" =
      (configOf goodCfg).security.allowUserNamespaces && (configOf goodCfg).security.unprivilegedUsernsClone;
    "module delegates cgroup controllers to user managers" =
      (builtins.head (servicesOf goodCfg))."user@".serviceConfig.Delegate == "cpu cpuset io memory pids";
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

    # ---- the server --------------------------------------------------------
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

    "durations with each unit are accepted" = all jigLib.isDuration [ "500ms" "30s" "2m" "1h" ];
    "durations without a unit or with another are rejected" = !any jigLib.isDuration [ "30" "1d" "-1s" "1.5s" "" ];
    "durations convert to whole seconds, rounded up" =
      map jigLib.durationSeconds [ "1ms" "1000ms" "1001ms" "30s" "2m" "1h" "010s" ] == [ 1 1 2 30 120 3600 10 ];

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

    "no server: host.toml has no serve, projects, agent credential or secrets" =
      (configOf goodCfg).environment.etc."jig/host.toml".source.passthru.toml.value == expectedHostToml;
    "no server: no socket, no jig user, no server units" =
      !(configOf goodCfg).systemd.sockets.jig.condition
      && !(configOf goodCfg).users.users.condition
      && !(builtins.elemAt (servicesOf goodCfg) 1).condition;
    "no server: secrets name the operator's files" =
      (configOf (goodCfg // { secrets.deploy = "/var/keys/deploy"; }))
      .environment.etc."jig/host.toml".source.passthru.toml.value.secrets
      == { deploy = "/var/keys/deploy"; };
    "server host.toml has serve, projects and credential paths only" =
      serverConfig.environment.etc."jig/host.toml".source.passthru.toml.value == expectedServeToml;
    "host.toml is checked by jig config check at build time" =
      let
        checked = serverConfig.environment.etc."jig/host.toml".source;
      in
      contains "^/nix/store/[^ ]*-jig/bin/jig config check ${checked.passthru.toml}$" checked.script
      && contains "^cp ${checked.passthru.toml} [$]out$" checked.script;
    "jig.service serves the checked host.toml over the socket" =
      jigService.serviceConfig.ExecStart
      == "${stubs.fakeDrv "jig"}/bin/jig serve --config ${serverConfig.environment.etc."jig/host.toml".source}"
      && jigService.requires == [ "jig.socket" ]
      && elem "jig.socket" jigService.after;
    "jig.socket listens on the socket for the jig group" =
      serverConfig.systemd.sockets.jig.condition
      && serverConfig.systemd.sockets.jig.content.listenStreams == [ "/run/jig/jig.sock" ]
      && serverConfig.systemd.sockets.jig.content.socketConfig == {
        SocketUser = "jig";
        SocketGroup = "jig";
        SocketMode = "0660";
        DirectoryMode = "0755";
      };
    "jig.service runs as the jig system user with its state directory" =
      jigService.serviceConfig.User == "jig"
      && jigService.serviceConfig.Group == "jig"
      && jigService.serviceConfig.StateDirectory == "jig"
      && serverConfig.users.users.content.jig.isSystemUser
      && serverConfig.users.users.content.jig.group == "jig"
      && serverConfig.users.groups.content ? jig;
    "jig.service delegates cpu, memory and pids" =
      jigService.serviceConfig.Delegate == "cpu memory pids" && jigService.serviceConfig.KillMode == "control-group";
    "jig.service stops within the grace plus the margin" = jigService.serviceConfig.TimeoutStopSec == "150s";
    "jig.service gets the key, the secret and the token as credentials" =
      jigService.serviceConfig.LoadCredential == [
        "agent-key:/var/keys/jig-agent"
        "secret-deploy:/var/keys/deploy"
        "serve-token:/var/keys/jig-token"
      ];
    "jig.service is hardened where bubblewrap allows" =
      let
        c = jigService.serviceConfig;
      in
      c.NoNewPrivileges
      && c.CapabilityBoundingSet == ""
      && c.ProtectSystem == "strict"
      && c.ProtectHome
      && c.PrivateTmp
      && c.PrivateDevices
      && c.ProtectKernelModules
      && c.ProtectKernelLogs
      && c.RestrictSUIDSGID
      && c.SystemCallArchitectures == "native"
      && elem "@system-service" c.SystemCallFilter
      && elem "@mount" c.SystemCallFilter;
    "jig.service relaxes only what bubblewrap needs" =
      let
        c = jigService.serviceConfig;
      in
      !c.RestrictNamespaces
      && !c.PrivateUsers
      && !c.ProtectKernelTunables
      && c.ProtectProc == "default"
      && c.ProcSubset == "all"
      && !c.ProtectControlGroups
      && !c.MemoryDenyWriteExecute
      && elem "AF_NETLINK" c.RestrictAddressFamilies;
    "every relaxation in the module is commented" =
      let
        text = readFile ../default.nix;
      in
      all (k: builtins.match ".*# Relaxed.*" (commentAbove " *${k} = [^;]*;" text) != null) [
        "RestrictNamespaces"
        "PrivateUsers"
        "ProtectKernelTunables"
        "ProtectControlGroups"
        "MemoryDenyWriteExecute"
        "SystemCallFilter"
      ]
      && builtins.match ".*AF_NETLINK: bubblewrap.*" (commentAbove " *RestrictAddressFamilies = [[]" text) != null;
    "jig.service may write the served projects" =
      jigService.serviceConfig.ReadWritePaths == [
        "/var/lib/jig/projects/drafts"
        "/var/lib/jig/projects/greeter"
      ];
    "one admission unit per served project, none for user projects" =
      attrNames serverServices == [
        "jig"
        "jig-admit-drafts"
        "jig-admit-greeter"
      ];
    "admission runs before jig.service without holding it back" =
      admitGreeter.before == [ "jig.service" ]
      && elem "jig.service" admitGreeter.wantedBy
      && !(elem "jig-admit-greeter.service" jigService.requires)
      && admitGreeter.serviceConfig.Type == "oneshot"
      && admitGreeter.serviceConfig.RemainAfterExit;
    "admission re-runs when the source changes" =
      admitGreeter.restartTriggers == [ "/nix/store/00000000000000000000000000000000-greeter-src" ]
      && contains "src='/nix/store/00000000000000000000000000000000-greeter-src'" admitGreeter.script;
    "admission copies the source and keeps the protected state" =
      contains "dest='/var/lib/jig/projects/greeter'" admitGreeter.script
      && contains "! -name '.jig' -exec rm -rf" admitGreeter.script
      && contains "cp -rT" admitGreeter.script
      && contains "if [[] -e \"[$]src/.jig\" []]; then" admitGreeter.script;
    "admission reviews with the admission unit's host.toml" =
      contains "exec /nix/store/[^ ]*-jig/bin/jig -C \"[$]dest\" --config /nix/store/[^ ]*-jig-host-admit-greeter.toml review --yes" admitGreeter.script
      && admitGreeter.serviceConfig.LoadCredential == jigService.serviceConfig.LoadCredential;
    "an admission unit's host.toml names that unit's credentials" =
      let
        creds = "/run/credentials/jig-admit-greeter.service";
      in
      (jigLib.serverTables {
        credentials = creds;
        inherit (serverCfg) agent secrets server;
        projects = { };
      }) == {
        agent = expectedServeToml.agent // {
          api-key-file = "${creds}/agent-key";
        };
        secrets.deploy = "${creds}/secret-deploy";
        serve = expectedServeToml.serve // {
          token-file = "${creds}/serve-token";
        };
      };
    "admit = false copies without reviewing" =
      contains "cp -rT" admitDrafts.script && !(contains "review --yes" admitDrafts.script);
    "served projects get a directory under the state directory" =
      let
        rules = (configOf serverCfg).systemd.tmpfiles.settings."10-jig-projects".content.contents;
      in
      builtins.head rules == {
        "/var/lib/jig/projects".d = {
          user = "jig";
          group = "jig";
          mode = "0750";
        };
      }
      && elem {
        "/var/lib/jig/projects/greeter".d = {
          user = "jig";
          group = "jig";
          mode = "0750";
        };
        "/var/lib/jig/projects/greeter/.jig".d = {
          user = "jig";
          group = "jig";
          mode = "0700";
        };
      } rules;
    "a valid server configuration passes every assertion" = failedAssertions serverCfg == [ ];
    "invalid server configurations fail the right assertions" =
      failedAssertions badServerCfg == [
        "services.jig.projects.Upper: a served project's name must be a LocalName (`[a-z0-9]+(-[a-z0-9]+)*`, at most 64 characters)"
        "services.jig.projects.alices.user: a served project belongs to `jig`, not `alice`"
        "services.jig: set services.jig.agent or services.jig.settings.agent, not both"
        "services.jig.agent.apiKeyFile: must be an absolute path outside the Nix store (the store is world-readable)"
        "services.jig.server: `tcp` and `tokenFile` go together (TCP always requires a bearer token)"
        "services.jig.secrets.bad/name: the name must match `[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}` and the file be an absolute path outside the Nix store"
        "services.jig.secrets.stored: the name must match `[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}` and the file be an absolute path outside the Nix store"
      ];
    "a token in the store is refused" =
      elem "services.jig.server.tokenFile: must be an absolute path outside the Nix store (the store is world-readable)" (
        failedAssertions (
          serverCfg
          // {
            server = serverCfg.server // {
              tokenFile = "/nix/store/00000000000000000000000000000000-token";
            };
          }
        )
      );
    "workers: one unit each, claiming with the configured concurrency" =
      attrNames workerServices == [
        "jig-worker-1"
        "jig-worker-2"
      ]
      && contains "bin/jig worker --config .* --concurrency 3 --cache /var/cache/jig-worker-2" workerServices.jig-worker-2.serviceConfig.ExecStart;
    "workers: the database password is a credential, the cache owner-private" =
      workerServices.jig-worker-1.serviceConfig.LoadCredential == [ "database-password:/var/keys/jig-db" ]
      && workerServices.jig-worker-1.serviceConfig.CacheDirectoryMode == "0700"
      && workerServices.jig-worker-1.serviceConfig.User == "jig";
    "workers without a database are refused" = elem "services.jig.worker.database: workers need the database URL" (
      failedAssertions (
        workerCfg
        // {
          worker = workerCfg.worker // {
            database = null;
          };
        }
      )
    );
    "no workers by default" = (builtins.elemAt (servicesOf goodCfg) 2).condition == false;
    "a database URL with a password is refused" =
      !jigLib.isDatabaseUrl "postgresql://jig:secret@db/jig"
      && jigLib.isDatabaseUrl "postgresql://jig@db/jig"
      && jigLib.isDatabaseUrl "postgres:///jig?host=/run/postgresql";
    "server.database renders [database] with the credential path" =
      (jigLib.serverTables {
        credentials = "/run/credentials/jig.service";
        agent = null;
        secrets = { };
        projects = { };
        server = serverCfg.server // {
          database = {
            url = "postgresql:///jig";
            passwordFile = "/var/keys/jig-db";
          };
        };
      }).database == {
        url = "postgresql:///jig";
        password-file = "/run/credentials/jig.service/database-password";
      };
    "server.database's password reaches jig.service as a credential" =
      elem "database-password:/var/keys/jig-db" (jigLib.loadCredentials {
        agent = null;
        secrets = { };
        server = serverCfg.server // {
          database = {
            url = "postgresql:///jig";
            passwordFile = "/var/keys/jig-db";
          };
        };
      });
    "a served project without the server is refused" =
      failedAssertions (
        goodCfg
        // {
          projects.greeter = servedProject "greeter" { };
        }
      ) == [
        "services.jig.projects.greeter.user: no user `jig` in users.users"
        "services.jig.projects.greeter.source: a served project needs services.jig.server.enable"
      ];
  };

  failures = filter (name: !cases.${name}) (attrNames cases);
in
if failures == [ ] then
  attrNames cases
else
  throw "failed:\n  ${concatStringsSep "\n  " failures}"
