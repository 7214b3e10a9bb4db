//! The environment a stdio server starts with. By default it gets only what a program needs to
//! run, not mcpmux's whole environment (which may hold tokens meant for mcpmux or for other
//! servers), plus the server's own `env` table; `inherit_env = true` passes everything instead.
//!
//! Passed by default, and why:
//! - `PATH`: finding `node`, `npx`, `uvx`, `python` and what they run.
//! - `HOME`, `USER`, `LOGNAME`, `SHELL`: home-relative caches and configuration (`~/.npm`,
//!   `~/.cache/uv`, `~/.config`), user lookups, the shell `npx` runs package scripts with.
//! - `TERM`, `LANG`, `LANGUAGE`, `LC_*`: the locale, which sets how Python and others encode text.
//! - `TZ`: the local time zone (time servers answer in it).
//! - `TMPDIR`, `TMP`, `TEMP`: where temporary files go.
//! - `http_proxy`, `https_proxy`, `no_proxy`, `all_proxy` (either case): reaching the network
//!   (and npm's registry) through the proxy mcpmux is configured with.
//! - `NODE_EXTRA_CA_CERTS`, `SSL_CERT_FILE`, `SSL_CERT_DIR`, `REQUESTS_CA_BUNDLE`,
//!   `CURL_CA_BUNDLE`: trusting a company's certificate authority (node, OpenSSL and Python's
//!   `ssl`, `requests`, curl).
//! - `XDG_*`: the base directories (cache, config, data, runtime) uv, pip and others use.
//! - `npm_config_registry`, `_cache`, `_userconfig`, `_prefix`, `_cafile`, `_proxy`,
//!   `_https_proxy`, `_noproxy`, `_strict_ssl` (either case): how `npx` reaches its registry.
//!   Not other `npm_config_*` variables: those may carry registry credentials.
//! - `DISPLAY`, `WAYLAND_DISPLAY`: servers that open a browser window.
//!
//! - On Windows, whose variable names ignore case (`Path` is `PATH`), also what a program there
//!   needs to start and to find the user's folders: `SystemRoot`, `SystemDrive`, `windir`,
//!   `ComSpec`, `PATHEXT`, `OS`, `PROCESSOR_ARCHITECTURE`, `NUMBER_OF_PROCESSORS`,
//!   `USERPROFILE`, `USERNAME`, `USERDOMAIN`, `HOMEDRIVE`, `HOMEPATH`, `APPDATA`,
//!   `LOCALAPPDATA` (npm's global packages and cache), `ProgramData`, `ProgramFiles`,
//!   `ProgramFiles(x86)`, `ProgramW6432`, `CommonProgramFiles`, `CommonProgramFiles(x86)`,
//!   `CommonProgramW6432`.
//!
//! Anything else (an API key, `SSH_AUTH_SOCK`, `NODE_OPTIONS`, a virtualenv) is given to the
//! server that needs it by its `env` table (`KEY = "${KEY}"`) or by `inherit_env = true`.

use crate::util::platform::Platform;
use std::ffi::{OsStr, OsString};

/// Variables passed by exact name.
const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "DISPLAY",
    "WAYLAND_DISPLAY",
];

/// Variables passed by exact name in either case (lower or upper).
const PASSED_ANY_CASE: &[&str] = &[
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "npm_config_registry",
    "npm_config_cache",
    "npm_config_userconfig",
    "npm_config_prefix",
    "npm_config_cafile",
    "npm_config_proxy",
    "npm_config_https_proxy",
    "npm_config_noproxy",
    "npm_config_strict_ssl",
];

/// Variables passed by prefix.
const PASSED_PREFIXES: &[&str] = &["LC_", "XDG_"];

