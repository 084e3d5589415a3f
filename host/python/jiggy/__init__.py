"""jiggy: namespace of the bundled FLOW SDK; see jiggy.flow."""
