"""The application layer: what the CLI and the web page share above the registry."""
