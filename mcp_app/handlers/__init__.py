"""What a DB-defined tool or resource template runs: see registry.KINDS."""
