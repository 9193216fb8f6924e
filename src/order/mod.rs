//! Ordering scopes.
