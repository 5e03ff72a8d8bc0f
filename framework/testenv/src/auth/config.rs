//! The server's authentication and authorization settings: the tokens it accepts and whether
//! RBAC decides.

use super::tokens::Tokens;

/// The server's authentication and authorization configuration.
#[derive(Debug)]
pub struct Auth {
    /// Every token the server accepts.
    pub tokens: Tokens,
    /// Whether requests are authorized by RBAC (off: every request is allowed).
    pub enforce: bool,
}
