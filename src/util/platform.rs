//! Which system's rules apply where Unix and Windows differ in what is only text (how a program
//! is found by name, how environment variable names compare): [`Platform::HERE`] in use, either
//! one in tests, so the Windows rules are checked on a Unix machine too.

/// A family of systems with rules of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Unix,
    Windows,
}

impl Platform {
    /// The system mcpmux was built for.
    pub const HERE: Platform = if cfg!(windows) {
        Platform::Windows
    } else {
        Platform::Unix
    };

    /// Whether environment variable names `a` and `b` are the same variable (Windows ignores
    /// case, as with `Path` and `PATH`).
    pub fn same_variable(self, a: &str, b: &str) -> bool {
        match self {
            Platform::Unix => a == b,
            Platform::Windows => a.eq_ignore_ascii_case(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names_ignore_case_on_windows_only() {
        assert!(Platform::Windows.same_variable("Path", "PATH"));
        assert!(!Platform::Unix.same_variable("Path", "PATH"));
        assert!(Platform::Unix.same_variable("PATH", "PATH"));
        assert!(!Platform::Windows.same_variable("PATHEXT", "PATH"));
    }
}
