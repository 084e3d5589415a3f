//! Bindings generated from the `jig:provider` component world
//! (`providers/wit/provider.wit`). Public only so
//! [`crate::export_provider!`] can reach them.

wit_bindgen::generate!({
    path: "../wit",
    world: "capability-provider",
    pub_export_macro: true,
    export_macro_name: "export_capability_provider",
    default_bindings_module: "::jig_provider_sdk::wit",
});
