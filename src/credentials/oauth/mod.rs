//! The OAuth 2.1 client side of the MCP authorization spec: discovery, registration, PKCE, the token endpoint.
