# NixOS module `services.jig`: installs the jig FLOW host, writes its host
# configuration to /etc/jig/host.toml, and prepares the kernel and systemd
# features its rootless containment needs (user namespaces, cgroup v2
# delegation to user managers, nix-ld for the real glibc loader).
#
# Without `server.enable` it runs no daemon: jig is a command users run in
# their own projects. With it, `jig serve` runs as the `jig` system user behind
# jig.socket, serving the projects declared with a `source`, each copied into
# the state directory and admitted by its own oneshot unit.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.jig;
  jigLib = import ./lib.nix;
  tomlFormat = pkgs.formats.toml { };

  inherit (lib)
    literalExpression
    mkEnableOption
    mkIf
    mkOption
    types
    ;

  secretFile = types.addCheck types.str jigLib.isSecretFile // {
    description = "absolute path to a file outside the Nix store";
  };

  # A file handed to the server with LoadCredential=. A string, never a Nix
  # path (which would be copied into the world-readable store), and never a
  # store path: the type refuses both, naming the option.
  credentialFile = types.addCheck types.str jigLib.isSecretFile // {
    description = "absolute path to a file outside the Nix store, handed over with LoadCredential";
  };

  baseUrl = types.addCheck types.str jigLib.isBaseUrl // {
    description = "https URL (or http to a loopback host) without userinfo, query or fragment, at most ${toString jigLib.maxBaseUrlLength} characters";
  };

  modelName = types.addCheck types.str jigLib.isModel // {
    description = "model name matching `${jigLib.modelPattern}`";
  };

  positive = types.addCheck types.int jigLib.isPositiveInt // {
    description = "positive integer";
  };

  executable =
    description: default: defaultText:
    mkOption {
      type = types.nullOr types.path;
      inherit default description;
      defaultText = literalExpression defaultText;
    };

  runtimesModule = {
    freeformType = types.attrsOf (types.nullOr types.path);
    options = {
      python =
        executable "Python 3 interpreter for `flow.py` packages; null leaves Python unavailable."
          "${pkgs.python3}/bin/python3"
          ''"''${pkgs.python3}/bin/python3"'';
      node =
        executable "Node.js for `flow.js`/`flow.ts` packages; null leaves it unavailable."
          "${pkgs.nodejs}/bin/node"
          ''"''${pkgs.nodejs}/bin/node"'';
      bun =
        executable "Bun for `flow.ts` packages; null leaves it unavailable."
          "${pkgs.bun}/bin/bun"
          ''"''${pkgs.bun}/bin/bun"'';
      deno =
        executable "Deno for `flow.ts` packages; null leaves it unavailable."
          "${pkgs.deno}/bin/deno"
          ''"''${pkgs.deno}/bin/deno"'';
    };
  };

  containmentModule = {
    freeformType = tomlFormat.type;
    options.bwrap = mkOption {
      type = types.path;
      default = "${cfg.bubblewrapPackage}/bin/bwrap";
      defaultText = literalExpression ''"''${config.services.jig.bubblewrapPackage}/bin/bwrap"'';
      description = ''
        Absolute path of the Bubblewrap executable used for containment.
        `JIG_BWRAP_PATH` in a caller's environment still overrides it.
      '';
    };
  };

  providerModule = {
    options = {
      name = mkOption {
        type = types.nonEmptyStr;
        description = "Provider name, unique within `providers`.";
      };
      kind = mkOption {
        type = types.enum jigLib.providerKinds;
        description = "How the provider is loaded.";
      };
      path = mkOption {
        type = types.nullOr types.path;
        default = null;
        description = "The `.wasm` component or native library; required for `wasm` and `native`, absent for `builtin`.";
      };
      settings = mkOption {
        type = tomlFormat.type;
        default = { };
        example = {
          namespace = "demo";
        };
        description = "Provider settings, passed to the provider as JSON.";
      };
      secrets = mkOption {
        type = types.attrsOf secretFile;
        default = { };
        example = {
          token = "/var/keys/kv-token";
        };
        description = "Secret name -> file holding it. The jig units are handed each with `LoadCredential=` (credential `${jigLib.providerSecretCredential "<provider>" "<name>"}`), and their host.toml names the credential's path; /etc/jig/host.toml names the file.";
      };
    };
  };

  # The Agent endpoint, for jig at a shell, jig.service and the workers
  # alike: a unit is handed the key as a credential.
  agentModule = {
    options = {
      api = mkOption {
        type = types.enum jigLib.agentApis;
        default = "responses";
        description = "Wire shape of the OpenAI-compatible endpoint.";
      };
      baseUrl = mkOption {
        type = types.nullOr baseUrl;
        default = null;
        example = "https://api.example.org/v1";
        description = "Endpoint base URL; null uses the host's default endpoint.";
      };
      model = mkOption {
        type = modelName;
        example = "some-model";
        description = "Model name. There is no default model.";
      };
      apiKeyFile = mkOption {
        type = credentialFile;
        example = "/var/keys/jig-agent";
        description = ''
          File holding the API key. jig.service, the admission units and the
          workers are handed it with `LoadCredential=` (systemd reads it as
          root) and their host.toml names only the credential's path
          (`$CREDENTIALS_DIRECTORY/${jigLib.agentKeyCredential}`);
          /etc/jig/host.toml, read by jig at a shell, names the file itself.
          The key never enters the Nix store.
        '';
      };
    };
  };

  # Where the Run queue's PostgreSQL is (docs/src/serving.md). High availability is
  # the operator's choice: a replicated PostgreSQL (services.postgresql
  # here, or a managed one) behind this one URL.
  databaseModule = {
    options = {
      url = mkOption {
        type = types.addCheck types.str jigLib.isDatabaseUrl // {
          description = "postgresql:// URL without a password";
        };
        example = "postgresql:///jig?host=/run/postgresql&user=jig";
        description = "The PostgreSQL URL (`[database] url`), without a password.";
      };
      passwordFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/keys/jig-database";
        description = "The database password, handed over with LoadCredential (`[database] password-file` names the credential); null for peer or trust authentication.";
      };
    };
  };

  retentionDuration = types.addCheck types.str jigLib.isRetentionDuration // {
    description = "duration matching `${jigLib.retentionDurationPattern}`, at most 3650d";
  };

  # `[retention]` (docs/src/runs.md): what `jig serve` lets go of settled Runs and
  # delivered packets; `jig gc` applies the same by hand.
  retentionModule = {
    options = {
      maxAge = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        example = "30d";
        description = "Settled Runs older than this (since they settled) are removed with their checkpoints and packets (`[retention] max-age`).";
      };
      maxRuns = mkOption {
        type = types.nullOr positive;
        default = null;
        example = 10000;
        description = "At most this many settled Runs are kept per project, newest first (`[retention] max-runs`); with `maxAge` both apply.";
      };
      packetsMaxAge = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        description = "Delivered packets older than this are removed (`[retention] packets-max-age`); null: `maxAge`.";
      };
      keyWindow = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        description = "A Run with an idempotency key is kept at least this long after it settled, so its key replays it (`[retention] key-window`); null: jig's default, 24h. Afterwards the same key makes a new Run.";
      };
      interval = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        description = "How often `jig serve` sweeps (`[retention] interval`); null: jig's default, 5m.";
      };
    };
  };

  projectModule =
    { name, config, ... }:
    {
      options = {
        path = mkOption {
          type = types.addCheck types.str jigLib.isProjectPath // {
            description = "absolute path without whitespace, `.` or `..` components";
          };
          default =
            if config.source != null then
              "${jigLib.projectsDir}/${name}"
            else
              throw "services.jig.projects.${name}.path: set it, or set `source` to serve the project from ${jigLib.projectsDir}/${name}";
          defaultText = literalExpression ''"${jigLib.projectsDir}/<name>" when `source` is set'';
          example = "/srv/jig/intake";
          description = "Project root directory.";
        };
        user = mkOption {
          type = types.str;
          default =
            if config.source != null then
              jigLib.serverUser
            else
              throw "services.jig.projects.${name}.user: set the user who owns the project";
          defaultText = literalExpression ''"${jigLib.serverUser}" when `source` is set'';
          description = "User who owns the project and runs jig in it (`${jigLib.serverUser}` for a served project).";
        };
        source = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = literalExpression "./my-project";
          description = ''
            The project's files (a flake input, `./my-project`). When set, the
            project is served by `jig serve`: the oneshot unit
            `jig-admit-<name>.service`, ordered before jig.service and re-run
            whenever the source changes, copies it into `path` (keeping the
            protected state `${jigLib.stateDirName}/`) and runs
            `jig review --yes`. Requires `services.jig.server.enable`; the name
            must be a LocalName.
          '';
        };
        admit = mkOption {
          type = types.bool;
          default = true;
          description = ''
            Review and admit the copied source. A failed review fails the
            admission unit (the diagnostic is in its journal) and the
            previously admitted generation keeps serving. false copies only;
            the operator admits by hand.
          '';
        };
        group = mkOption {
          type = types.nullOr types.str;
          default = null;
          description = "Group of the project directories; null uses the user's primary group.";
        };
      };
    };

  server = if cfg.server.enable then cfg.server else null;

  # Projects with a source are served; their names are `[[projects]] name`.
  servedProjects = lib.filterAttrs (_: p: p.source != null) cfg.projects;

  # host.toml as jig at a shell reads it (/etc/jig/host.toml): `settings`,
  # into which the typed options write, naming the operator's files.
  settingsValue = jigLib.hostToml cfg.settings;

  # Rendered, then checked by `jig config check` at build time, so a bad
  # configuration fails the build rather than the service.
  checkedToml =
    name: value:
    let
      toml = tomlFormat.generate name value;
    in
    pkgs.runCommand name { passthru = { inherit toml; }; } ''
      ${cfg.package}/bin/jig config check ${toml}
      cp ${toml} $out
    '';

  serverUnit = "jig.service";
  workerUnit = i: "jig-worker-${toString i}.service";
  workerNumbers = builtins.genList (i: i + 1) cfg.worker.count;
  admitUnit = name: "jig-admit-${name}.service";

  # What a worker reads: `settings` without the server's tables, with the
  # workers' database.
  workerValue =
    removeAttrs settingsValue [
      "serve"
      "projects"
      "retention"
      "database"
    ]
    // lib.optionalAttrs (cfg.worker.database != null) {
      database = databaseTable cfg.worker.database;
    };

  # Each unit reads its own file, naming the credentials in its own
  # credentials directory.
  unitToml =
    name: unit: value:
    checkedToml name (jigLib.withCredentials (jigLib.credentialsDir unit) value);

  hostToml = checkedToml "jig-host.toml" settingsValue;
  serveToml = unitToml "jig-serve.toml" serverUnit settingsValue;
  admitToml = name: unitToml "jig-host-admit-${name}.toml" (admitUnit name) settingsValue;
  workerToml = i: unitToml "jig-host-worker-${toString i}.toml" (workerUnit i) workerValue;

  credentials = jigLib.loadCredentials settingsValue;

  databaseTable =
    database:
    jigLib.dropNulls {
      inherit (database) url;
      password-file = database.passwordFile;
    };

  # server.database's default when PostgreSQL is created here: peer
  # authentication over the local socket, as `jig`.
  localDatabase = {
    url = "postgresql:///${jigLib.databaseName}?host=/run/postgresql&user=${jigLib.serverUser}";
    passwordFile = null;
  };

  # Who the jig units run as, and where.
  identity = {
    User = jigLib.serverUser;
    Group = jigLib.serverGroup;
    StateDirectory = jigLib.stateDirectory;
    StateDirectoryMode = "0750";
    WorkingDirectory = jigLib.stateDir;
    Environment = [ "HOME=${jigLib.stateDir}" ];
    # Each Run's cgroup is made inside the unit's own subtree (jig moves
    # itself into a leaf so the controllers can be enabled for its
    # children); the slice caps all of them together.
    Delegate = "cpu memory pids";
    Slice = jigLib.slice;
  };

  # Hardening shared by jig.service, the admission units (review prepares
  # dependencies in the same containment) and the workers, each setting
  # under mkDefault, so an operator relaxes one with a plain definition.
  # Each relaxation says why.
  hardening = builtins.mapAttrs (_: lib.mkDefault) {
    UMask = "0077";
    NoNewPrivileges = true;
    # An unprivileged user namespace starts with a full capability set of its
    # own, so bubblewrap needs none from the host.
    CapabilityBoundingSet = "";
    AmbientCapabilities = "";
    ProtectSystem = "strict";
    ProtectHome = true;
    PrivateTmp = true;
    PrivateDevices = true;
    PrivateIPC = true;
    # Relaxed: ProtectHostname= is a seccomp filter that makes sethostname()
    # fail with EPERM for the unit and everything it starts, and bubblewrap
    # names each sandbox (--hostname) inside its own UTS namespace; no
    # SystemCallFilter= can lift a second filter. The host's hostname stays
    # unchanged either way: the sandbox's UTS namespace is its own.
    ProtectHostname = false;
    ProtectClock = true;
    ProtectKernelModules = true;
    ProtectKernelLogs = true;
    LockPersonality = true;
    RestrictRealtime = true;
    RestrictSUIDSGID = true;
    RemoveIPC = true;
    SystemCallArchitectures = "native";
    # Relaxed: bubblewrap enters user, mount, PID, IPC, UTS, cgroup and
    # network namespaces for every contained process.
    RestrictNamespaces = false;
    # Relaxed: a private user namespace for the service would leave the
    # delegated cgroup and the state directory owned by an unmapped user.
    PrivateUsers = false;
    # Relaxed: bubblewrap mounts a fresh procfs in each sandbox, which the
    # kernel allows only while the inherited /proc is fully visible; the
    # read-only overmounts of ProtectKernelTunables= (/proc/sys, /proc/bus,
    # ...), a hidepid ProtectProc= and ProcSubset=pid each make it not.
    ProtectKernelTunables = false;
    ProtectProc = "default";
    ProcSubset = "all";
    # Relaxed: jig creates each Run's cgroup inside the delegated subtree,
    # and ProtectControlGroups= mounts /sys/fs/cgroup read-only.
    ProtectControlGroups = false;
    # Relaxed: wasmtime, Bun, Node and Deno compile code at run time, which
    # needs writable-then-executable memory.
    MemoryDenyWriteExecute = false;
    # AF_NETLINK: bubblewrap brings up the loopback interface of each new
    # network namespace over rtnetlink. AF_INET/AF_INET6: the Agent endpoint,
    # the npm registry and the optional TCP listener.
    RestrictAddressFamilies = [
      "AF_UNIX"
      "AF_INET"
      "AF_INET6"
      "AF_NETLINK"
    ];
    # Relaxed beyond @system-service: @mount (bubblewrap's mount, pivot_root,
    # umount2), sethostname (its --hostname), seccomp (the envelope's own
    # system-call filter, installed by bubblewrap).
    SystemCallFilter = [
      "@system-service"
      "@mount"
      "sethostname"
      "seccomp"
    ];
    SystemCallErrorNumber = "EPERM";
  };

  # A unit that stops on failure comes back after RestartSec (5 s rather
  # than systemd's 100 ms, which trips the start limit within a second
  # while the database is still down).
  restart = {
    Restart = lib.mkDefault "on-failure";
    RestartSec = lib.mkDefault "5s";
  };

  # Ordering on the database: the local one's readiness (postgresql.target:
  # the server and its ensure* setup), else postgresql.service when one
  # runs here (none elsewhere: the ordering is then a no-op).
  databaseUnits =
    if cfg.database.createLocally then [ "postgresql.target" ] else [ "postgresql.service" ];

  # jig.service and one admission unit per served project.
  serverServices = {
    jig = {
      description = "jig FLOW host (jig serve)";
      requires = [ "jig.socket" ] ++ lib.optionals cfg.database.createLocally databaseUnits;
      after = [
        "jig.socket"
        "network-online.target"
      ]
      ++ lib.optionals (server.database != null) databaseUnits;
      wants = [ "network-online.target" ];
      wantedBy = [ "multi-user.target" ];
      serviceConfig = identity // hardening // restart // {
        Type = "exec";
        # fd 3 is jig.socket (LISTEN_FDS); [[projects]] in host.toml
        # names what it serves. A changed configuration is a changed
        # unit, so a switch restarts it.
        ExecStart = "${cfg.package}/bin/jig serve --config ${serveToml}";
        KillMode = "control-group";
        TimeoutStopSec = "${toString (jigLib.durationSeconds server.shutdownGrace + jigLib.stopMarginSeconds)}s";
        LoadCredential = credentials;
        # Room for max-connections (256 by default) TCP clients beside the
        # 512 descriptors jig serve keeps for the socket and Runs: it
        # refuses to start when the limit cannot hold both.
        LimitNOFILE = jigLib.descriptorLimit server.maxConnections;
        ReadWritePaths = lib.mapAttrsToList (_: p: p.path) servedProjects;
      };
    };
  }
  // lib.mapAttrs' (
    name: p:
    lib.nameValuePair "jig-admit-${name}" {
      description = "jig: copy and admit project ${name}";
      # Ordered before, not required by, jig.service: a failed review
      # leaves the previously admitted generation serving.
      before = [ "jig.service" ];
      after = [ "network-online.target" ];
      wants = [ "network-online.target" ];
      wantedBy = [
        "jig.service"
        "multi-user.target"
      ];
      # The script names the source's store path, so a changed source is
      # a changed unit, re-run by the switch.
      restartTriggers = [ p.source ];
      serviceConfig = identity // hardening // {
        Type = "oneshot";
        RemainAfterExit = true;
        ReadWritePaths = [ p.path ];
        LoadCredential = credentials;
      };
      script = jigLib.admitScript {
        inherit name;
        inherit (p) source path admit;
        jig = "${cfg.package}/bin/jig";
        config = admitToml name;
      };
    }
  ) servedProjects;

  # `jig worker`s: each claims Runs from the database and executes them in
  # its own envelope, from its own owner-private cache of admitted bytes.
  workerServices = builtins.listToAttrs (
    map (
      i:
      lib.nameValuePair "jig-worker-${toString i}" {
        description = "jig worker ${toString i} (Runs queued in PostgreSQL)";
        after = [ "network-online.target" ] ++ databaseUnits;
        requires = lib.optionals cfg.database.createLocally databaseUnits;
        wants = [ "network-online.target" ];
        # jig-workers.target starts them all, and stopping or restarting
        # it does the same to each.
        wantedBy = [ jigLib.workersTarget ];
        partOf = [ jigLib.workersTarget ];
        serviceConfig = identity // hardening // restart // {
          Type = "exec";
          ExecStart = "${cfg.package}/bin/jig worker --config ${workerToml i} --concurrency ${toString cfg.worker.concurrency} --cache /var/cache/jig-worker-${toString i}";
          CacheDirectory = "jig-worker-${toString i}";
          CacheDirectoryMode = "0700";
          KillMode = "control-group";
          # The Agent key, the secrets and the providers' secrets, as
          # jig.service gets them, and the workers' database password.
          LoadCredential = jigLib.loadCredentials workerValue;
        };
      }
    ) workerNumbers
  );

  projectGroup =
    p:
    if p.group != null then
      p.group
    else if p.user == jigLib.serverUser then
      jigLib.serverGroup
    else
      let
        g = config.users.users.${p.user}.group or "";
      in
      if g == "" then "users" else g;

  providerNames = map (p: p.name) cfg.settings.providers;
  projectPaths = lib.mapAttrsToList (_: p: p.path) cfg.projects;
