"""Connected accounts: a tenant's OAuth providers and each person's connection to them (issue 23).

`vault` is what a tool uses (`access_token`, raising handlers.accounts' `NotConnected`; `start_link`, `wait_connected`);
`provider_http` talks to the providers; `pages` are the person's pages. Decisions:
docs/decisions/identity.md (AMB-207..AMB-211).
"""
