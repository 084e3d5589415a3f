# Stand-ins for the NixOS options that the module and the VM test's nodes
# set. They are declared in nixpkgs' nixos/ tree, not in lib, and nixpkgs
# cannot be fetched where these checks run.
#
# Each is declared with the type NixOS gives it, so an option NixOS does not
# have, a value of the wrong type or two conflicting definitions fail here as
# in a NixOS build. Only the options these files touch are declared, and
# only a few things NixOS derives from them are modelled: a service's
# `script` becomes its ExecStart; a user of `isNormalUser` gets the group
# `users`; a user must be exactly one of system or normal user and have a
# group (NixOS's assertions, messages shortened); `systemd.units.<unit>.text`
# is the unit file, in NixOS's format (`attrsToSection`) but without the
# lines NixOS adds on its own (PATH, X-Restart-Triggers, default
# dependencies).
{ config, lib, ... }:
let
  inherit (lib) mkOption types;

  # nixos/lib/systemd-lib.nix: an option that takes a unit name.
  unitName = types.strMatching "[a-zA-Z0-9@%:_.\\-]+[.](service|socket|device|mount|automount|swap|target|path|timer|scope|slice)";

  # nixos/lib/systemd-unit-options.nix: a unit setting. Lists from several
  # definitions are concatenated (repeatable settings); other values must
  # agree.
  unitOption = lib.mkOptionType {
    name = "systemd option";
    merge =
      loc: defs:
      let
        defs' = lib.filterOverrides defs;
      in
      if builtins.isList (builtins.head defs').value then
        lib.concatMap (
          def:
          if builtins.isList def.value then
            def.value
          else
            throw "The definitions of ${lib.showOption loc} mix lists and non-lists"
        ) defs'
      else
        lib.mergeEqualOption loc defs';
  };

  # The [Service] values systemd-unit-options.nix checks.
  serviceTypes = [
    "exec"
    "simple"
    "forking"
    "oneshot"
    "dbus"
    "notify"
    "notify-reload"
    "idle"
  ];
  restartValues = [
    "no"
    "on-success"
    "on-failure"
    "on-abnormal"
    "on-abort"
    "on-watchdog"
    "always"
  ];
  # A definition's values may still be wrapped in mkIf or mkOverride.
  unwrap = v: if builtins.elem (v._type or "") [ "if" "override" ] then v.content else v;
  serviceConfigType =
    types.addCheck (types.attrsOf unitOption) (
      c:
      builtins.elem (unwrap (c.Type or "simple")) serviceTypes
      && builtins.elem (unwrap (c.Restart or "no")) restartValues
    )
    // {
      description = "attribute set of systemd option";
    };

  unitList =
    description:
    mkOption {
      type = types.listOf unitName;
      default = [ ];
      inherit description;
    };

  # What services and sockets share (commonUnitOptions).
  commonUnitOptions = {
    options = {
      enable = mkOption {
        type = types.bool;
        default = true;
        description = "Whether the unit exists.";
      };
      description = mkOption {
        type = types.singleLineStr;
        default = "";
        description = "Description=.";
      };
      requires = unitList "Requires=.";
      wants = unitList "Wants=.";
      after = unitList "After=.";
      before = unitList "Before=.";
      partOf = unitList "PartOf=.";
      wantedBy = unitList "Units that want this one.";
      requiredBy = unitList "Units that require this one.";
      restartTriggers = mkOption {
        type = types.listOf types.unspecified;
        default = [ ];
        description = "Items whose change restarts the unit on a switch.";
      };
      unitConfig = mkOption {
        type = types.attrsOf unitOption;
        default = { };
        description = "[Unit] settings.";
      };
    };
  };

  serviceModule =
    { name, options, ... }:
    {
      imports = [ commonUnitOptions ];
      options = {
        serviceConfig = mkOption {
          type = serviceConfigType;
          default = { };
          description = "[Service] settings.";
        };
        script = mkOption {
          type = types.lines;
          default = "";
          description = "Shell commands run as the main process.";
        };
      };
      # NixOS writes the script to a store file and makes it ExecStart, so
      # a unit with a script and its own ExecStart conflicts. (Whether a
      # module set the script is read from its priority, not its text: the
      # text may name a source path, which reading would copy to the store.)
      config.serviceConfig = lib.mkIf (options.script.highestPrio < (lib.mkOptionDefault null).priority) {
        ExecStart = "${builtins.storeDir}/00000000000000000000000000000000-unit-script-${name}-start/bin/${name}-start";
      };
    };

  socketModule = {
    imports = [ commonUnitOptions ];
    options = {
      listenStreams = mkOption {
        type = types.listOf types.str;
        default = [ ];
        description = "ListenStream= lines.";
      };
      socketConfig = mkOption {
        type = types.attrsOf unitOption;
        default = { };
        description = "[Socket] settings.";
      };
    };
  };

  sliceModule = {
    imports = [ commonUnitOptions ];
    options.sliceConfig = mkOption {
      type = types.attrsOf unitOption;
      default = { };
      description = "[Slice] settings.";
    };
  };

  # nixos/lib/systemd-lib.nix: `attrsToSection`, one `Key=value` line per
  # value (a list is one line per item), keys in attribute order.
  toOption =
    v:
    if v == true then
      "true"
    else if v == false then
      "false"
    else
      toString v;
  section =
    name: settings:
    "[${name}]\n"
    + lib.concatStrings (
      lib.concatLists (
        lib.mapAttrsToList (k: v: map (x: "${k}=${toOption x}\n") (lib.toList v)) settings
      )
    );
  unitSection =
    unit:
    section "Unit" (
      lib.filterAttrs (_: v: v != "" && v != [ ]) {
        Description = unit.description;
        Requires = toString unit.requires;
        Wants = toString unit.wants;
        After = toString unit.after;
        Before = toString unit.before;
        PartOf = toString unit.partOf;
      }
      // unit.unitConfig
    );

  # tmpfiles.nix: settings.<file>.<path>.<type>.
  tmpfilesEntry =
    { name, ... }:
    {
      options = {
        type = mkOption {
          type = types.str;
          default = name;
          description = "The tmpfiles.d type.";
        };
        mode = mkOption {
          type = types.str;
          default = "-";
          description = "Mode.";
        };
        user = mkOption {
          type = types.str;
          default = "-";
          description = "Owner.";
        };
        group = mkOption {
          type = types.str;
          default = "-";
          description = "Group.";
        };
        age = mkOption {
          type = types.str;
          default = "-";
          description = "Age.";
        };
        argument = mkOption {
          type = types.str;
          default = "";
          description = "Argument.";
        };
      };
    };

  userModule =
    { name, config, ... }:
    {
      options = {
        name = mkOption {
          type = types.str;
          default = name;
          description = "User name.";
        };
        isSystemUser = mkOption {
          type = types.bool;
          default = false;
          description = "A system user.";
        };
        isNormalUser = mkOption {
          type = types.bool;
          default = false;
          description = "A normal user.";
        };
        uid = mkOption {
          type = types.nullOr types.int;
          default = null;
          description = "The uid.";
        };
        group = mkOption {
          type = types.str;
          default = "";
          description = "Primary group.";
        };
        extraGroups = mkOption {
          type = types.listOf types.str;
          default = [ ];
          description = "Further groups.";
        };
        home = mkOption {
          type = types.path;
          default = "/var/empty";
          description = "Home directory.";
        };
        description = mkOption {
          type = types.str;
          default = "";
          description = "GECOS.";
        };
        linger = mkOption {
          type = types.nullOr types.bool;
          default = null;
          description = "Start the user's manager at boot.";
        };
      };
      config = lib.mkIf config.isNormalUser {
        group = lib.mkDefault "users";
        home = lib.mkDefault "/home/${name}";
      };
    };

  enable = description: lib.mkEnableOption description;
