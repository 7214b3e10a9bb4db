//! Log levels of `logging/setLevel` and `notifications/message` (RFC 5424 names).

/// RFC 5424 levels used by `logging/setLevel`, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The position of a level name in [`LOG_LEVELS`].
pub fn log_level_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_from_least_severe() {
        assert_eq!(log_level_rank("debug"), Some(0));
        assert_eq!(log_level_rank("emergency"), Some(LOG_LEVELS.len() - 1));
        assert_eq!(log_level_rank("loud"), None);
    }
}
