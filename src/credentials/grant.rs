//! A grant: what an authorization server issued to mcpmux for one principal and one upstream.
