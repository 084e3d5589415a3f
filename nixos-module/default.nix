# NixOS module `services.jig`: installs the jig FLOW host, writes its host
# configuration to /etc/jig/host.toml, and prepares the kernel and systemd
# features its rootless containment needs (user namespaces, cgroup v2
# delegation to user managers, nix-ld for the real glibc loader).
#
# It runs no daemon: jig is a command users run in their own projects.
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

  agentModule = {
    options = {
      api = mkOption {
        type = types.enum jigLib.agentApis;
        default = "responses";
        description = "Wire shape of the OpenAI-compatible endpoint.";
      };
      base-url = mkOption {
        type = types.nullOr (
          types.addCheck types.str jigLib.isBaseUrl
          // {
            description = "https URL without userinfo, query or fragment, at most ${toString jigLib.maxBaseUrlLength} characters";
          }
        );
        default = null;
        example = "https://api.example.org/v1";
        description = "Endpoint base URL; null uses the host's default endpoint.";
      };
      model = mkOption {
        type =
          types.addCheck types.str jigLib.isModel
          // {
            description = "model name matching `${jigLib.modelPattern}`";
          };
        example = "some-model";
        description = "Model name. There is no default model.";
      };
      api-key-file = mkOption {
        type = secretFile;
        example = "/run/credentials/jig/agent-key";
        description = ''
          File holding the API key. Only the path is written to host.toml;
          the key never enters the Nix store.
        '';
      };
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
          token = "/run/credentials/jig/kv-token";
        };
        description = "Secret name -> file holding it. Only paths are written to host.toml.";
      };
    };
  };

  projectModule = {
    options = {
      path = mkOption {
        type = types.addCheck types.str jigLib.isProjectPath // {
          description = "absolute path without whitespace, `.` or `..` components";
        };
        example = "/srv/jig/intake";
        description = "Project root directory.";
      };
      user = mkOption {
        type = types.str;
        description = "User who owns the project and runs jig in it.";
      };
      group = mkOption {
        type = types.nullOr types.str;
        default = null;
        description = "Group of the project directories; null uses the user's primary group.";
      };
    };
  };

  hostToml = tomlFormat.generate "jig-host.toml" (jigLib.hostToml cfg.settings);

  projectGroup =
    p:
    if p.group != null then
      p.group
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
      description = "The jig package to install.";
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
          agent = mkOption {
            type = types.nullOr (types.submodule agentModule);
            default = null;
            description = "The builtin Agent Run provider's endpoint; null writes no `[agent]` table.";
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
        Host configuration, written to /etc/jig/host.toml. Keys not declared
        here are passed through unchanged.
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
        assertion = jigLib.duplicates providerNames == [ ];
        message = "services.jig.settings.providers: duplicate names ${toString (jigLib.duplicates providerNames)}";
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
      assertion = config.users.users ? ${p.user};
      message = "services.jig.projects.${name}.user: no user `${p.user}` in users.users";
    }) cfg.projects;

    warnings =
      lib.optional (lib.versionOlder (lib.getVersion cfg.bubblewrapPackage) jigLib.minBubblewrapVersion)
        "services.jig: Bubblewrap ${lib.getVersion cfg.bubblewrapPackage} is older than ${jigLib.minBubblewrapVersion}, the minimum jig's containment is specified for; set services.jig.bubblewrapPackage to a newer one.";

    environment.etc."jig/host.toml".source = hostToml;

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

    # Each Run gets its own cgroup with cpu, memory and pids limits inside a
    # transient scope of the user's systemd manager.
    systemd.services."user@".serviceConfig.Delegate = "cpu cpuset io memory pids";

    # jig finds the real glibc loader through the system-managed nix-ld link.
    programs.nix-ld.enable = lib.mkDefault true;

    systemd.tmpfiles.settings."10-jig-projects" = mkIf (cfg.projects != { }) (lib.mkMerge (
      lib.mapAttrsToList (
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
  };
}
