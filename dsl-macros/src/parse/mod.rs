//! The user's function -> a checked model of the kernel. Every rejection is reported at the span of
//! the offending syntax, and all of them are reported at once.

pub mod body;
pub mod control_flow;
pub mod generics;
pub mod kernel;
pub mod params;

/// Collects every error found while checking a kernel, so the user sees them in one build.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(first) => first.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// `Ok(value)` if nothing was reported.
    pub fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }
}
