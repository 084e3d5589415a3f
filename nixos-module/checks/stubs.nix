# Stand-ins for the parts of nixpkgs `lib` and `pkgs` that the flake, the
# package and the module touch, so their structure can be evaluated offline
# (nixpkgs cannot be fetched on the machines this project is built on).
#
# They model shapes, not behaviour: option types keep a description and the
# types they wrap; packages are fake store paths. What these checks prove is
# that the files evaluate, expose the right attributes and options, and feed
# the right values to nixpkgs; that nixpkgs accepts them is proved only by
# `nix flake check` on a machine with nixpkgs.
let
  inherit (builtins)
    attrNames
    compareVersions
    concatStringsSep
    listToAttrs
    map
    ;

  simple = description: { inherit description; };
in
rec {
  systems = [
    "x86_64-linux"
    "aarch64-linux"
  ];

  types = {
    bool = simple "boolean";
    int = simple "signed integer";
    str = simple "string";
    nonEmptyStr = simple "non-empty string";
    path = simple "path";
    package = simple "package";
    nullOr = t: {
      description = "null or ${t.description}";
      inner = t;
    };
    listOf = t: {
      description = "list of ${t.description}";
      elem = t;
      suffix = "*";
    };
    attrsOf = t: {
      description = "attribute set of ${t.description}";
      elem = t;
      suffix = "<name>";
    };
    enum = values: {
      description = "one of ${concatStringsSep ", " (map (v: ''"${v}"'') values)}";
    };
    submodule = module: {
      description = "submodule";
      modules = [ module ];
    };
    addCheck = t: _check: t;
    strMatching = pattern: simple "string matching the pattern ${pattern}";
  };

  lib = {
    inherit types;
    mkOption = attrs: attrs // { _type = "option"; };
    mkEnableOption = name: {
      _type = "option";
      type = types.bool;
      default = false;
      description = "Whether to enable ${name}.";
    };
    literalExpression = text: {
      _type = "literalExpression";
      inherit text;
    };
    mkIf = condition: content: {
      _type = "if";
      inherit condition content;
    };
    mkMerge = contents: {
      _type = "merge";
      inherit contents;
    };
    mkDefault = value: {
      _type = "override";
      priority = 1000;
      inherit value;
    };
    genAttrs =
      names: f:
      listToAttrs (
        map (n: {
          name = n;
          value = f n;
        }) names
      );
    optionalAttrs = cond: attrs: if cond then attrs else { };
    optional = cond: x: if cond then [ x ] else [ ];
    mapAttrsToList = f: attrs: map (n: f n attrs.${n}) (attrNames attrs);
    filterAttrs =
      pred: attrs:
      listToAttrs (
        map (n: {
          name = n;
          value = attrs.${n};
        }) (builtins.filter (n: pred n attrs.${n}) (attrNames attrs))
      );
    mapAttrs' = f: attrs: listToAttrs (map (n: f n attrs.${n}) (attrNames attrs));
    nameValuePair = name: value: { inherit name value; };
    inherit (builtins) concatLists;
    versionAtLeast = a: b: compareVersions a b >= 0;
    versionOlder = a: b: compareVersions a b < 0;
    getVersion = p: p.version;
    throwIfNot = cond: msg: value: if cond then value else throw msg;
    licenses.asl20 = "Apache-2.0";
    fileset = {
      toSource = args: args;
      unions = paths: {
        union = paths;
      };
      difference = a: b: {
        include = a;
        exclude = b;
      };
      fileFilter = predicate: root: {
        filter = predicate;
        inherit root;
      };
    };
  };

  # pkgs.formats: `generate` keeps the value it would serialize.
  formats.toml = _: {
    type = simple "TOML value";
    generate = name: value: {
      inherit name value;
      outPath = "/nix/store/00000000000000000000000000000000-${name}";
    };
  };

  fakeDrv = name: {
    type = "derivation";
    inherit name;
    version = "0";
    outPath = "/nix/store/00000000000000000000000000000000-${name}";
  };

  pkgs =
    system:
    let
      self = {
        inherit lib;
        stdenv.hostPlatform = {
          inherit system;
          isLinux = true;
        };
        callPackage = path: args: {
          type = "derivation";
          callPackageOf = path;
          callPackageArgs = args;
          version = "0.0.0-stub";
          outPath = "/nix/store/00000000000000000000000000000000-stub-jig";
        };
        mkShell = attrs: attrs // { mkShell = true; };
        # runCommand keeps its script and passthru, as the derivation would.
        runCommand = name: env: script: {
          type = "derivation";
          inherit name script;
          inherit (env) passthru;
          outPath = "/nix/store/00000000000000000000000000000000-${name}";
        };
        inherit formats;
        testers.runNixOSTest = test: test // { runNixOSTest = true; };
        rustPlatform.rustLibSrc = fakeDrv "rust-lib-src";
      }
      // listToAttrs (
        map
          (name: {
            inherit name;
            value = fakeDrv name;
          })
          [
            "rustc"
            "cargo"
            "clippy"
            "rustfmt"
            "rust-analyzer"
            "python3"
            "bubblewrap"
            "nodejs"
            "bun"
            "deno"
            "clang"
            "lld"
            "wasm-tools"
            "wabt"
            "nixfmt-tree"
            "makeBinaryWrapper"
          ]
      );
    in
    self;

  nixpkgs = {
    inherit lib;
    legacyPackages = lib.genAttrs systems pkgs;
  };

  # "path: type" for every option in a module's `options`, descending into
  # submodules: `*` stands for a list item, `<name>` for an attribute name.
  optionList =
    options:
    let
      isOption = v: (v._type or null) == "option";
      subOptions =
        m:
        (
          if builtins.isFunction m then
            m {
              name = "<name>";
              config = { };
              inherit lib;
            }
          else
            m
        ).options or { };
      walkType =
        prefix: t:
        if t ? inner then
          walkType prefix t.inner
        else if t ? elem then
          walkType "${prefix}.${t.suffix}" t.elem
        else if t ? modules then
          builtins.concatLists (map (m: walkAttrs prefix (subOptions m)) t.modules)
        else
          [ ];
      walkAttrs =
        prefix: attrs:
        builtins.concatLists (
          map (
            name:
            let
              v = attrs.${name};
              path = if prefix == "" then name else "${prefix}.${name}";
            in
            if isOption v then [ "${path}: ${v.type.description}" ] ++ walkType path v.type else walkAttrs path v
          ) (attrNames attrs)
        );
    in
    walkAttrs "" options;
}
