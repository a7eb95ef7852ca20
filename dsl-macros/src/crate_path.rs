//! How generated code names the lowering crate (`L` in the contract) from the user's crate.

use proc_macro2::{Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote_spanned;
use syn::Ident;

/// The path of the lowering crate as seen from the crate being compiled: `::tessera::lowering`
/// for users of the facade, `::tessera_lowering` (or its renamed dependency) otherwise. Lowering
/// itself declares `extern crate self as tessera_lowering;` so the same path works inside it.
#[derive(Clone, Debug)]
pub struct Lowering {
    krate: String,
    via_facade: bool,
}

impl Lowering {
    /// Looks the crate up in the Cargo.toml of the crate being compiled.
    pub fn find() -> Self {
        match crate_name("tessera") {
            // `Itself` means a target of the facade package; its integration tests and binaries
            // reach it as `::tessera` (its lib would need `extern crate self as tessera;`).
            Ok(FoundCrate::Name(name)) => Self {
                krate: name,
                via_facade: true,
            },
            Ok(FoundCrate::Itself) => Self {
                krate: "tessera".into(),
                via_facade: true,
            },
            Err(_) => match crate_name("tessera-lowering") {
                Ok(FoundCrate::Name(name)) => Self {
                    krate: name,
                    via_facade: false,
                },
                Ok(FoundCrate::Itself) | Err(_) => Self {
                    krate: "tessera_lowering".into(),
                    via_facade: false,
                },
            },
        }
    }

    /// The path with every token at `span`, so calls through it (e.g. `#[track_caller]` ones)
    /// report the user's location and diagnostics stay on the user's code.
    pub fn at(&self, span: Span) -> TokenStream {
        let krate = Ident::new(&self.krate, span);
        if self.via_facade {
            quote_spanned!(span=> ::#krate::lowering)
        } else {
            quote_spanned!(span=> ::#krate)
        }
    }
}
