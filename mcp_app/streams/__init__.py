"""Cross-process session and stream state, shared by every serving process (Redis, or process memory
and the database without it): the session store and admission, the event store, the standalone
stream's slot, stream caps, polling, the in-flight registry and draining. The HTTP side that uses it
is transport/; past a cap this package raises, and transport/refusals.py answers 429.
"""
