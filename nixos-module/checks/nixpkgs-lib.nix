# nixpkgs' `lib`, imported from `dir` (an absolute path string: the `lib`
# directory of a nixpkgs checkout or of the nixpkgs.lib mirror).
#
# That lib asks for Nix >= 2.18; Debian 12's Nix 2.8 lacks one builtin it
# reaches here, `readFileType` (Nix 2.14, used by lib.fileset for the
# package's source). When the running Nix lacks it, the lib is imported with
# that one builtin supplied from `readDir`, which reports the same types;
# the lib's own files are evaluated unchanged.
dir:
let
  path = /. + dir;
  scope = {
    builtins = builtins // {
      readFileType = p: (builtins.readDir (dirOf p)).${baseNameOf p};
    };
    # Every file the lib imports sees the same builtins.
    import = scopedImport scope;
  };
in
if !(builtins.pathExists (path + "/modules.nix")) then
  throw "${dir} is not nixpkgs' lib directory (no modules.nix)"
else if builtins ? readFileType then
  import path
else
  scopedImport scope (path + "/default.nix")
