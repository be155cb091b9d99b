"""The fleet harness (issue 35): the engines a deployment puts around the platform (PgBouncer, ...),
started on this machine for the tests, `.ci/run` and `bench/`."""
