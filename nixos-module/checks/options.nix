# The option list of `services.jig`, one "path: type" per line, as nixpkgs'
# lib documents it (lib.optionAttrSetToDocList: `*` stands for a list item,
# `<name>` for an attribute name). ../check.sh compares it with
# options.expected.
{ nixpkgsLib }:
let
  inherit (import ./system.nix { inherit nixpkgsLib; }) lib nixos;
  options = lib.optionAttrSetToDocList (nixos [ ../default.nix ]).options.services.jig;
  shown = builtins.filter (o: o.visible != false && !o.internal) options;
in
lib.concatMapStrings (o: "${o.name}: ${o.type}\n") shown
