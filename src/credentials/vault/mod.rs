//! Where grants live, sealed with AEAD at rest.
