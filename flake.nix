{
  description = "jig: a FLOW host";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      # jig's containment is Linux-only (user namespaces, cgroup v2, Bubblewrap).
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];

      forEachSystem = f: lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});
    in
    {
      packages = forEachSystem (
        _system: pkgs:
        let
          jig = pkgs.callPackage ./nixos-module/package.nix { };
        in
        {
          inherit jig;
          default = jig;
        }
      );

      apps = forEachSystem (
        system: _pkgs: {
          default = {
            type = "app";
            program = "${self.packages.${system}.default}/bin/jig";
            meta.description = "Run the jig FLOW host";
          };
        }
      );

      devShells = forEachSystem (
        _system: pkgs: {
          default = pkgs.mkShell {
            packages = [
              pkgs.rustc
              pkgs.cargo
              pkgs.clippy
              pkgs.rustfmt
              pkgs.rust-analyzer
              pkgs.python3
              pkgs.bubblewrap
              pkgs.nodejs
              pkgs.clang
              pkgs.lld
              pkgs.wasm-tools
              pkgs.wabt
              pkgs.nixfmt-tree
            ];
            RUST_SRC_PATH = "${pkgs.rustPlatform.rustLibSrc}";
            # Same lookup as the installed host: containment by absolute path.
            JIG_BWRAP_PATH = "${pkgs.bubblewrap}/bin/bwrap";
          };
        }
      );

      # The module builds jig from this repository with the system's own
      # nixpkgs (see services.jig.package), so it needs no overlay.
      nixosModules.default = import ./nixos-module;

      overlays.default = final: _prev: {
        jig = final.callPackage ./nixos-module/package.nix { };
      };

      checks = forEachSystem (
        system: pkgs:
        {
          package = self.packages.${system}.default;
        }
        // lib.optionalAttrs pkgs.stdenv.hostPlatform.isLinux {
          module = import ./nixos-module/test.nix { inherit pkgs; };
        }
      );

      formatter = forEachSystem (_system: pkgs: pkgs.nixfmt-tree);
    };
}
