"""Model providers: one module per wire protocol, on the official SDKs."""
