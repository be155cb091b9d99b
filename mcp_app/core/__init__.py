"""The vocabulary every layer shares: definitions, the request context, protocol revisions."""
