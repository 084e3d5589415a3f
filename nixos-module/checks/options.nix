# The option list of `services.jig`, one "path: type" per line, evaluated with
# stub nixpkgs (../check.sh compares it with options.expected).
let
  stubs = import ./stubs.nix;
  module = import ../default.nix {
    config = { };
    inherit (stubs) lib;
    pkgs = stubs.pkgs "x86_64-linux";
  };
in
builtins.concatStringsSep "\n" (stubs.optionList module.options) + "\n"