in
{
  options = {
    # nixos/modules/misc/assertions.nix
    assertions = mkOption {
      type = types.listOf types.unspecified;
      internal = true;
      default = [ ];
      description = "Conditions that must hold; a build fails with the messages of those that do not.";
    };
    warnings = mkOption {
      type = types.listOf types.str;
      internal = true;
      default = [ ];
      description = "Messages printed by a build.";
    };

    environment.etc = mkOption {
      type = types.attrsOf (
        types.submodule (
          { name, ... }:
          {
            options = {
              target = mkOption {
                type = types.str;
                default = name;
                description = "Path under /etc.";
              };
              source = mkOption {
                type = types.path;
                description = "The file.";
              };
              mode = mkOption {
                type = types.str;
                default = "symlink";
                description = "symlink, or a mode for a copy.";
              };
            };
          }
        )
      );
      default = { };
      description = "Files in /etc.";
    };
    environment.sessionVariables = mkOption {
      type = types.attrsOf (
        types.oneOf [
          (types.listOf (
            types.oneOf [
              types.int
              types.str
              types.path
            ]
          ))
          types.int
          types.str
          types.path
        ]
      );
      default = { };
      description = "Variables of every session (PAM).";
    };
    environment.systemPackages = mkOption {
      type = types.listOf types.package;
      default = [ ];
      description = "Packages in /run/current-system/sw.";
    };

    security.allowUserNamespaces = mkOption {
      type = types.bool;
      default = true;
      description = "user.max_user_namespaces above 0.";
    };
    security.unprivilegedUsernsClone = mkOption {
      type = types.bool;
      default = false;
      description = "kernel.unprivileged_userns_clone.";
    };
    programs.nix-ld.enable = enable "nix-ld";

    systemd.services = mkOption {
      type = types.attrsOf (types.submodule serviceModule);
      default = { };
      description = "System services.";
    };
    systemd.sockets = mkOption {
      type = types.attrsOf (types.submodule socketModule);
      default = { };
      description = "System sockets.";
    };
    systemd.slices = mkOption {
      type = types.attrsOf (types.submodule sliceModule);
      default = { };
      description = "Slices.";
    };
    systemd.targets = mkOption {
      type = types.attrsOf (types.submodule commonUnitOptions);
      default = { };
      description = "Targets.";
    };
    systemd.units = mkOption {
      type = types.attrsOf (
        types.submodule {
          options.text = mkOption {
            type = types.str;
            description = "The unit file.";
          };
        }
      );
      default = { };
      description = "Unit files, made from systemd.services and systemd.sockets.";
    };
    systemd.tmpfiles.settings = mkOption {
      type = types.attrsOf (types.attrsOf (types.attrsOf (types.submodule tmpfilesEntry)));
      default = { };
      description = "tmpfiles.d rules: file name -> path -> type -> entry.";
    };

    users.users = mkOption {
      type = types.attrsOf (types.submodule userModule);
      default = { };
      description = "Users.";
    };
    users.groups = mkOption {
      type = types.attrsOf (
        types.submodule (
          { name, ... }:
          {
            options = {
              name = mkOption {
                type = types.str;
                default = name;
                description = "Group name.";
              };
              gid = mkOption {
                type = types.nullOr types.int;
                default = null;
                description = "The gid.";
              };
            };
          }
        )
      );
      default = { };
      description = "Groups.";
    };

    # nixos/modules/virtualisation/qemu-vm.nix (the VM test's nodes)
    virtualisation.memorySize = mkOption {
      type = types.ints.positive;
      default = 1024;
      description = "MiB of memory.";
    };
    virtualisation.cores = mkOption {
      type = types.ints.positive;
      default = 1;
      description = "CPUs.";
    };

    # nixos/modules/services/databases/postgresql.nix (the VM test's queued node)
    services.postgresql = {
      enable = enable "PostgreSQL";
      ensureDatabases = mkOption {
        type = types.listOf types.str;
        default = [ ];
        description = "Databases created at start.";
      };
      ensureUsers = mkOption {
        type = types.listOf (
          types.submodule {
            options = {
              name = mkOption {
                type = types.str;
                description = "Role name.";
              };
              ensureDBOwnership = mkOption {
                type = types.bool;
                default = false;
                description = "Owns the database of the same name.";
              };
            };
          }
        );
        default = [ ];
        description = "Roles created at start.";
      };
    };
  };

  config = {
    # users-groups.nix refuses these two.
    assertions = lib.concatLists (
      lib.mapAttrsToList (name: user: [
        {
          assertion = user.isSystemUser != user.isNormalUser;
          message = "Exactly one of users.users.${name}.isSystemUser and users.users.${name}.isNormalUser must be set.";
        }
        {
          assertion = user.group != "";
          message = "users.users.${name}.group is unset.";
        }
      ]) config.users.users
    );

    systemd.units =
      lib.mapAttrs' (
        name: unit:
        lib.nameValuePair "${name}.service" {
          text = unitSection unit + section "Service" unit.serviceConfig;
        }
      ) (lib.filterAttrs (_: u: u.enable) config.systemd.services)
      // lib.mapAttrs' (
        name: unit:
        lib.nameValuePair "${name}.socket" {
          text =
            unitSection unit + section "Socket" ({ ListenStream = unit.listenStreams; } // unit.socketConfig);
        }
      ) (lib.filterAttrs (_: u: u.enable) config.systemd.sockets)
      // lib.mapAttrs' (
        name: unit:
        lib.nameValuePair "${name}.slice" { text = unitSection unit + section "Slice" unit.sliceConfig; }
      ) (lib.filterAttrs (_: u: u.enable) config.systemd.slices)
      // lib.mapAttrs' (name: unit: lib.nameValuePair "${name}.target" { text = unitSection unit; }) (
        lib.filterAttrs (_: u: u.enable) config.systemd.targets
      );
  };
}
