"""The settings of the e2e servers and commands: the project's own, read from the same environment,
with passwords hashed by MD5 first, as tests/conftest.py does in process. Django's PBKDF2 costs ~0.2 s
of CPU a hash, spent on every sign-in of the browser and OAuth tests and on every user they make; the
hashers Django accepts stay listed after it, so nothing the project does with a password changes."""

from django.conf import global_settings

from mcpsite.settings import *  # noqa: F403 - the project's settings, unchanged but for the hashers

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]