in
{
  options.services.jig = {
    enable = mkEnableOption "the jig FLOW host";

    package = mkOption {
      type = types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = literalExpression "pkgs.callPackage ./package.nix { } # jig from this repository, built with the system's nixpkgs";
      description = "The jig package to install. The flake's `nixosModules.default` sets it to the flake's own build (its pinned nixpkgs), which a host on any release can run; this module imported alone builds jig with the system's nixpkgs, which needs rustc >= Cargo.toml's rust-version.";
    };

    unitHostTomls = mkOption {
      type = types.attrsOf types.package;
      internal = true;
      readOnly = true;
      description = "The checked host.toml each jig unit reads, by unit name (for inspection and the checks).";
    };

    bubblewrapPackage = mkOption {
      type = types.package;
      default = pkgs.bubblewrap;
      defaultText = literalExpression "pkgs.bubblewrap";
      description = "Bubblewrap package installed system-wide and used for `settings.containment.bwrap`.";
    };

    settings = mkOption {
      type = types.submodule {
        freeformType = tomlFormat.type;
        options = {
          runtimes = mkOption {
            type = types.submodule runtimesModule;
            default = { };
            description = "Runtime name -> absolute executable path. A null or absent runtime is unavailable.";
          };
          containment = mkOption {
            type = types.submodule containmentModule;
            default = { };
            description = "Containment executables.";
          };
          providers = mkOption {
            type = types.listOf (types.submodule providerModule);
            default = [ ];
            description = "Capability providers, written as `[[providers]]` tables.";
          };
        };
      };
      default = { };
      description = ''
        Host configuration, written to /etc/jig/host.toml (and, with each
        secret file replaced by its credential's path, to each jig unit's own
        host.toml). Keys not declared here are passed through unchanged. The
        typed options (`agent`, `secrets`, `server`, `retention`, the
        databases, served `projects`) write their tables here through the
        module system: a key set both here and by an option must agree, or
        the evaluation fails naming both definitions.
      '';
    };

    server = {
      enable = mkEnableOption "the jig server: `jig serve` behind jig.socket (${jigLib.socketPath}) as the `${jigLib.serverUser}` system user";

      maxActiveRuns = mkOption {
        type = types.nullOr positive;
        default = null;
        description = "At most this many active Runs (`[serve] max-active-runs`); null: jig's default, the number of CPUs.";
      };

      maxQueuedRuns = mkOption {
        type = types.nullOr positive;
        default = null;
        description = "At most this many queued Runs (`[serve] max-queued-runs`); past it a submission is refused RESOURCE_EXHAUSTED. null: jig's default.";
      };

      envelopesAhead = mkOption {
        type = types.nullOr types.ints.unsigned;
        default = null;
        description = "For how many recently run targets the next Run's envelope is made ahead and held before its program runs (`[serve] envelopes-ahead`); 0 makes none. null: jig's default (8).";
      };

      maxConnections = mkOption {
        type = types.nullOr positive;
        default = null;
        description = "At most this many TCP connections at once (`[serve] max-connections`); one past it is answered 503 and closed. The Unix socket is counted apart. The unit's LimitNOFILE leaves room for it. null: jig's default (256).";
      };

      headerTimeout = mkOption {
        type = types.nullOr (
          types.addCheck types.str jigLib.isDuration
          // {
            description = "duration matching `${jigLib.durationPattern}`";
          }
        );
        default = null;
        description = "How long a request's head may take, and an idle connection is kept (`[serve] header-timeout`). null: jig's default (10s).";
      };

      bodyTimeout = mkOption {
        type = types.nullOr (
          types.addCheck types.str jigLib.isDuration
          // {
            description = "duration matching `${jigLib.durationPattern}`";
          }
        );
        default = null;
        description = "How long a request's body may take from its head (`[serve] body-timeout`): a file Run's upload must fit it. null: jig's default (60s).";
      };

      shutdownGrace = mkOption {
        type = types.addCheck types.str jigLib.isDuration // {
          description = "duration matching `${jigLib.durationPattern}`";
        };
        default = "30s";
        description = "How long SIGTERM lets Runs finish before they are cancelled (`[serve] shutdown-grace`); the unit's stop timeout is this plus ${toString jigLib.stopMarginSeconds}s.";
      };

      tcp = mkOption {
        type = types.nullOr (
          types.addCheck types.str jigLib.isServerTcp
          // {
            description = "host:port or [address]:port, port ${toString jigLib.minServerPort}-${toString jigLib.maxPort}";
          }
        );
        default = null;
        example = "127.0.0.1:8480";
        description = "Also listen on TCP (`[serve] tcp`), which always requires `tokenFile`. Off loopback (anything but 127.x.y.z, [::1] or localhost) it requires `tlsCertFile` and `tlsKeyFile`, or `insecurePlainHttp`. Its type refuses a port below ${toString jigLib.minServerPort}: the service holds no capabilities to bind one.";
      };

      tlsCertFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/lib/acme/jig.example.org/fullchain.pem";
        description = "Serve `tcp` over TLS with this certificate chain (PEM, leaf first; `[serve] tls-cert` names the credential), with `tlsKeyFile`. Handed over with LoadCredential, which systemd reads as root, so `security.acme`'s files work as they are. Credentials are fixed while a unit runs: a renewed certificate is served once jig.service restarts (list it in the certificate's `security.acme.certs.<name>.reloadServices`).";
      };

      tlsKeyFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/lib/acme/jig.example.org/key.pem";
        description = "The private key of `tlsCertFile`'s certificate (PEM), handed over with LoadCredential (`[serve] tls-key` names the credential).";
      };

      insecurePlainHttp = mkOption {
        type = types.bool;
        default = false;
        description = "Serve plain HTTP on a `tcp` address off loopback (`[serve] insecure-plain-http`): the bearer token and the console's cookie cross the network in clear. Prefer `tlsCertFile`, or a loopback `tcp` behind a reverse proxy that terminates TLS.";
      };

      tokenFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/keys/jig-token";
        description = "The bearer token TCP clients must present, handed over with LoadCredential (`[serve] token-file` names the credential).";
      };

      console = mkOption {
        type = types.bool;
        default = false;
        description = "Serve the web console on the TCP listener too (`[serve] console`); operators sign in with the bearer token from `tokenFile`. Requires `tcp`. Without it the console is still reachable on the Unix socket through `jig console`.";
      };

      database = mkOption {
        type = types.nullOr (types.submodule databaseModule);
        default = if cfg.database.createLocally then localDatabase else null;
        defaultText = literalExpression ''
          if config.services.jig.database.createLocally then
            { url = "postgresql:///${jigLib.databaseName}?host=/run/postgresql&user=${jigLib.serverUser}"; passwordFile = null; }
          else null'';
        description = "Enqueue Runs in this PostgreSQL for `services.jig.worker`s instead of executing them here (`[database]`).";
      };
    };

    worker = {
      count = mkOption {
        type = types.addCheck types.int (n: n >= 0) // {
          description = "non-negative integer";
        };
        default = 0;
        description = "How many `jig worker` units (jig-worker-1 ... jig-worker-N) run on this machine.";
      };

      concurrency = mkOption {
        type = positive;
        default = 1;
        description = "Runs each worker executes at once (`jig worker --concurrency`).";
      };

      database = mkOption {
        type = types.nullOr (types.submodule databaseModule);
        default = if cfg.server.enable then cfg.server.database else null;
        defaultText = literalExpression "config.services.jig.server.database when the server is enabled, else null";
        description = "The PostgreSQL the workers claim Runs from; required when `count` is above 0. Defaults to the server's.";
      };
    };

    database.createLocally = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Run PostgreSQL on this machine for the Run queue
        (`services.postgresql`): the database `${jigLib.databaseName}` owned by the
        role `${jigLib.serverUser}` (ensureDatabases, ensureUsers), reached over
        the local socket with peer authentication. `server.database` and so
        the workers' database default to it, and jig.service and the workers
        are ordered after, and require, `postgresql.target`.
      '';
    };

    runs = {
      memoryMax = mkOption {
        type = types.nullOr (
          types.strMatching "[1-9][0-9]*[KMGT]?|[1-9][0-9]?%|100%|infinity"
          // {
            description = "bytes with an optional K, M, G or T suffix, a percentage of RAM, or `infinity`";
          }
        );
        default = null;
        example = "8G";
        description = "Memory all Runs of the jig units (jig.service, admissions, workers) may use together: `MemoryMax=` of `${jigLib.slice}`, which they run in. null: no cap beyond each Run's own.";
      };
      tasksMax = mkOption {
        type = types.nullOr positive;
        default = null;
        example = 4096;
        description = "Tasks (processes and threads) of all jig units together: `TasksMax=` of `${jigLib.slice}`.";
      };
      cpuQuota = mkOption {
        type = types.nullOr (
          types.strMatching "[1-9][0-9]*%"
          // {
            description = "percentage of one CPU, such as `400%`";
          }
        );
        default = null;
        example = "400%";
        description = "CPU time of all jig units together: `CPUQuota=` of `${jigLib.slice}` (100% is one CPU).";
      };
    };

    agent = mkOption {
      type = types.nullOr (types.submodule agentModule);
      default = null;
      description = ''
        The builtin Agent Run provider's endpoint, written as `[agent]` for jig
        at a shell, jig.service, the admission units and the workers alike;
        the units get the key as a credential. null: no `[agent]` table.
      '';
    };

    secrets = mkOption {
      type = types.attrsOf credentialFile;
      default = { };
      example = {
        deploy-token = "/var/keys/deploy-token";
      };
      description = ''
        Effect secrets of credentialed Project Commands: secret name -> file
        (name matching `${jigLib.secretNamePattern}`). Each file is handed
        to the jig units with `LoadCredential=`, never copied into the store;
        host.toml's `[secrets]` names only the credential paths.
      '';
    };

    retention = mkOption {
      type = types.nullOr (types.submodule retentionModule);
      default = null;
      example = literalExpression ''
        { maxAge = "30d"; maxRuns = 10000; }
      '';
      description = ''
        Retention of settled Runs, their checkpoints and delivered packets,
        written as `[retention]`; `jig serve` applies it periodically and
        `jig gc` by hand. Pending Runs and the store are never removed.
        null: no table, nothing is ever removed.
      '';
    };

    projects = mkOption {
      type = types.attrsOf (types.submodule projectModule);
      default = { };
      example = literalExpression ''
        {
          intake = { path = "/srv/jig/intake"; user = "alice"; };
        }
      '';
      description = ''
        Projects the operator declares. For each, systemd-tmpfiles creates (at
        boot and on every switch) the project root, owned by `user` with mode
        ${jigLib.projectDirMode}, and its protected state directory
        `${jigLib.stateDirName}/`, owned by `user` with mode ${jigLib.stateDirMode},
        and corrects their ownership and mode when they already exist. It does
        nothing else: it neither creates project files nor reviews or admits
        anything; the user runs `jig review` and `jig run` in the project.
      '';
    };
  };

  config = mkIf cfg.enable {
    assertions = [
      {
        assertion = cfg.worker.count == 0 || cfg.worker.database != null;
        message = "services.jig.worker.database: workers need the database URL";
      }
      {
        assertion = jigLib.duplicates providerNames == [ ];
        message = "services.jig.settings.providers: duplicate names ${toString (jigLib.duplicates providerNames)}";
      }
      {
        assertion =
          cfg.retention == null
          || cfg.retention.maxAge != null
          || cfg.retention.maxRuns != null
          || cfg.retention.packetsMaxAge != null;
        message = "services.jig.retention: set maxAge, maxRuns or packetsMaxAge (null removes nothing)";
      }
      {
        assertion = jigLib.duplicates projectPaths == [ ];
        message = "services.jig.projects: more than one project at ${toString (jigLib.duplicates projectPaths)}";
      }
    ]
    ++ map (p: {
      assertion = (p.kind == "builtin") == (p.path == null);
      message = "services.jig.settings.providers: provider `${p.name}` of kind `${p.kind}` ${
        if p.kind == "builtin" then "must not set" else "must set"
      } `path`";
    }) cfg.settings.providers
    ++ lib.mapAttrsToList (name: p: {
      assertion = config.users.users ? ${p.user} || (server != null && p.user == jigLib.serverUser);
      message = "services.jig.projects.${name}.user: no user `${p.user}` in users.users";
    }) cfg.projects
    ++ lib.concatLists (
      lib.mapAttrsToList (name: p: [
        {
          assertion = server != null;
          message = "services.jig.projects.${name}.source: a served project needs services.jig.server.enable";
        }
        {
          assertion = jigLib.isLocalName name;
          message = "services.jig.projects.${name}: a served project's name must be a LocalName (`${jigLib.localNamePattern}`, at most ${toString jigLib.maxLocalNameLength} characters)";
        }
        {
          assertion = p.user == jigLib.serverUser;
          message = "services.jig.projects.${name}.user: a served project belongs to `${jigLib.serverUser}`, not `${p.user}`";
        }
      ]) servedProjects
    )
    ++ [
      {
        assertion = (cfg.server.tcp == null) == (cfg.server.tokenFile == null);
        message = "services.jig.server: `tcp` and `tokenFile` go together (TCP always requires a bearer token)";
      }
      {
        assertion = !cfg.server.console || cfg.server.tcp != null;
        message = "services.jig.server: `console` serves the console on the TCP listener, so it requires `tcp`";
      }
      {
        assertion = (cfg.server.tlsCertFile == null) == (cfg.server.tlsKeyFile == null);
        message = "services.jig.server: `tlsCertFile` and `tlsKeyFile` go together";
      }
      {
        assertion = cfg.server.tlsCertFile == null || cfg.server.tcp != null;
        message = "services.jig.server: `tlsCertFile` and `tlsKeyFile` serve the TCP listener, so they require `tcp`";
      }
      {
        assertion = !(cfg.server.insecurePlainHttp && cfg.server.tlsCertFile != null);
        message = "services.jig.server: `insecurePlainHttp` and `tlsCertFile` contradict each other: set one";
      }
      {
        assertion =
          cfg.server.tcp == null
          || cfg.server.tlsCertFile != null
          || cfg.server.insecurePlainHttp
          || jigLib.isLoopbackTcp cfg.server.tcp;
        message = "services.jig.server: `tcp` ${toString cfg.server.tcp} is not a loopback address, and plain HTTP would carry the bearer token in clear: set `tlsCertFile` and `tlsKeyFile` (security.acme's files work), or listen on loopback behind a reverse proxy that terminates TLS, or set `insecurePlainHttp`";
      }
    ]
    ++ lib.mapAttrsToList (name: _: {
      assertion = jigLib.isSecretName name;
      message = "services.jig.secrets.${name}: the name must match `${jigLib.secretNamePattern}` (a systemd credential ID)";
    }) cfg.secrets
    # Whatever set them (an option or `settings` itself), secret files are
    # handed to the units as credentials: their IDs must be credential IDs,
    # the files outside the world-readable store.
    ++ map (c: {
      assertion = jigLib.isCredentialId c.id;
      message = "services.jig.settings: the credential `${c.id}` for ${c.file} is not a systemd credential ID (`${jigLib.credentialIdPattern}`): rename the provider or the secret";
    }) (builtins.filter (c: !(cfg.secrets ? ${lib.removePrefix "secret-" c.id})) (jigLib.credentials settingsValue))
    ++ map (c: {
      assertion = jigLib.isSecretFile c.file;
      message = "services.jig.settings: the secret file ${c.file} (credential `${c.id}`) must be an absolute path outside the Nix store";
    }) (jigLib.credentials settingsValue);

    warnings =
      lib.optional (lib.versionOlder (lib.getVersion cfg.bubblewrapPackage) jigLib.minBubblewrapVersion)
        "services.jig: Bubblewrap ${lib.getVersion cfg.bubblewrapPackage} is older than ${jigLib.minBubblewrapVersion}, the oldest jig accepts (it needs --size): jig refuses to run process recipes contained with it. Set services.jig.bubblewrapPackage to a newer one.";

    # The typed options' tables, written into `settings` through the module
    # system, so a key also set in `settings` must agree with them.
    services.jig.settings = lib.mkMerge [
      (mkIf (cfg.agent != null) {
        agent = jigLib.dropNulls {
          inherit (cfg.agent) api model;
          base-url = cfg.agent.baseUrl;
          api-key-file = cfg.agent.apiKeyFile;
        };
      })
      (mkIf (cfg.secrets != { }) { inherit (cfg) secrets; })
      (mkIf (server != null) {
        serve = jigLib.dropNulls {
          socket = jigLib.socketPath;
          max-active-runs = server.maxActiveRuns;
          max-queued-runs = server.maxQueuedRuns;
          envelopes-ahead = server.envelopesAhead;
          shutdown-grace = server.shutdownGrace;
          max-connections = server.maxConnections;
          header-timeout = server.headerTimeout;
          body-timeout = server.bodyTimeout;
          inherit (server) tcp;
          token-file = server.tokenFile;
          tls-cert = server.tlsCertFile;
          tls-key = server.tlsKeyFile;
          insecure-plain-http = if server.insecurePlainHttp then true else null;
          console = if server.console then true else null;
        };
      })
      (mkIf (server != null && server.database != null) { database = databaseTable server.database; })
      (mkIf (server != null && servedProjects != { }) {
        projects = lib.mapAttrsToList (name: p: {
          inherit name;
          inherit (p) path;
        }) servedProjects;
      })
      (mkIf (cfg.retention != null) {
        retention = jigLib.dropNulls {
          max-age = cfg.retention.maxAge;
          max-runs = cfg.retention.maxRuns;
          packets-max-age = cfg.retention.packetsMaxAge;
          key-window = cfg.retention.keyWindow;
          inherit (cfg.retention) interval;
        };
      })
    ];

    services.jig.unitHostTomls =
      lib.optionalAttrs (server != null) (
        { ${serverUnit} = serveToml; } // lib.mapAttrs' (name: _: lib.nameValuePair (admitUnit name) (admitToml name)) servedProjects
      )
      // builtins.listToAttrs (map (i: lib.nameValuePair (workerUnit i) (workerToml i)) workerNumbers);

    # jig at a shell reads this one; each jig unit reads its own.
    environment.etc."jig/host.toml".source = hostToml;
    environment.etc."jig/serve.toml" = mkIf (server != null) { source = serveToml; };

    # Session variables land in both the PAM environment (so the systemd user
    # manager and non-shell sessions see it) and environment.variables.
    environment.sessionVariables.JIG_CONFIG = "/etc/jig/host.toml";

    # /run/current-system/sw/bin/bwrap is also one of jig's default lookup paths.
    environment.systemPackages = [
      cfg.package
      cfg.bubblewrapPackage
    ];

    # Containment enters user, mount, PID, IPC, UTS, cgroup and network
    # namespaces as an unprivileged user. The hardened profile turns both
    # of these off; jig cannot work without them.
    security.allowUserNamespaces = true;
    security.unprivilegedUsernsClone = true;

    # jig finds the real glibc loader through the system-managed nix-ld link.
    programs.nix-ld.enable = lib.mkDefault true;

    systemd.tmpfiles.settings."10-jig-projects" = mkIf (cfg.projects != { }) (lib.mkMerge (
      lib.optional (servedProjects != { }) {
        ${jigLib.projectsDir}.d = {
          user = jigLib.serverUser;
          group = jigLib.serverGroup;
          mode = jigLib.projectDirMode;
        };
      }
      ++ lib.mapAttrsToList (
        _: p:
        let
          owner = {
            inherit (p) user;
            group = projectGroup p;
          };
        in
        {
          ${p.path}.d = owner // {
            mode = jigLib.projectDirMode;
          };
          "${p.path}/${jigLib.stateDirName}".d = owner // {
            mode = jigLib.stateDirMode;
          };
        }
      ) cfg.projects
    ));

    users.users = mkIf (server != null || cfg.worker.count > 0) {
      ${jigLib.serverUser} = {
        isSystemUser = true;
        group = jigLib.serverGroup;
        home = jigLib.stateDir;
        description = "jig FLOW host server";
      };
    };
    users.groups = mkIf (server != null || cfg.worker.count > 0) { ${jigLib.serverGroup} = { }; };

    services.postgresql = mkIf cfg.database.createLocally {
      enable = true;
      ensureDatabases = [ jigLib.databaseName ];
      ensureUsers = [
        {
          name = jigLib.serverUser;
          ensureDBOwnership = true;
        }
      ];
    };

    # Every jig unit runs in jig.slice; `runs` caps them all together.
    systemd.slices.jig = mkIf (server != null || cfg.worker.count > 0) {
      description = "jig FLOW host: all Runs of the jig units";
      sliceConfig = jigLib.dropNulls {
        MemoryMax = cfg.runs.memoryMax;
        TasksMax = cfg.runs.tasksMax;
        CPUQuota = cfg.runs.cpuQuota;
      };
    };

    systemd.targets.jig-workers = mkIf (cfg.worker.count > 0) {
      description = "jig workers (systemctl restart jig-workers.target restarts them all)";
      wantedBy = [ "multi-user.target" ];
    };

    # The API socket; members of the `jig` group may submit Runs.
    systemd.sockets.jig = mkIf (server != null) {
      description = "jig FLOW host API socket";
      wantedBy = [ "sockets.target" ];
      listenStreams = [ jigLib.socketPath ];
      socketConfig = {
        SocketUser = jigLib.serverUser;
        SocketGroup = jigLib.serverGroup;
        SocketMode = jigLib.socketMode;
        DirectoryMode = "0755";
      };
    };

    systemd.services = lib.mkMerge [
      {
        # Each Run of a user's jig gets its own cgroup with cpu, memory and
        # pids limits inside a transient scope of the user's systemd manager.
        "user@".serviceConfig.Delegate = "cpu cpuset io memory pids";
      }
      (mkIf (server != null) (serverServices))
      (mkIf (cfg.worker.count > 0) workerServices)
    ];
  };
}
