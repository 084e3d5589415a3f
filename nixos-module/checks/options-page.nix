# The guide's page of the module's options (docs/src/nixos-options.md),
# generated from the options themselves as nixpkgs' lib documents them
# (lib.optionAttrSetToDocList). ../check.sh compares the page with this;
# `JIG_WRITE_OPTIONS_PAGE=1 bash nixos-module/check.sh` rewrites it.
{ nixpkgsLib }:
let
  inherit (import ./system.nix { inherit nixpkgsLib; }) lib nixos;
  options = lib.optionAttrSetToDocList (nixos [ ../default.nix ]).options.services.jig;
  shown = builtins.filter (o: o.visible != false && !o.internal) options;

  # A literal value: inline when it is one line, else a Nix block.
  literal =
    label: value:
    let
      text = value.text or (builtins.toJSON value);
    in
    if lib.hasInfix "\n" text then
      "- ${label}:\n\n  ```nix\n${lib.concatMapStrings (l: "  ${l}\n") (lib.splitString "\n" text)}  ```\n"
    else
      "- ${label}: `${text}`\n";

  option =
    o:
    "\n## `${o.name}`\n\n"
    + lib.optionalString (o.description != null && o.description != "") "${lib.trim o.description}\n\n"
    + "- Type: ${o.type}\n"
    + lib.optionalString (o ? default) (literal "Default" o.default)
    + lib.optionalString (o ? example) (literal "Example" o.example)
    + lib.optionalString o.readOnly "- Read-only\n";
in
''
  # NixOS options

  Every option of `services.jig`, the NixOS module the flake offers as
  `nixosModules.default` ([Serving and workers](serving.md#nixos) says what
  it sets up). This page is generated from the module's own declarations by
  `nixos-module/checks/options-page.nix`; `nixos-module/check.sh` fails when
  the two disagree. `<name>` stands for an attribute name, `*` for a list
  item.
''
+ lib.concatMapStrings option shown
