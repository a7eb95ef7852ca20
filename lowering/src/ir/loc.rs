//! Source locations: every op remembers the user's `file:line:column` that created it.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loc {
    pub file: &'static str,
    pub line: u32,
    pub column: u32,
}

impl Loc {
    /// The location of the caller, through any chain of `#[track_caller]` functions.
    #[track_caller]
    pub fn caller() -> Loc {
        Loc::from(std::panic::Location::caller())
    }

    /// For IR built by code rather than by a user (tests, synthesized ops).
    pub const UNKNOWN: Loc = Loc {
        file: "<unknown>",
        line: 0,
        column: 0,
    };
}

impl From<&'static std::panic::Location<'static>> for Loc {
    fn from(l: &'static std::panic::Location<'static>) -> Loc {
        Loc {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}
