"""Definition changes → version bump, cache invalidation, list_changed / resources/updated."""
