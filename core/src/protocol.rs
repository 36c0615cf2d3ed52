//! The MCP JSON-RPC codec (filled in by the core issue).
