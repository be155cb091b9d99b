"""A tenant's definitions as one document (export, import with a dry-run diff) and OpenAPI → http tools."""