/// Variables passed on Windows besides the others (in any case, as all are there).
const PASSED_ON_WINDOWS: &[&str] = &[
    "SystemRoot",
    "SystemDrive",
    "windir",
    "ComSpec",
    "PATHEXT",
    "OS",
    "PROCESSOR_ARCHITECTURE",
    "NUMBER_OF_PROCESSORS",
    "USERPROFILE",
    "USERNAME",
    "USERDOMAIN",
    "HOMEDRIVE",
    "HOMEPATH",
    "APPDATA",
    "LOCALAPPDATA",
    "ProgramData",
    "ProgramFiles",
    "ProgramFiles(x86)",
    "ProgramW6432",
    "CommonProgramFiles",
    "CommonProgramFiles(x86)",
    "CommonProgramW6432",
];

/// Whether a stdio server that does not inherit the whole environment gets variable `name`.
pub fn is_passed(name: &OsStr) -> bool {
    is_passed_on(Platform::HERE, name)
}

/// [`is_passed`] on `platform`.
fn is_passed_on(platform: Platform, name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    if platform == Platform::Windows {
        let has_prefix = |prefix: &&str| {
            (name.get(..prefix.len())).is_some_and(|start| start.eq_ignore_ascii_case(prefix))
        };
        let same = |passed: &&str| passed.eq_ignore_ascii_case(name);
        return PASSED
            .iter()
            .chain(PASSED_ANY_CASE)
            .chain(PASSED_ON_WINDOWS)
            .any(same)
            || PASSED_PREFIXES.iter().any(has_prefix);
    }
    PASSED.contains(&name)
        || PASSED_ANY_CASE
            .iter()
            .any(|passed| *passed == name || passed.to_ascii_uppercase() == name)
        || PASSED_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// The part of `vars` (mcpmux's environment) a stdio server gets by default.
pub fn minimal(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    vars.filter(|(name, _)| is_passed(name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passed(names: &[&str]) -> Vec<String> {
        let vars = names.iter().map(|n| (OsString::from(n), OsString::from("v")));
        (minimal(vars).into_iter())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect()
    }

    fn passed_on(platform: Platform, names: &[&str]) -> Vec<String> {
        (names.iter())
            .filter(|name| is_passed_on(platform, OsStr::new(name)))
            .map(|name| name.to_string())
            .collect()
    }

    #[test]
    fn only_the_documented_variables_pass() {
        let all = [
            "PATH",
            "HOME",
            "LC_ALL",
            "XDG_CACHE_HOME",
            "https_proxy",
            "HTTPS_PROXY",
            "npm_config_registry",
            "NPM_CONFIG_CACHE",
            "NODE_EXTRA_CA_CERTS",
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "npm_config__authToken",
            "NPM_CONFIG_//registry.npmjs.org/:_authToken",
            "AWS_SECRET_ACCESS_KEY",
            "Path",
            "LCX",
            "RUST_LOG",
        ];
        assert_eq!(
            passed(&all),
            [
                "PATH",
                "HOME",
                "LC_ALL",
                "XDG_CACHE_HOME",
                "https_proxy",
                "HTTPS_PROXY",
                "npm_config_registry",
                "NPM_CONFIG_CACHE",
                "NODE_EXTRA_CA_CERTS",
            ]
        );
    }

    #[test]
    fn windows_passes_its_own_variables_in_any_case() {
        let all = [
            "Path",
            "SystemRoot",
            "SYSTEMROOT",
            "windir",
            "PATHEXT",
            "USERPROFILE",
            "APPDATA",
            "LOCALAPPDATA",
            "ProgramFiles(x86)",
            "Temp",
            "Https_Proxy",
            "lc_all",
            "OPENAI_API_KEY",
            "npm_config__authToken",
            "LCX",
        ];
        assert_eq!(
            passed_on(Platform::Windows, &all),
            [
                "Path",
                "SystemRoot",
                "SYSTEMROOT",
                "windir",
                "PATHEXT",
                "USERPROFILE",
                "APPDATA",
                "LOCALAPPDATA",
                "ProgramFiles(x86)",
                "Temp",
                "Https_Proxy",
                "lc_all",
            ]
        );
        // None of them is passed on Unix, where they mean nothing.
        assert_eq!(
            passed_on(Platform::Unix, &["SystemRoot", "APPDATA", "Path"]),
            Vec::<String>::new()
        );
    }
}
