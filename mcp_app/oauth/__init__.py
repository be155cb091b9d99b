"""OAuth 2.1 glue: django-oauth-toolkit is the authorization server; this package binds it to tenants."""
